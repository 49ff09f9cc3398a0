"""The Chinese web font: a subset of Noto Sans SC holding every Chinese character the site uses.

Many classroom machines have no Chinese font and draw boxes; the site must not fetch a font
from another host. `make font` (after `make book`) collects every CJK character in the built
site's HTML and JavaScript, both editions (the Chinese pages, the English glossary and sources,
the theme's and Sphinx's Chinese labels, the live figures' strings), and subsets Debian's
Noto Sans CJK (`apt-get install fonts-noto-cjk`; SIL Open Font License) to them as WOFF2 in
_static/fonts/. `_static/attnbook.css` declares it for those characters only (unicode-range),
so Latin text keeps the theme's fonts. `make test` fails, naming the characters, when the site
uses one the font lacks.
"""

from __future__ import annotations

import re
from pathlib import Path

from .units import BOOK_ROOT

FONT = Path("_static/fonts/noto-sans-sc-subset.woff2")
SOURCES = [  # (file, font number in the collection: Simplified Chinese)
    ("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc", 2),
]
# The blocks the @font-face serves (keep in step with unicode-range in _static/attnbook.css).
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


def font_characters(path: Path) -> set[str]:
    from fontTools.ttLib import TTFont

    return {chr(c) for c in TTFont(str(path)).getBestCmap()}


def make_font(root: Path = BOOK_ROOT) -> str:
    from fontTools import subset

    html = root / "_build" / "html"
    if not (html / "zh").is_dir():
        raise SystemExit("make font reads the built site: run `make book` first")
    source = next(((p, n) for p, n in SOURCES if Path(p).exists()), None)
    if source is None:
        raise SystemExit("make font needs Noto Sans CJK: apt-get install fonts-noto-cjk")
    chars = sorted(site_characters(html))
    out = root / FONT
    out.parent.mkdir(parents=True, exist_ok=True)
    options = subset.Options()
    options.flavor = "woff2"
    options.font_number = source[1]
    options.hinting = False
    options.desubroutinize = True
    options.layout_features = ["*"]
    options.name_IDs = ["*"]
    font = subset.load_font(source[0], options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in chars])
    subsetter.subset(font)
    subset.save_font(font, str(out), options)
    return f"{out.relative_to(root)}: {len(chars)} characters, {out.stat().st_size / 1024:.0f} KB"
