"""Sphinx extension: the counts the book's pages state, computed when the book is built.

A count typed into a page goes stale the day a chapter changes (issue 32: the guide said six
live figures when the site had twelve). So a page states such a count as a MyST substitution,
``{{ live_figures }}``, and this extension (in ``extra_extensions`` of _config.yml, hence of
the Chinese edition's generated config) sets its value from the book itself when Sphinx starts:

- ``live_figures`` / ``Live_figures``: the number of live figures the site shows (the live
  figures stored in the chapters' notebooks, ``attnbook.live.figures_in``), in words
  ("twelve" / "Twelve"); ``live_figures_n``: in digits ("12", as the Chinese guide writes it).

The Chinese guide (locale/zh/instructor_guide.po) uses the same substitutions in its
translations. Sizes and counts of what the commands write (the decks, the PDFs) are not known
when the site is built: ``make slides`` and ``make pdf`` print them at the end, and the README
and the guide say so instead of typing them (tests/classroom/test_numbers.py fails on a size
typed into either).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["live_figures", "substitutions", "english", "setup"]

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def english(n: int) -> str:
    """0 <= n < 100 in words: 'twelve', 'twenty-one'."""
    if not 0 <= n < 100:
        raise ValueError(f"{n} is not between 0 and 99")
    if n < 20:
        return _ONES[n]
    tens, ones = divmod(n, 10)
    return _TENS[tens - 2] + ("-" + _ONES[ones] if ones else "")


def live_figures(book: Path) -> int:
    """How many live figures the pages of the book in `book` show (its chapters' notebooks)."""
    from attnbook import live

    return sum(len(live.figures_in(json.loads(path.read_text(encoding="utf-8"))))
               for path in sorted(Path(book).glob("chapters/*.ipynb")))


def substitutions(book: Path) -> dict[str, str]:
    """The substitutions this extension sets, computed from the book in `book`."""
    n = live_figures(book)
    return {"live_figures": english(n), "Live_figures": english(n).capitalize(),
            "live_figures_n": str(n)}


def _config_inited(app, config):
    config.myst_substitutions = {**substitutions(Path(app.srcdir)),
                                 **(config.myst_substitutions or {})}


def setup(app):
    app.connect("config-inited", _config_inited)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
