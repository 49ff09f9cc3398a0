"""Every code line and every line of text output fits in 79 characters.

A reader sees a chapter in JupyterLab, in Colab and on the site; a line longer
than 79 characters scrolls sideways in all three (the site's code column is
sized for 79 characters, see _static/attnbook.css), and the part cut off is
usually the shape comment, which is the lesson. So the limit is kept in the
notebooks themselves, not papered over by wrapping in CSS:

- code cells, the hidden set-up cell included (its template is
  ``attnbook.nbtools.BOOTSTRAP``);
- text outputs: printed streams, ``text/plain`` results, and error tracebacks
  (messages from the answer key, PyTorch errors), with colour codes removed.

A failure lists every offending line as ``file, cell N (id), line L: width``,
so it can be fixed in one pass.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attnbook import nbtools

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
LIMIT = 79
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def output_text(output: dict) -> str:
    """The text a reader sees for one output (empty for images and HTML)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _text(output.get("text"))
    if kind == "error":
        return ANSI.sub("", "\n".join(output.get("traceback", [])))
    if kind in ("execute_result", "display_data"):
        data = output.get("data", {})
        if "text/plain" in data and not any(k.startswith("image/") or k == "text/html" for k in data):
            return _text(data["text/plain"])
    return ""


def long_lines(text: str, limit: int = LIMIT) -> list[tuple[int, int, str]]:
    """(line number from 1, width, line) of every line wider than ``limit``."""
    return [(n, len(line), line) for n, line in enumerate(text.splitlines(), 1)
            if len(line) > limit]


def offenders(nb: dict, name: str) -> list[str]:
    found = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        where = f"{name}, cell {index} (id {cell.get('id', '?')})"
        for n, width, line in long_lines(_text(cell.get("source"))):
            found.append(f"{where}, code line {n}: {width} chars: {line.strip()[:60]}")
        for k, output in enumerate(cell.get("outputs", [])):
            for n, width, line in long_lines(output_text(output)):
                found.append(f"{where}, output {k} ({output.get('output_type')}) line {n}: "
                             f"{width} chars: {line.strip()[:60]}")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_and_text_output_lines_fit_in_79_characters(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = offenders(nb, f"chapters/{path.name}")
    assert not found, (f"{len(found)} line(s) longer than {LIMIT} characters:\n"
                       + "\n".join(found))


def test_the_set_up_cell_template_fits():
    found = long_lines(nbtools.bootstrap_source())
    assert not found, "\n".join(f"BOOTSTRAP line {n}: {w} chars: {line}" for n, w, line in found)


def test_the_check_finds_long_code_outputs_and_tracebacks():
    """The check itself: it reports code, stream, result and traceback lines, and nothing else."""
    long = "x" * 80
    nb = {"cells": [
        {"cell_type": "markdown", "source": long},
        {"cell_type": "code", "id": "a", "source": ["ok = 1\n", long], "outputs": [
            {"output_type": "stream", "name": "stdout", "text": ["short\n", long + "\n"]},
            {"output_type": "execute_result", "data": {"text/plain": long}},
            {"output_type": "display_data", "data": {"image/png": long, "text/plain": long}},
            {"output_type": "error", "traceback": ["\x1b[31m" + "y" * 79 + "\x1b[0m", long]},
        ]},
        {"cell_type": "code", "id": "b", "source": "y" * 79, "outputs": []},
    ]}
    found = offenders(nb, "t.ipynb")
    assert [f.split(": ")[0] for f in found] == [
        "t.ipynb, cell 1 (id a), code line 2",
        "t.ipynb, cell 1 (id a), output 0 (stream) line 2",
        "t.ipynb, cell 1 (id a), output 1 (execute_result) line 1",
        "t.ipynb, cell 1 (id a), output 3 (error) line 2",
    ], found
