"""The matplotlib figures of the Chinese pages: the English figure, its words in Chinese.

Each figure a chapter draws is stored once, in the English notebook: its PNG output (what
the English page shows), and in that output's metadata the same figure as SVG with its text
kept as text (`attnbook.plots.install_svg_formatter`, set up by `use_book_style`). Nothing is
executed again for the Chinese book:

- each distinct string of a figure's SVG that has a Latin letter is a translation unit of the
  page (`msgctxt` "<cell id> figure: <the English string>"; tick numbers are not units);
  a string that stays as it is (a token such as "cat", a symbol such as "d_k") is translated
  as itself with the translator's note `figure: as in English` (`%% figure: as in English`
  in a sheet), so that a string nobody looked at is still reported;
- `python -m attnbook.i18n build` adds to each figure output of the Chinese notebook a
  `text/html` version: the SVG inline in the page (an `<img>` could not use the page's web
  font), its strings in Chinese, its text in the site's font stack (Noto Sans SC, served by
  the site, draws the Chinese; Latin falls back to the fonts matplotlib measured), its ids
  made unique on the page, `role="img"` and the cell's Chinese alt text as `aria-label`.
  The page, the decks (nbconvert) and Jupyter prefer `text/html` to `image/png`; the PNG
  stays in the output for any viewer that does not show HTML.

Imports nothing of attnbook (units.py and generate.py import it).
"""

from __future__ import annotations

import html
import re
from functools import lru_cache

SVG_KEY = "attnbook"          # output["metadata"]["image/png"]["attnbook"]["svg"]
HTML_CLASS = "attnbook-figure-zh"
AS_IN_ENGLISH = "figure: as in English"   # the translator's note: this string stays English
FONT_STACK = ("'Attnbook Noto Sans SC', 'DejaVu Sans', 'Bitstream Vera Sans', Verdana, "
              "'Noto Sans', Arial, sans-serif")
NO_WORDS_TAG = "figure-without-words"     # a cell whose figures have no words to translate
WIDER = 0.6  # em: how much wider than the English a label may be (matplotlib made room for that)

_TEXT = re.compile(r"(<text\b)([^>]*)>(.*?)</text>", re.S)
_LETTER = re.compile(r"[A-Za-z]")
_CJK = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def figure_svg(output) -> str | None:
    """The SVG stored with a figure output (None for any other output)."""
    if output.get("output_type") not in ("display_data", "execute_result"):
        return None
    meta = output.get("metadata", {}).get("image/png", {})
    svg = meta.get(SVG_KEY, {}).get("svg") if isinstance(meta, dict) else None
    return svg if isinstance(svg, str) and "image/png" in output.get("data", {}) else None


def is_figure(output) -> bool:
    """A matplotlib figure output: a PNG (all the book's PNG outputs are figures)."""
    return output.get("output_type") in ("display_data", "execute_result") \
        and "image/png" in output.get("data", {})


def _text_content(inner: str) -> str:
    """A <text> element's string: matplotlib writes it escaped, mathtext in <tspan>s."""
    return html.unescape(re.sub(r"<[^>]+>", "", inner))


def svg_strings(svg: str) -> list[str]:
    """The distinct strings of an SVG's <text> elements, in order (whitespace trimmed)."""
    seen = []
    for m in _TEXT.finditer(svg):
        s = _text_content(m.group(3)).strip()
        if s and s not in seen:
            seen.append(s)
    return seen


def is_unit(text: str) -> bool:
    """A figure string to translate: it has a Latin letter (tick numbers have none)."""
    return bool(_LETTER.search(text))


def cell_strings(cell) -> list[str]:
    """The strings to translate of a code cell's figures, in order, each once."""
    out = []
    for output in cell.get("outputs", []):
        svg = figure_svg(output)
        for s in svg_strings(svg) if svg else []:
            if is_unit(s) and s not in out:
                out.append(s)
    return out


def unit_ctx(cell_id: str, text: str) -> str:
    return f"{cell_id} figure: {text}"


# --- the Chinese figure -------------------------------------------------------------------

def _unique_ids(svg: str, prefix: str) -> str:
    """Ids only where something refers to them (clip paths, markers, hatches), prefixed so
    that two figures on one page never share one; the others (matplotlib names every group)
    are dropped."""
    used = set(re.findall(r"url\(#([^)\s]+)\)", svg)) | set(re.findall(r'href="#([^"]+)"', svg))

    def ident(m):
        name = m.group(1)
        return f' id="{prefix}{name}"' if name in used else ""

    svg = re.sub(r' id="([^"]+)"', ident, svg)
    svg = re.sub(r"url\(#([^)\s]+)\)", lambda m: f"url(#{prefix}{m.group(1)})", svg)
    return re.sub(r'href="#([^"]+)"', lambda m: f'href="#{prefix}{m.group(1)}"', svg)


def _font(style: str) -> str:
    """matplotlib's font-family (DejaVu Sans first) replaced by the site's stack."""
    return re.sub(r"font-family:[^;\"]*", "font-family: " + FONT_STACK, style)


_PLACED = re.compile(r'(<text\b[^>]*?)\s+transform="translate\(([-\d.e]+) ([-\d.e]+)\)'
                     r'(?: ?rotate\(([-\d.e]+)\))?"([^>]*)>([^<]*)</text>')


def _english_width(text: str, style: str) -> float:
    """The width matplotlib gave a string (DejaVu Sans, at the style's size), in the SVG's units."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    size = float(re.search(r"font-size: ([\d.]+)px", style).group(1))
    weight = "bold" if "font-weight: 700" in style else "normal"
    prop = FontProperties(family="DejaVu Sans", size=size, weight=weight)
    return TextToPath().get_text_width_height_descent(text, prop, ismath=False)[0]


def _anchor_free_lines(svg: str, zh: dict[str, str]) -> str:
    """Anchor the lines matplotlib placed by their left end (the lines of a multi-line text,
    a rotated tick label): each line it places alone at ``translate(x y)``, where its English
    starts, so a Chinese line of another width would move off centre. A line that is
    translated gets ``text-anchor`` and an ``x`` along its own direction: the middle of the
    English line (or its end, for the lines of a right-aligned text: their ends agree)."""
    found = list(_PLACED.finditer(svg))
    if not found or not any(html.unescape(m.group(6)).strip() in zh for m in found):
        return svg
    info = []
    for m in found:
        style = re.search(r'style="([^"]*)"', m.group(1) + m.group(5))
        english = html.unescape(m.group(6))
        info.append((m, float(m.group(2)), _english_width(english, style.group(1) if style else
                                                             "font-size: 10px")))
    # the lines of one text: consecutive, the same rotation, each a line below the other
    groups, cur = [], [0]
    for i in range(1, len(info)):
        a, b = info[i - 1][0], info[i][0]
        if a.end() + 40 > b.start() and a.group(4) == b.group(4) and svg[a.end():b.start()].strip() == "":
            cur.append(i)
        else:
            groups.append(cur)
            cur = [i]
    groups.append(cur)
    anchor = {}
    for g in groups:
        xs = [info[i][1] for i in g]
        rights = [info[i][1] + info[i][2] for i in g]
        if len(g) > 1 and max(xs) - min(xs) < 0.5:
            kind = "start"
        elif len(g) > 1 and max(rights) - min(rights) < 0.5:
            kind = "end"
        else:
            kind = "middle"
        for i in g:
            anchor[i] = kind
    out, last = [], 0
    for i, (m, x, w) in enumerate(info):
        english = html.unescape(m.group(6)).strip()
        out.append(svg[last:m.start()])
        last = m.end()
        if english not in zh or anchor[i] == "start":
            out.append(m.group(0))
            continue
        dx = w / 2 if anchor[i] == "middle" else w
        head = m.group(1).replace('style="', f'style="text-anchor: {anchor[i]}; ', 1)
        rot = f" rotate({m.group(4)})" if m.group(4) else ""
        out.append(f'{head} x="{dx:.3f}" transform="translate({m.group(2)} {m.group(3)}){rot}"'
                   f'{m.group(5)}>{m.group(6)}</text>')
    out.append(svg[last:])
    return "".join(out)


def chinese_svg(svg: str, zh: dict[str, str], label: str, prefix: str) -> str:
    """The figure inline: its strings in Chinese (``zh``: English -> Chinese; a string
    without a translation stays English), the site's font, ids unique, and an accessible
    name (``label``, the alt text)."""
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, flags=re.S)

    def text(m):
        attrs = re.sub(r'style="([^"]*)"', lambda s: f'style="{_font(s.group(1))}"', m.group(2))
        inner = m.group(3)
        english = _text_content(inner).strip()
        if english in zh:
            inner = html.escape(zh[english], quote=False)
        elif "<" in inner:  # mathtext: its glyphs in <tspan>s, each with its font
            inner = re.sub(r'style="([^"]*)"', lambda s: f'style="{_font(s.group(1))}"', inner)
        return f"{m.group(1)}{attrs}>{inner}</text>"

    svg = _anchor_free_lines(svg, zh)
    svg = _TEXT.sub(text, svg)
    svg = _unique_ids(svg, prefix)
    head = (f'<svg role="img" aria-label="{html.escape(label)}" class="{HTML_CLASS}" '
            f'style="max-width: 100%; height: auto"')
    svg = svg.replace("<svg", head, 1)
    return svg.strip() + "\n"


def translate_figures(cell, zh: dict[str, str], alt: str) -> None:
    """Give each figure output of a code cell (of a Chinese notebook, in place) its Chinese
    figure as `text/html` (``zh``: the page's translations by msgctxt; ``alt``: the cell's
    alt text in Chinese, or English where there is none)."""
    cid = cell.get("id", "")
    strings = {s: zh[unit_ctx(cid, s)] for s in cell_strings(cell) if unit_ctx(cid, s) in zh}
    for k, output in enumerate(cell.get("outputs", [])):
        svg = figure_svg(output)
        if svg is None:
            continue
        inline = chinese_svg(svg, strings, alt, f"zh-{cid}-{k}-")
        output["data"] = {"text/html": [f'<div class="{HTML_CLASS}">\n', *inline.splitlines(True),
                                        "</div>\n"], **output["data"]}
        # the English SVG is in the HTML now: not stored twice in the Chinese notebook
        output["metadata"] = _without_svg(output["metadata"])


def _without_svg(metadata: dict) -> dict:
    png = {k: v for k, v in metadata.get("image/png", {}).items() if k != SVG_KEY}
    return {**{k: v for k, v in metadata.items() if k != "image/png"}, **({"image/png": png} if png else {})}


def without_figure_svg(outputs: list) -> list:
    """A cell's outputs without the figures' SVG: for an English cell, without the SVG stored in
    the metadata; for a Chinese cell, without the Chinese figure (the text/html it adds)."""
    out = []
    for output in outputs:
        if is_figure(output):
            output = {**output, "metadata": _without_svg(output.get("metadata", {})),
                      "data": {k: v for k, v in output["data"].items() if k != "text/html"}}
        out.append(output)
    return out


# --- what a translation of a figure string must keep (rules.form_problems) --------------

_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d[\d,]*(?:\.\d+)?)")


def _wide(c: str) -> bool:
    return bool(_CJK.match(c)) or "\u3000" <= c <= "\u303f" or "\uff00" <= c <= "\uffef"


def width_em(text: str) -> float:
    """The width of a label in em: a Chinese character (or full-width sign) 1, the rest as
    matplotlib measures it in DejaVu Sans."""
    wide = sum(1 for c in text if _wide(c))
    rest = "".join(c for c in text if not _wide(c))
    return wide + (_dejavu_em(rest) if rest else 0.0)


@lru_cache(maxsize=4096)
def _dejavu_em(text: str) -> float:
    return _english_width(text, "font-size: 1px")


def form_problems(english: str, zh: str, tcomment: str = "") -> list[str]:
    out = []
    if AS_IN_ENGLISH in tcomment:
        if zh != english:
            out.append(f"marked '{AS_IN_ENGLISH}' but the Chinese differs from the English")
        return out
    if not _CJK.search(zh):
        out.append("not translated into Chinese (a string that stays English: translate it as "
                   f"itself with the note `%% {AS_IN_ENGLISH}`)")
    from collections import Counter

    def nums(t):
        return Counter(n.replace(",", "") for n in _NUMBER.findall(t))

    missing = nums(english) - nums(zh)
    if missing:
        out.append(f"numbers of the English missing: {sorted(missing)}")
    if width_em(zh) > width_em(english) + WIDER:
        out.append(f"wider than the English ({width_em(zh):.1f} em against "
                   f"{width_em(english):.1f}): it may not fit the figure, say it shorter")
    return out
