"""The matplotlib figures in Chinese (attnbook/i18n/figures.py, issue 31).

- the English page keeps its PNG; every figure output also stores its SVG, text as text,
  byte-stable (no date, fixed ids);
- every figure of a Chinese notebook carries the figure drawn in Chinese (inline SVG, its
  strings translated, role="img" and the Chinese alt text as aria-label, ids unique on the
  page), or its cell says it has no words;
- a figure string that changed, or was left in English without the translator's note, is
  reported by the check.
"""

import html as html_lib
import json
import re
import shutil
from pathlib import Path

import pytest

from attnbook.i18n import catalog, figures, sheet
from attnbook.i18n.units import page_units, toc_pages

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = [p for p in toc_pages() if (ROOT / f"{p}.ipynb").exists()]
_CJK = re.compile("[\u4e00-\u9fff]")


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _figure_cells(page):
    return [c for c in _cells(ROOT / f"{page}.ipynb") if c["cell_type"] == "code"
            and any(figures.is_figure(o) for o in c.get("outputs", []))]


FIGURE_PAGES = [p for p in NOTEBOOKS if _figure_cells(p)]


def test_the_book_has_figures():
    assert len(FIGURE_PAGES) >= 25, FIGURE_PAGES


@pytest.mark.parametrize("page", FIGURE_PAGES)
def test_english_figures_are_png_with_their_svg_stored(page):
    for cell in _figure_cells(page):
        for out in filter(figures.is_figure, cell["outputs"]):
            assert "text/html" not in out["data"] and "image/svg+xml" not in out["data"], \
                f"{page}, cell {cell['id']}: the English page shows the PNG only"
            svg = figures.figure_svg(out)
            assert svg, (f"{page}, cell {cell['id']}: a figure without its SVG: run the "
                         "chapter again (make outputs; the chapter calls plots.use_book_style)")
            assert "<dc:date>" not in svg and "<text" in svg or not figures.svg_strings(svg)


@pytest.mark.parametrize("page", FIGURE_PAGES)
def test_every_chinese_figure_is_drawn_in_chinese(page):
    zh_cells = {c["id"]: c for c in _cells(ROOT / "zh" / f"{page}.ipynb")}
    alt = catalog.translations(page)
    ids = []
    for cell in _figure_cells(page):
        words = figures.cell_strings(cell)
        no_words = figures.NO_WORDS_TAG in cell["metadata"].get("tags", [])
        assert not (no_words and words), \
            f"{page}, cell {cell['id']}: tagged {figures.NO_WORDS_TAG} but its figure says {words[:3]}"
        for out in filter(figures.is_figure, zh_cells[cell["id"]]["outputs"]):
            if no_words:
                continue
            html = "".join(out["data"].get("text/html", []))
            where = f"{page}, cell {cell['id']}"
            assert html.startswith(f'<div class="{figures.HTML_CLASS}">'), \
                f"{where}: no Chinese figure (make translations)"
            m = re.search(r'<svg role="img" aria-label="([^"]*)"', html)
            assert m and m.group(1) and _CJK.search(m.group(1)), f"{where}: no Chinese aria-label"
            assert html_lib.unescape(m.group(1)) == alt.get(f"{cell['id']} image.alt"), \
                f"{where}: the aria-label is not the cell's Chinese alt text"
            texts = re.findall(r"<text\b[^>]*>([^<]*)</text>", html)
            assert any(_CJK.search(t) for t in texts), f"{where}: no Chinese word in the figure"
            assert figures.FONT_STACK in html and "DejaVu Sans', 'Bitstream" not in html.split(
                figures.FONT_STACK)[0]
            refs = set(re.findall(r"url\(#([^)]+)\)", html)) | set(re.findall(r'href="#([^"]+)"', html))
            own = re.findall(r' id="([^"]+)"', html)
            assert refs <= set(own), f"{where}: a reference to an id the figure lacks"
            ids += own
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"{page}: ids used twice on the Chinese page: {sorted(dup)[:5]}"


def test_figure_strings_are_units_tick_numbers_are_not():
    units = [u for u in page_units("chapters/03_softmax") if u.kind == "figure"]
    texts = [u.text for u in units]
    assert "weights: softmax over keys" in texts and "softmax over queries (wrong)" in texts
    assert all(re.search("[A-Za-z]", t) for t in texts)
    assert not any(re.fullmatch(r"[\d.\-−]+", t) for t in texts)
    cell = next(c for c in _figure_cells("chapters/03_softmax"))
    svg = next(figures.figure_svg(o) for o in cell["outputs"] if figures.figure_svg(o))
    assert any(re.fullmatch(r"[\d.]+", s) for s in figures.svg_strings(svg))  # ticks exist


def test_translated_svg_keeps_anchors_and_geometry():
    svg = ('<?xml version="1.0"?>\n<svg width="10pt" height="5pt" viewBox="0 0 10 5">'
           '<metadata>x</metadata><defs><clipPath id="p1"><rect/></clipPath></defs>'
           '<g id="axes_1" clip-path="url(#p1)"><text style="font-size: 10px; font-family: '
           "'DejaVu Sans', sans-serif; text-anchor: end\" x=\"3\" y=\"4\">key &amp; query</text>"
           '<text style="font-size: 10px; text-anchor: middle" x="1" y="1">0.5</text></g></svg>')
    out = figures.chinese_svg(svg, {"key & query": "键和查询"}, 'alt "x"', "zh-c1-0-")
    assert out.startswith('<svg role="img" aria-label="alt &quot;x&quot;"')
    assert ">键和查询</text>" in out and ">0.5</text>" in out and "text-anchor: end" in out
    assert 'id="zh-c1-0-p1"' in out and "url(#zh-c1-0-p1)" in out and 'id="axes_1"' not in out
    assert "<metadata>" not in out and "<?xml" not in out and 'x="3" y="4"' in out


@pytest.mark.parametrize("en, zh, note, problem", [
    ("key", "键", "", None),
    ("key", "key", "", "not translated"),
    ("cat", "cat", figures.AS_IN_ENGLISH, None),
    ("cat", "猫", figures.AS_IN_ENGLISH, "differs from the English"),
    ("sum = 168", "总和 = 186", "", "numbers"),
    ("weights", "这是一个非常非常长的注意力权重标签", "", "wider than the English"),
])
def test_figure_rule_rejects_its_mistake(en, zh, note, problem):
    found = figures.form_problems(en, zh, note)
    assert (not found) if problem is None else any(problem in f for f in found), found


def test_stored_svg_is_byte_stable():
    """Drawn twice, under any svg.hashsalt, the same figure gives the same SVG (no date, ids
    from the book's fixed salt): `make outputs` twice leaves the notebooks unchanged."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attnbook import plots

    def draw():
        fig, ax = plt.subplots(figsize=(3, 2))
        plots.heatmap([[0.2, 0.8], [0.5, 0.5]], ["a", "b"], ["c", "d"], ax=ax, title="weights",
                      hidden=[[False, True], [False, False]])
        svg = plots.figure_svg(fig)
        plt.close(fig)
        return svg

    with matplotlib.rc_context({"svg.hashsalt": "one"}):   # what a reader's settings say
        one = draw()
    with matplotlib.rc_context({"svg.hashsalt": None}):    # None: a new salt every run
        two = draw()
    assert one == two and "<dc:date>" not in one
    assert ">weights</text>" in one and "clipPath" in one


# --- reported when stale, on a copy of the book ------------------------------------------

@pytest.fixture
def book(tmp_path):
    for name in ("_toc.yml", "_config.yml", "glossary.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "locale", tmp_path / "locale")
    (tmp_path / "chapters").mkdir()
    shutil.copy(ROOT / "chapters/03_softmax.ipynb", tmp_path / "chapters/03_softmax.ipynb")
    return tmp_path


def test_a_changed_figure_string_is_reported(book):
    page, old = "chapters/03_softmax", "softmax over queries (wrong)"
    path = book / f"{page}.ipynb"
    assert catalog.problems([page], book, form=False) == []
    path.write_text(path.read_text(encoding="utf-8").replace(old, "softmax over the queries (wrong)"),
                    encoding="utf-8")
    found = catalog.problems([page], book, form=False)
    assert [p.ctx.split(" ", 1)[1] for p in found] == ["figure: softmax over the queries (wrong)"]
    catalog.update_page(page, book)
    assert [p.what for p in catalog.problems([page], book, form=False)] == ["not translated"]
    text = sheet.write_sheet(page, book, only_todo=True)
    s = book / "s.txt"
    s.write_text(text.replace(" zh\n\n", " zh\nsoftmax over the queries (wrong)\n"), encoding="utf-8")
    sheet.fill(s, book)
    found = catalog.problems([page], book)
    assert len(found) == 1 and "not translated into Chinese" in found[0].what
