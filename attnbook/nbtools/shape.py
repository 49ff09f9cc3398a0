"""A chapter's standard shape (`make outputs` runs ``prepare`` first): markdown
cells split at headings and solution gates, the set-up cell, slide metadata."""

from __future__ import annotations

import json

from ._io import _FENCE, _HEADING, _lines, _load, _save, _source
from .setup_cell import bootstrap
from .slides import slides

def _split_markdown(text: str) -> list[str]:
    """Split markdown before top-level headings and at solution gates (fences are respected)."""
    pieces, current, fence = [], [], None  # fence: (char, length, info) of the open fence
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None:
            if m:
                marker, info = m.group(1), m.group(2)
                if info.startswith("{solution-start}") and current:
                    pieces.append(current)
                    current = []
                fence = (marker[0], len(marker), info)
            elif _HEADING.match(line) and current:
                pieces.append(current)
                current = []
            current.append(line)
        else:
            current.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2):
                if fence[2].startswith("{solution-end}"):
                    pieces.append(current)
                    current = []
                fence = None
    pieces.append(current)
    texts = ["\n".join(p).strip("\n") for p in pieces]
    return [t for t in texts if t.strip()]


def split_cells(nb: dict) -> bool:
    """Split markdown cells before headings and at solution gates. Returns True if it changed."""
    cells, changed = [], False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            cells.append(cell)
            continue
        parts = _split_markdown(_source(cell))
        if len(parts) <= 1:
            cells.append(cell)
            continue
        changed = True
        base = cell.get("id", "md")
        for k, text in enumerate(parts):
            new = {**json.loads(json.dumps(cell)), "source": _lines(text)}
            if k:
                new["id"] = f"{base}-{k}"[:64]
                new["metadata"] = {}
            cells.append(new)
    nb["cells"] = cells
    return changed


def prepare(path) -> bool:
    """split + bootstrap + slides on one notebook in place. Returns True if it changed anything."""
    nb = _load(path)
    changed = split_cells(nb)
    changed = bootstrap(nb) or changed
    changed = slides(nb) or changed
    if changed:
        _save(path, nb)
    return changed


