"""What a translator translates: the units of each page of the English book.

A *page* is a file of the table of contents, named without its suffix, as in `_toc.yml`
(`intro`, `chapters/03_softmax`), plus the pseudo-page `_book` (the book's title and the
captions of its parts). A *unit* is one piece of English prose with a stable name (its
gettext `msgctxt`):

- a notebook's markdown cell: its cell id (`a1b2c3d4`); a code cell's figure alt text or
  caption in its metadata: the cell id and the field (`a1b2c3d4 alt`); each string of its
  matplotlib figures that has a letter: `a1b2c3d4 figure: <the string>` (figures.py);
- a Markdown page's block (paragraph, heading, table, list, a fenced directive whole):
  `block` and its number among the page's blocks with the same text, so that inserting a
  paragraph does not change the name of the others;
- `_book`: `title` and `part N` for the part captions.

Code cells and their outputs are not units: they are written once, in English.
Imports nothing of attnbook but nbtools._io, so that tests can use it without the rest.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

BOOK_ROOT = Path(__file__).resolve().parents[2]
FIGURE_FIELDS = ("alt", "caption")  # metadata.mystnb.{image,figure}.{alt,caption}

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}|:{3,})(.*)$")


@dataclass(frozen=True)
class Unit:
    page: str      # "chapters/03_softmax"
    ctx: str       # the unit's name within its page (gettext msgctxt)
    text: str      # the English (gettext msgid)
    kind: str      # "markdown", "alt", "caption", "figure", "block", "title", "caption-part"


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def toc_pages(root: Path = BOOK_ROOT) -> list[str]:
    """Every page of the book, in reading order, as `_toc.yml` names them (no suffix)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    pages = [toc["root"]]

    def walk(entries):
        for e in entries or []:
            if "file" in e:
                pages.append(e["file"])
            walk(e.get("sections"))
            walk(e.get("chapters"))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    return pages


def page_file(page: str, root: Path = BOOK_ROOT) -> Path:
    for suffix in (".ipynb", ".md"):
        p = root / (page + suffix)
        if p.exists():
            return p
    raise FileNotFoundError(f"page {page!r}: neither {page}.ipynb nor {page}.md in {root}")


def split_blocks(text: str) -> list[str]:
    """A Markdown page's blocks: split at blank lines outside fences (``` ~~~ :::).

    A fenced block (a directive, a code block) stays whole with the lines around it that
    have no blank line between them; the blocks joined by blank lines give the page back.
    """
    blocks, cur, stack = [], [], []
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            run = m.group(1)
            if stack and run[0] == stack[-1][0] and len(run) >= len(stack[-1]) and not m.group(2).strip():
                stack.pop()
            elif not stack or m.group(2).strip() or run[0] != stack[-1][0]:
                stack.append(run)
        if not line.strip() and not stack:
            if cur:
                blocks.append("\n".join(cur))
                cur = []
            continue
        cur.append(line)
    if cur:
        blocks.append("\n".join(cur))
    return blocks


def _slug(heading: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", heading.lower())
    return "-".join(words)[:48] or "top"


def _block_units(page: str, text: str) -> list[Unit]:
    """A Markdown page's units: each block, and each row of a table.

    A block is named by the section it is in and its number there (`using-the-book ¶3`), a
    table row by its table and its first cell (`glossary ¶2 | attention`): inserting a
    paragraph renames only the later blocks of its section, and `update` finds their old
    translations by their English.
    """
    units, section, n = [], "top", 0
    seen: set[str] = set()

    def add(ctx, body, kind):
        while ctx in seen:
            ctx += "'"
        seen.add(ctx)
        units.append(Unit(page, ctx, body, kind))

    for b in split_blocks(text):
        first = b.lstrip().splitlines()[0] if b.strip() else ""
        if re.match(r"#{1,6} ", first):
            section, n = _slug(first.lstrip("#")), 0
        n += 1
        if not re.search(r"[A-Za-z]", b):
            continue
        lines = b.splitlines()
        if len(lines) > 2 and all(line.lstrip().startswith("|") for line in lines):
            for line in lines:
                if re.fullmatch(r"\s*\|[\s|:-]*\|?\s*", line):
                    continue
                cell = line.strip().strip("|").split("|")[0].strip()
                add(f"{section} ¶{n} | {cell[:40]}", line, "row")
            continue
        add(f"{section} ¶{n}", b, "block")
    return units


def figure_fields(cell) -> list[tuple[str, str, str]]:
    """(kind, field, text) of a code cell's figure alt text and caption, in metadata.mystnb."""
    out = []
    mystnb = cell.get("metadata", {}).get("mystnb", {})
    for kind in ("image", "figure"):
        for field in FIGURE_FIELDS:
            v = mystnb.get(kind, {}).get(field)
            if isinstance(v, str) and v.strip():
                out.append((kind, field, v))
    return out


def notebook_units(page: str, nb: dict) -> list[Unit]:
    units = []
    for cell in nb["cells"]:
        cid = cell.get("id")
        if cell["cell_type"] == "markdown":
            text = _source(cell)
            if re.search(r"[A-Za-z]", text):
                units.append(Unit(page, cid, text, "markdown"))
        elif cell["cell_type"] == "code":
            for kind, field, text in figure_fields(cell):
                units.append(Unit(page, f"{cid} {kind}.{field}", text, field))
            units += figure_units(page, cell)
    return units


def figure_units(page: str, cell) -> list[Unit]:
    """The words of a code cell's matplotlib figures (attnbook/i18n/figures.py)."""
    from .figures import cell_strings, unit_ctx

    return [Unit(page, unit_ctx(cell.get("id"), s), s, "figure") for s in cell_strings(cell)]


def book_units(root: Path = BOOK_ROOT) -> list[Unit]:
    """The `_book` pseudo-page: the title and the captions of the table of contents."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    units = [Unit("_book", "title", config["title"], "title")]
    for i, part in enumerate(toc.get("parts", [])):
        if part.get("caption"):
            units.append(Unit("_book", f"part {i}", part["caption"], "caption-part"))
    return units


def page_units(page: str, root: Path = BOOK_ROOT) -> list[Unit]:
    if page == "_book":
        return book_units(root)
    path = page_file(page, root)
    if path.suffix == ".ipynb":
        return notebook_units(page, json.loads(path.read_text(encoding="utf-8")))
    return _block_units(page, path.read_text(encoding="utf-8"))


def all_pages(root: Path = BOOK_ROOT) -> list[str]:
    return ["_book"] + toc_pages(root)
