"""The glossary rule on one page: each term the English uses appears in the Chinese."""

from __future__ import annotations

from .catalog import load, translations
from .rules import term_problems
from .units import BOOK_ROOT, page_units


def page_term_problems(page: str, root=BOOK_ROOT) -> list[str]:
    if page == "glossary":  # the glossary defines the names; its table is checked in tests
        return []
    zh = translations(page, root)
    comments = {e.msgctxt: e.tcomment or "" for e in load(page, root)}
    return term_problems(page, page_units(page, root), zh, comments, root)
