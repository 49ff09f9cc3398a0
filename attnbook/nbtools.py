"""Notebook housekeeping used by `make outputs`.

``python -m attnbook.nbtools tidy NOTEBOOK...`` removes what executing a
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


def tidy(path) -> bool:
    """Strip stored widget state and widget outputs from one notebook in place.

    Returns True if it changed anything.
    """
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = nb.get("metadata", {}).pop("widgets", None) is not None
    for cell in nb.get("cells", []):
        outputs = cell.get("outputs", [])
        kept = [o for o in outputs if WIDGET_MIME not in o.get("data", {})]
        if len(kept) != len(outputs):
            cell["outputs"] = kept
            changed = True
    if changed:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "tidy":
        print("usage: python -m attnbook.nbtools tidy NOTEBOOK...", file=sys.stderr)
        return 2
    for p in argv[1:]:
        if tidy(p):
            print(f"tidied {p}: removed stored widget state and widget outputs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
