"""The translation files: one gettext catalogue per page, `locale/zh/<page>.po`.

Each entry is one unit of the English page: `msgctxt` its name (a cell id, a block),
`msgid` the English, `msgstr` the Chinese. When the English of a unit changes, `update`
keeps the old Chinese but marks the entry `fuzzy` with the old English as `#| msgid`
(what gettext's msgmerge does), so the translator sees what changed; `problems` lists
every missing, stale (fuzzy, or English no longer matching) and malformed translation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polib

from .units import BOOK_ROOT, Unit, all_pages, page_units

LANG = "zh"
LOCALE = "locale"


def po_path(page: str, root: Path = BOOK_ROOT, lang: str = LANG) -> Path:
    return root / LOCALE / lang / (page + ".po")


def _new_catalog(page: str) -> polib.POFile:
    po = polib.POFile(wrapwidth=0)
    po.metadata = {
        "Project-Id-Version": "Attention, computed",
        "Language": "zh_CN",
        "MIME-Version": "1.0",
        "Content-Type": "text/plain; charset=UTF-8",
        "Content-Transfer-Encoding": "8bit",
        "X-Page": page,
    }
    return po


def load(page: str, root: Path = BOOK_ROOT, lang: str = LANG) -> polib.POFile:
    path = po_path(page, root, lang)
    if not path.exists():
        return _new_catalog(page)
    return polib.pofile(str(path), wrapwidth=0)


def save(po: polib.POFile, page: str, root: Path = BOOK_ROOT, lang: str = LANG) -> Path:
    path = po_path(page, root, lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    po.wrapwidth = 0
    text = str(po)
    if not text.endswith("\n"):
        text += "\n"
    path.write_text(text, encoding="utf-8")
    return path


def update_page(page: str, root: Path = BOOK_ROOT, lang: str = LANG) -> dict:
    """Bring `page`'s catalogue in line with the English; return counts of what changed."""
    old = load(page, root, lang)
    by_ctx = {e.msgctxt: e for e in old if not e.obsolete}
    by_text = {}
    for e in old:
        if e.msgstr and not e.obsolete and "fuzzy" not in e.flags:
            by_text.setdefault(e.msgid, e)
    new = _new_catalog(page)
    counts = {"kept": 0, "stale": 0, "moved": 0, "new": 0, "dropped": 0}
    used = set()
    for u in page_units(page, root):
        e = polib.POEntry(msgctxt=u.ctx, msgid=u.text, msgstr="")
        e.comment = u.kind
        prev = by_ctx.get(u.ctx)
        if prev is not None and prev.msgid == u.text:
            e.msgstr, e.flags, e.tcomment = prev.msgstr, list(prev.flags), prev.tcomment
            e.previous_msgid = prev.previous_msgid
            counts["kept"] += 1
            used.add(u.ctx)
        elif u.text in by_text:  # the same English under another name (a cell re-created)
            src = by_text[u.text]
            e.msgstr, e.tcomment = src.msgstr, src.tcomment
            counts["moved"] += 1
            used.add(src.msgctxt)
        elif prev is not None and prev.msgstr:
            e.msgstr, e.tcomment = prev.msgstr, prev.tcomment
            e.flags = ["fuzzy"]
            e.previous_msgid = prev.msgid
            counts["stale"] += 1
            used.add(u.ctx)
        else:
            counts["new"] += 1
        new.append(e)
    counts["dropped"] = sum(1 for c in by_ctx if c not in used and by_ctx[c].msgstr)
    save(new, page, root, lang)
    return counts


@dataclass
class Problem:
    page: str
    ctx: str
    what: str

    def __str__(self):
        return f"{po_path(self.page).relative_to(BOOK_ROOT)}: {self.ctx}: {self.what}"


def translations(page: str, root: Path = BOOK_ROOT, lang: str = LANG) -> dict[str, str]:
    """ctx -> Chinese, for the entries that are translated, current and not fuzzy."""
    units = {u.ctx: u.text for u in page_units(page, root)}
    out = {}
    for e in load(page, root, lang):
        if e.obsolete or "fuzzy" in e.flags or not e.msgstr:
            continue
        if units.get(e.msgctxt) == e.msgid:
            out[e.msgctxt] = e.msgstr
    return out


def problems(pages: list[str] | None = None, root: Path = BOOK_ROOT, lang: str = LANG,
             *, form: bool = True) -> list[Problem]:
    """Every unit without a current translation, and (form=True) every malformed one."""
    from .rules import form_problems

    out = []
    for page in pages or all_pages(root):
        if not po_path(page, root, lang).exists():
            out.append(Problem(page, "-", "no translation file (run: make translations)"))
            continue
        entries = {e.msgctxt: e for e in load(page, root, lang) if not e.obsolete}
        for u in page_units(page, root):
            e = entries.get(u.ctx)
            if e is None:
                out.append(Problem(page, u.ctx, "missing (run: make translations)"))
            elif e.msgid != u.text:
                out.append(Problem(page, u.ctx, "stale: the English changed (run: make translations)"))
            elif not e.msgstr.strip():
                out.append(Problem(page, u.ctx, "not translated"))
            elif "fuzzy" in e.flags:
                out.append(Problem(page, u.ctx, "stale: marked fuzzy, the English changed "
                                                "(compare #| msgid with msgid, fix, remove the flag)"))
            elif form:
                for what in form_problems(u, e.msgstr, e.tcomment or ""):
                    out.append(Problem(page, u.ctx, what))
    return out
