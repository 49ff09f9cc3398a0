"""Reading and writing notebooks, for every notebook tool (imports nothing of attnbook)."""

from __future__ import annotations

import json
import re
from pathlib import Path

BOOK_ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP_TAG = "bootstrap"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}|:{3,})\s*(.*)$")
_HEADING = re.compile(r"^#{1,3} ")


def _load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _save(path, nb):
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    """Notebook-style source: a list of lines, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


