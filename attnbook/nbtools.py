"""Notebook housekeeping used by `make outputs`.

``python -m attnbook.nbtools tidy NOTEBOOK...`` joins consecutive pieces of
one cell's printed output (their split depends on timing) and removes what executing a
slider cell stores: the widget state in the notebook's metadata and the widget
output of the cell (it carries a random model id, so keeping it would change
the file on every run). The site has no kernel to drive a slider, and with
that state present the page would load the widget manager from a CDN; the
static site shows the fixed-setting version of each demo instead. In
JupyterLab the slider appears when its cell is run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["tidy", "WIDGET_MIME"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _text(output):
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def _merge_streams(outputs):
    """Join consecutive stream outputs of the same stream into one.

    How a kernel's prints are cut into messages depends on timing, so the
    same cell can be stored as one stream output on one run and two on the
    next; joining them makes re-execution give the same file.
    """
    merged = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None
                and prev.get("output_type") == "stream" and prev.get("name") == out.get("name")):
            merged[-1] = {**prev, "text": _text(prev) + _text(out)}
        else:
            merged.append(out)
    return merged


def tidy(path) -> bool:
    """Strip stored widget state and widget outputs from one notebook in place.

    Returns True if it changed anything.
    """
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = nb.get("metadata", {}).pop("widgets", None) is not None
    for cell in nb.get("cells", []):
        outputs = cell.get("outputs", [])
        kept = _merge_streams([o for o in outputs if WIDGET_MIME not in o.get("data", {})])
        if kept != outputs:
            cell["outputs"] = kept
            changed = True
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


# --- optional dependencies of a notebook (PyTorch chapter) ---
# A notebook that needs a package beyond requirements.txt says so in its metadata:
#     "attnbook": {"requires": ["torch"]}
# The root conftest.py skips such a notebook's cells when a package is missing.

INSTALL_HINTS = {"torch": "make torch"}


def notebook_requirements(path) -> list[str]:
    """The optional packages a notebook declares in ``metadata["attnbook"]["requires"]``."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    return list(nb.get("metadata", {}).get("attnbook", {}).get("requires", []))


def missing_requirements(path) -> list[str]:
    """The declared packages that cannot be imported (not found on ``sys.path``)."""
    import importlib.util

    return [name for name in notebook_requirements(path) if importlib.util.find_spec(name) is None]


def skip_reason(missing) -> str:
    """The reason shown by ``pytest -rs`` for a notebook whose packages are missing."""
    hints = sorted({INSTALL_HINTS.get(name, f"pip install {name}") for name in missing})
    return (f"needs {', '.join(missing)}, which is not installed: run `{'` and `'.join(hints)}` "
            "to install it")


__all__ += ["notebook_requirements", "missing_requirements", "skip_reason"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "tidy":
        print("usage: python -m attnbook.nbtools tidy NOTEBOOK...", file=sys.stderr)
        return 2
    for p in argv[1:]:
        if tidy(p):
            print(f"tidied {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
