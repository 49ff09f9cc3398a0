"""Notebook housekeeping used by `make outputs`.

``python -m attnbook.nbtools tidy NOTEBOOK...`` removes the widget state that
nbconvert stores in a notebook's metadata when it executes a cell with a
slider. The site has no kernel to drive a slider, and with that state present
the page would load the widget manager from a CDN; the static site shows the
fixed-setting version of each demo instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["tidy"]


def tidy(path) -> bool:
    """Strip stored widget state from one notebook in place. Returns True if it changed."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    changed = nb.get("metadata", {}).pop("widgets", None) is not None
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
            print(f"tidied {p}: removed stored widget state")
    return 0


if __name__ == "__main__":
    sys.exit(main())
