"""Slide metadata (RISE): which cells start a slide, which are skipped."""

from __future__ import annotations

import re

from ._io import _FENCE, SLIDE_TYPES, _source
from .setup_cell import _is_bootstrap

def solution_mask(nb: dict) -> list[bool]:
    """For each cell: does it lie inside a gated solution (solution-start ... solution-end, inclusive)?"""
    mask, inside = [], False
    for cell in nb["cells"]:
        text = _source(cell) if cell["cell_type"] == "markdown" else ""
        starts = bool(re.search(r"^ {0,3}(`{3,}|:{3,})\s*\{solution-start\}", text, re.M))
        ends = bool(re.search(r"^ {0,3}(`{3,}|:{3,})\s*\{solution-end\}", text, re.M))
        mask.append(inside or starts)
        if starts:
            inside = True
        if ends:
            inside = False
    return mask


def _slide_type(cell, in_solution: bool) -> str:
    if _is_bootstrap(cell) or in_solution:
        return "skip"  # set-up, and solutions: not shown in class
    if cell["cell_type"] == "markdown":
        first = _source(cell).lstrip().split("\n", 1)[0]
        if first.startswith(("# ", "## ")):
            return "slide"
        if first.startswith("### "):
            return "subslide"
    return "fragment"  # the rest appears cell by cell


def slides(nb: dict) -> bool:
    """Give every cell RISE slide metadata; a slide per ## heading, a sub-slide per ###.

    A slide type an author set by hand is kept, except that headings always start a
    (sub)slide and the bootstrap cell and solutions are always skipped.
    """
    changed = False
    for cell, in_solution in zip(nb["cells"], solution_mask(nb)):
        wanted = _slide_type(cell, in_solution)
        show = cell.setdefault("metadata", {}).setdefault("slideshow", {})
        current = show.get("slide_type")
        if current is None or (wanted != "fragment" and current != wanted) or current not in SLIDE_TYPES:
            show["slide_type"] = wanted
            changed = True
    rise = nb.setdefault("metadata", {}).setdefault("rise", {})
    for key, value in {"scroll": True, "enable_chalkboard": False}.items():
        if key not in rise:
            rise[key] = value
            changed = True
    return changed


