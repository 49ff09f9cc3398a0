"""The Chinese web font: Noto Sans SC, cut to the site's Chinese characters, in slices.

Many classroom machines have no Chinese font and draw boxes; the site must not fetch a font
from another host. `make font` (after `make book`) collects every CJK character in the built
site's HTML and JavaScript, both editions (the Chinese pages, the English glossary and sources,
the theme's and Sphinx's Chinese labels, the live figures' strings), and subsets Debian's
Noto Sans CJK (`apt-get install fonts-noto-cjk`, or NOTO_CJK=/path/to/NotoSansCJK-Regular.ttc;
SIL Open Font License) to them as WOFF2 slices in _static/fonts/, with the style sheet that
declares them, _static/fonts/noto-sans-sc.css (Jupyter Book loads every CSS file in _static/).
Each slice is an @font-face of the one family "Attnbook Noto Sans SC" with its own
unicode-range, so a browser fetches only the slices holding characters the page shows (as
Google Fonts and fontsource serve CJK fonts): an English page the small first slice for its
"中文" link, a Chinese page the slices its text needs. Latin text keeps the theme's fonts.

The slices: the first holds the English pages' language switch (中文); the second the few other
Chinese characters of English pages (a source's Chinese title in a chapter; the glossary, the
sources and the instructor guide, with much Chinese, aside); then the characters many pages
use (the Chinese pages' navigation and common words), ordered by how many pages use them (the
characters of the same pages side by side), SLICE characters a slice; then, for each page, the
rarer characters (used by fewer than RARE pages) it is the first in the book to use, so that a
page fetches few characters it does not show. Only horizontal Chinese is set, so the font's
layout tables (vertical forms, localised variants) are left out, but for the half-width forms
of punctuation: they were 40 % of its size;
and its outlines are TrueType (quadratic, converted within 1/1000 em), about 9 % smaller in
WOFF2 than the original CFF.
The Chinese diagrams of figures/zh (attnbook/diagrams.py) are drawn from these slices, their
text as outlines: their characters go in too (in the last slices, as characters no page shows).
`make test` fails, naming the characters, when the site or a diagram uses one the slices lack.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .units import BOOK_ROOT

FAMILY = "Attnbook Noto Sans SC"
FONT_DIR = Path("_static/fonts")
CSS = FONT_DIR / "noto-sans-sc.css"
SLICE_NAME = "noto-sans-sc-{:02d}.woff2"
SLICE = 256  # characters per slice of those many pages use (about 35 KB each)
RARE = 5  # a character fewer pages use goes in the slice of the first page that uses it
FIRST = "中文"  # the English pages' link to the Chinese edition (attnbook/i18n/sphinx_ext.py)
BILINGUAL = ("glossary.html", "sources.html", "instructor_guide.html")  # English pages with much Chinese
SOURCES = [  # (file, font number in the collection: Simplified Chinese)
    (os.environ.get("NOTO_CJK", ""), 2),
    ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
]
# The blocks counted as Chinese (punctuation and full-width forms included).
RANGES = [(0x2E80, 0x2FDF), (0x3000, 0x303F), (0x3100, 0x312F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
          (0xF900, 0xFAFF), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF)]
_CJK = re.compile("[" + "".join(f"\\u{a:04x}-\\u{b:04x}" for a, b in RANGES) + "]")


def site_characters(html: Path) -> set[str]:
    """Every CJK character in the built site's .html and .js files."""
    chars = set()
    for path in html.rglob("*"):
        if path.suffix in (".html", ".js") and path.is_file():
            chars |= set(_CJK.findall(path.read_text(encoding="utf-8", errors="ignore")))
    return chars


def diagram_characters() -> set[str]:
    """The Chinese characters of the diagrams in figures/zh (drawn from the slices)."""
    from ..diagram_words import characters

    return {c for c in characters("zh") if _CJK.match(c)}


def page_characters(html: Path) -> dict[str, set[str]]:
    """Each built page's CJK characters (both editions), by path relative to `html`."""
    pages = {}
    for path in sorted(html.rglob("*.html")):
        rel = path.relative_to(html).as_posix()
        if not re.search(r"(^|/)_(static|sources|images)/", rel):
            pages[rel] = set(_CJK.findall(path.read_text(encoding="utf-8", errors="ignore")))
    return pages


def slices(html: Path) -> list[str]:
    """The characters of each slice, in order (see the module's docstring)."""
    chars = site_characters(html) | diagram_characters()
    pages = page_characters(html)
    names = sorted(pages)
    users = {c: tuple(n for n in names if c in pages[n]) for c in chars}
    first = [c for c in FIRST if c in chars]
    english = sorted(set().union(*(pages[n] for n in names if not n.startswith("zh/")
                                   and n not in BILINGUAL)) - set(first))
    rest = set(chars) - set(first) - set(english)
    common = sorted((c for c in rest if len(users[c]) >= RARE), key=lambda c: (-len(users[c]), users[c], c))
    rare: dict[str, list[str]] = {}
    for c in sorted(rest - set(common)):
        rare.setdefault(users[c][0] if users[c] else "", []).append(c)
    return (["".join(first)] + (["".join(english)] if english else [])
            + ["".join(common[i:i + SLICE]) for i in range(0, len(common), SLICE)]
            + ["".join(cs) for _, cs in sorted(rare.items())])


def served_slices(root: Path = BOOK_ROOT) -> list[Path]:
    return sorted((root / FONT_DIR).glob(SLICE_NAME.replace("{:02d}", "[0-9][0-9]")))


def font_characters(path: Path) -> set[str]:
    from fontTools.ttLib import TTFont

    return {chr(c) for c in TTFont(str(path)).getBestCmap()}


def served_characters(root: Path = BOOK_ROOT) -> set[str]:
    """Every character the served slices hold."""
    return set().union(*(font_characters(p) for p in served_slices(root)))


def unicode_range(chars: str) -> str:
    """'U+4E2D, U+6587-6588': the code points of `chars`, runs joined."""
    points, runs = sorted({ord(c) for c in chars}), []
    for p in points:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in runs)


def style_sheet(parts: list[str]) -> str:
    lines = ["/* Generated by `make font` (attnbook/i18n/font.py): do not edit. The site's Chinese",
             " * font, Noto Sans SC (SIL Open Font License 1.1) cut to the characters the site uses,",
             " * in slices: the browser fetches only those holding characters a page shows. */"]
    for k, chars in enumerate(parts):
        lines += ["@font-face {",
                  f'  font-family: "{FAMILY}";',
                  f'  src: url("{SLICE_NAME.format(k)}") format("woff2");',
                  "  font-display: swap;",
                  f"  unicode-range: {unicode_range(chars)};",
                  "}"]
    return "\n".join(lines) + "\n"


def _truetype(font) -> None:
    """The font's CFF outlines as TrueType (quadratic) outlines, within 1/1000 em."""
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import newTable

    glyphs, order = font.getGlyphSet(), font.getGlyphOrder()
    glyf = newTable("glyf")
    glyf.glyphOrder, glyf.glyphs = order, {}
    for name in order:
        pen = TTGlyphPen(glyphs)
        glyphs[name].draw(Cu2QuPen(pen, max_err=1.0, reverse_direction=True))
        glyf.glyphs[name] = pen.glyph()
    for name in order:
        glyf.glyphs[name].recalcBounds(glyf)
    font["glyf"], font["loca"] = glyf, newTable("loca")
    del font["CFF "]
    maxp = font["maxp"]
    maxp.tableVersion = 0x00010000
    for field in ("maxPoints", "maxContours", "maxCompositePoints", "maxCompositeContours",
                  "maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs",
                  "maxStackElements", "maxSizeOfInstructions", "maxComponentElements",
                  "maxComponentDepth"):
        setattr(maxp, field, 0)
    maxp.maxZones = 1
    font["head"].glyphDataFormat = 0
    font["post"].formatType = 3.0
    font.sfntVersion = "\0\1\0\0"


def make_font(root: Path = BOOK_ROOT) -> str:
    from fontTools import subset

    html = root / "_build" / "html"
    if not (html / "zh").is_dir():
        raise SystemExit("make font reads the built site: run `make book` first")
    source = next(((p, n) for p, n in SOURCES if p and Path(p).exists()), None)
    if source is None:
        raise SystemExit("make font needs Noto Sans CJK: apt-get install fonts-noto-cjk "
                         "(or NOTO_CJK=/path/to/NotoSansCJK-Regular.ttc)")
    parts = slices(html)
    out = root / FONT_DIR
    out.mkdir(parents=True, exist_ok=True)
    for old in served_slices(root) + [out / "noto-sans-sc-subset.woff2"]:
        old.unlink(missing_ok=True)
    options = subset.Options()
    options.flavor = "woff2"
    options.font_number = source[1]
    options.hinting = False
    options.desubroutinize = True
    # horizontal text only: no vertical forms or metrics, no variants; but 'halt', with which
    # chromium trims the space between two punctuation marks (），→ ），)
    options.layout_features = ["halt"]
    options.drop_tables += ["VORG", "vhea", "vmtx"]
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6]  # copyright, names, version (a PDF names the font)
    total = 0
    for k, chars in enumerate(parts):
        font = subset.load_font(source[0], options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=[ord(c) for c in chars])
        subsetter.subset(font)
        _truetype(font)
        path = out / SLICE_NAME.format(k)
        subset.save_font(font, str(path), options)
        total += path.stat().st_size
    (root / CSS).write_text(style_sheet(parts), encoding="utf-8")
    n = sum(map(len, parts))
    return (f"{FONT_DIR}: {n} characters in {len(parts)} slices, {total / 1024:.0f} KB in all "
            f"(the first, {parts[0]}, {(out / SLICE_NAME.format(0)).stat().st_size / 1024:.1f} KB); "
            f"{CSS}")
