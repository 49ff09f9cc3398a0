"""The glossary rule on one page: each term the English uses appears in the Chinese, and the
page glosses (gives the English in brackets at the first use) the terms it must gloss: those
first used in the book on this page (reading order: the chapters; the introduction and the
reference pages are read in any order) and
those its title names (the chapter that introduces the term). A gloss elsewhere is allowed."""

from __future__ import annotations

from functools import lru_cache

from .catalog import load, translations
from .rules import _normal, _uses_normal, glossary_terms, term_problems
from .units import BOOK_ROOT, page_units, toc_pages

# The front page and reference pages, read in any order: a term's first use there does not count as the book's.
REFERENCE_PAGES = ("intro", "notation", "glossary", "sources", "instructor_guide")
# The book's first words: glossed in chapter 01, then everyday words, whatever a title says.
NOT_BY_TITLE = ("attention", "query", "key", "value")
# Words every Chinese reader knows in Chinese: never glossed (参数, not 参数（parameter）).
NEVER_GLOSSED = ("parameter",)


def _title(units) -> str:
    return next((line for u in units for line in u.text.splitlines() if line.startswith("# ")), "")


@lru_cache(maxsize=None)
def first_pages(root=BOOK_ROOT) -> dict[str, str]:
    """Each glossary term's row -> the page of its first use in reading order."""
    first: dict[str, str] = {}
    for page in toc_pages(root):
        if page in REFERENCE_PAGES:
            continue
        text = _normal("\n\n".join(u.text for u in page_units(page, root)
                                   if u.kind not in ("title", "caption-part")))
        for term in glossary_terms(root):
            if term.row not in first and _uses_normal(term, text, root):
                first[term.row] = page
    return first


def must_gloss(page: str, root=BOOK_ROOT) -> set[str]:
    """The glossary rows this page glosses: first used in the book here, or named by its title."""
    first = first_pages(root)
    heads = _normal(_title(page_units(page, root)))
    return ({row for row, p in first.items() if p == page and row not in NEVER_GLOSSED}
            | {t.row for t in glossary_terms(root) if page not in REFERENCE_PAGES
               and t.row not in NOT_BY_TITLE and _uses_normal(t, heads, root)})


def page_term_problems(page: str, root=BOOK_ROOT) -> list[str]:
    if page == "glossary":  # the glossary defines the names; its table is checked in tests
        return []
    zh = translations(page, root)
    comments = {e.msgctxt: e.tcomment or "" for e in load(page, root)}
    return term_problems(page, page_units(page, root), zh, comments, root,
                         glossed=must_gloss(page, root))
