"""Translation sheets: a page's catalogue as plain text, for editors that handle .po poorly.

    python -m attnbook.i18n sheet PAGE > sheet.txt    write the sheet (English, Chinese so far)
    python -m attnbook.i18n fill sheet.txt             write the sheet's Chinese into locale/zh

A sheet is a list of entries; each is the English and the Chinese of one unit:

    @@@@ <ctx> en
    <English, unchanged>
    @@@@ <ctx> zh
    <Chinese>
    @@@@ end

A line of the Chinese starting with `%% ` is a translator's note, kept as the entry's comment
(`%% glossary: not key`: the word is used in an everyday sense there, see rules.py).
No escaping: backslashes and quotes are written as they are. `fill` clears the fuzzy flag of
every entry whose Chinese it writes (the translator has looked at it).
"""

from __future__ import annotations

import re
from pathlib import Path

from .catalog import load, save
from .units import BOOK_ROOT, page_units

_HEAD = re.compile(r"^@@@@ (.+) (en|zh)$")


def write_sheet(page: str, root: Path = BOOK_ROOT, only_todo: bool = False) -> str:
    po = load(page, root)
    entries = {e.msgctxt: e for e in po if not e.obsolete}
    parts = [f"@@@@ page {page}\n"]
    for u in page_units(page, root):
        e = entries.get(u.ctx)
        zh = e.msgstr if e is not None and e.msgid == u.text else ""
        if zh and e.tcomment:
            zh = "".join(f"%% {n}\n" for n in e.tcomment.split("\n")) + zh
        if only_todo and zh and "fuzzy" not in e.flags:
            continue
        parts.append(f"@@@@ {u.ctx} en\n{u.text}\n@@@@ {u.ctx} zh\n{zh}\n@@@@ end\n")
    return "".join(parts)


def read_sheet(text: str) -> tuple[str, dict[str, str]]:
    lines = text.split("\n")
    if not lines or not lines[0].startswith("@@@@ page "):
        raise ValueError("a sheet starts with '@@@@ page <page>'")
    page = lines[0][len("@@@@ page "):].strip()
    out, ctx, mode, buf = {}, None, None, []
    for line in lines[1:]:
        m = _HEAD.match(line)
        if m or line == "@@@@ end":
            if mode == "zh":
                out[ctx] = "\n".join(buf)
            if m:
                ctx, mode, buf = m.group(1), m.group(2), []
            else:
                ctx, mode, buf = None, None, []
            continue
        buf.append(line)
    return page, out


def fill(path: str | Path, root: Path = BOOK_ROOT) -> tuple[str, int]:
    page, zh = read_sheet(Path(path).read_text(encoding="utf-8"))
    po = load(page, root)
    n = 0
    for e in po:
        if e.msgctxt in zh and zh[e.msgctxt].strip():
            lines = zh[e.msgctxt].split("\n")
            notes = [ln[3:].strip() for ln in lines if ln.startswith("%% ")]
            e.msgstr = "\n".join(ln for ln in lines if not ln.startswith("%% ")).strip("\n")
            if notes:
                e.tcomment = "\n".join(notes)
            if "fuzzy" in e.flags:
                e.flags.remove("fuzzy")
            e.previous_msgid = None
            n += 1
    unknown = set(zh) - {e.msgctxt for e in po}
    if unknown:
        raise ValueError(f"{path}: entries not in the page {page}: {sorted(unknown)[:5]}")
    save(po, page, root)
    return page, n
