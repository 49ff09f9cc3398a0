"""Optional packages of the test modules (torch, transformers), written once; and a chapter
cell's names (chapter_cell).

A test module that needs them starts with::

    pytestmark = needs("torch", "transformers")
    _imports = imports(globals(), torch="torch", F="torch.nn.functional",
                       Attention="transformers.models.llama.modeling_llama:LlamaAttention")

Without a package, every test of the module is skipped with the reason the
notebooks' skips give (``needs torch, which is not installed: run `make
torch` ...``). With it, the names are imported into the module when its first
test runs, not at collection: every xdist worker collects every module, and
torch and transformers' modeling code cost seconds to import.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from attnbook.nbtools import skip_reason


def needs(*packages: str) -> list:
    """Skip marks for the packages that cannot be imported here."""
    return [pytest.mark.skipif(importlib.util.find_spec(p) is None, reason=skip_reason([p]))
            for p in packages]


def imports(namespace: dict, **names: str):
    """An autouse fixture that imports ``name="module"`` or ``name="module:attribute"``
    into ``namespace`` (a module's globals) before the module's first test."""
    for name in names:
        namespace.setdefault(name, None)

    @pytest.fixture(autouse=True, scope="module")
    def _optional_imports():
        for name, target in names.items():
            module, _, attribute = target.partition(":")
            value = importlib.import_module(module)
            namespace[name] = getattr(value, attribute) if attribute else value

    return _optional_imports


def chapter_cell(chapter, cell_id) -> dict:
    """The names one code cell of a chapter defines (the cell run alone, by its id): how a
    test reads the numbers a page states, such as a model's configuration."""
    import json

    nb = json.loads(chapter.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c.get("id") == cell_id)
    namespace = {}
    exec("".join(cell["source"]), namespace)
    return namespace
