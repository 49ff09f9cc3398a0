"""The site builds with zero warnings and loads nothing from another host."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# An attribute value that points at another host: http(s)://... or protocol-relative //...
EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
CSS_EXTERNAL = re.compile(r"""url\(\s*["']?(?:https?:)?//""", re.I)
# Tags whose src/href the browser fetches by itself (a plain <a href> link is not fetched).
FETCHING = re.compile(r"""<(script|link|img|iframe|source|video|audio|embed)\b[^>]*>""", re.I | re.S)


@pytest.fixture(scope="module")
def site(built_site):
    """The book, built once per run with -W -n --keep-going (see conftest.py)."""
    return built_site


def test_site_builds_with_zero_warnings(site):
    assert site["returncode"] == 0, site["log"][-4000:]
    warnings = [line for line in site["log"].splitlines() if "WARNING" in line or "ERROR" in line]
    assert not warnings, "\n".join(warnings)
    assert (site["html"] / "index.html").exists()


def test_every_toc_page_is_built(site):
    toc = (ROOT / "_toc.yml").read_text()
    for name in re.findall(r"file:\s*(\S+)", toc) + [re.search(r"root:\s*(\S+)", toc).group(1)]:
        assert (site["html"] / f"{name}.html").exists(), f"{name} was not built"


def test_no_resource_from_another_host(site):
    offenders = []
    for page in site["html"].rglob("*.html"):
        for tag in FETCHING.finditer(page.read_text(encoding="utf-8")):
            if EXTERNAL.search(tag.group(0)):
                offenders.append(f"{page.relative_to(site['html'])}: {tag.group(0)[:160]}")
    for css in site["html"].rglob("*.css"):
        for m in CSS_EXTERNAL.finditer(css.read_text(encoding="utf-8", errors="replace")):
            offenders.append(f"{css.relative_to(site['html'])}: {m.group(0)}")
    assert not offenders, "the site would need the internet:\n" + "\n".join(offenders[:20])


def test_mathjax_is_served_locally(site):
    """MathJax 3 from the site: its loader, which loads the components the configuration names
    from beside it (attnbook/i18n/sphinx_ext.py; the combined tex-chtml.js also bundles the
    right-click menu, 108 of its 264 KB gzip)."""
    from attnbook.i18n.sphinx_ext import MATHJAX_LOAD

    page = (site["html"] / "chapters" / "01_three_tokens.html").read_text(encoding="utf-8")
    assert re.search(r"""<script[^>]+src="[./]*_static/mathjax/startup\.js""", page), "MathJax is not local"
    config = re.search(r"<script>window\.MathJax = (\{.*?\})</script>", page)
    assert config and json.loads(config[1])["loader"]["load"] == MATHJAX_LOAD, config
    for component in ["startup"] + MATHJAX_LOAD + ["output/chtml/fonts/tex"]:
        assert (site["html"] / "_static" / "mathjax" / f"{component}.js").exists(), component


def test_chapter_shows_static_demo_and_collapsed_solutions(site):
    page = (site["html"] / "chapters" / "01_three_tokens.html").read_text(encoding="utf-8")
    # its only widget is the live figure (attnbook.live), drawn by the site's own loader
    assert not re.search(r'<script[^>]+src="[^"]*(jupyter-widgets|embed-amd|require)', page), \
        "the CDN widget manager is on the page"
    assert page.count('type="application/vnd.jupyter.widget-view+json"') == 1, "not exactly one live figure"
    assert page.count('class="solution dropdown') >= 3 or page.count("dropdown") >= 3
    assert page.count("<img") >= 4, "figures are missing"
    for alt in re.findall(r'<img[^>]*alt="([^"]*)"', page):
        assert alt.strip(), "an image without alt text"


# --- the Chinese edition (_build/html/zh) ---------------------------------------------

def _toc_pages():
    toc = (ROOT / "_toc.yml").read_text()
    return [re.search(r"root:\s*(\S+)", toc).group(1)] + re.findall(r"file:\s*(\S+)", toc)


def test_every_page_exists_in_both_languages_with_a_switch(site):
    from attnbook.i18n.sphinx_ext import other_url

    html = site["html"]
    for name in _toc_pages():
        for lang, page in (("en", html / f"{name}.html"), ("zh", html / "zh" / f"{name}.html")):
            assert page.exists(), f"{page.relative_to(html)} was not built"
            text = page.read_text(encoding="utf-8")
            want = 'lang="zh-CN"' if lang == "zh" else 'lang="en"'
            assert re.search(rf"<html[^>]*{want}", text), f"{page.relative_to(html)}: not {want}"
            links = re.findall(r'<a class="attnbook-lang-switch" href="([^"]+)"', text)
            assert links == [other_url(name, lang)], f"{page.relative_to(html)}: switch {links}"
            target = (page.parent / links[0]).resolve()
            other = (html / f"{name}.html") if lang == "zh" else (html / "zh" / f"{name}.html")
            assert target == other.resolve(), f"{page.relative_to(html)} switches to {target}"


def test_chinese_site_labels_and_search_index(site):
    html = site["html"] / "zh"
    page = (html / "chapters" / "03_softmax.html").read_text(encoding="utf-8")
    assert "搜索" in page, "the theme's search box is not in Chinese"
    index = (html / "searchindex.js").read_text(encoding="utf-8")
    for word in ("注意力", "掩码", "旋转位置编码"):
        assert json.dumps(word) in index or f'"{word}"' in index, f"the Chinese search index has no {word} (is jieba installed?)"
    exercise = (html / "chapters" / "01_three_tokens.html").read_text(encoding="utf-8")
    assert "练习" in exercise and "解答" in exercise, "exercise and solution labels are not Chinese"


def test_the_served_font_has_every_chinese_character_of_the_site(site):
    """The Chinese web font's slices (make font) hold every Chinese character the site shows,
    each in the slice whose unicode-range names it, and both editions serve them."""
    import re

    from attnbook.i18n import font

    slices = font.served_slices()
    sheet = ROOT / font.CSS
    assert slices and sheet.exists(), "no Chinese web font: run `make font` (needs fonts-noto-cjk)"
    missing = font.site_characters(site["html"]) - font.served_characters()
    assert not missing, (f"the site uses {len(missing)} Chinese character(s) the served font lacks: "
                         f"{''.join(sorted(missing))[:80]}; run `make font` after `make book`")
    # each @font-face's unicode-range is exactly what its slice holds
    faces = re.findall(r'src: url\("([^"]+)"\) format\("woff2"\);\s*font-display: swap;\s*'
                       r"unicode-range: ([^;]+);", sheet.read_text(encoding="utf-8"))
    assert [name for name, _ in faces] == [p.name for p in slices], faces
    for path, (_, ranges) in zip(slices, faces):
        assert ranges == font.unicode_range("".join(font.font_characters(path) & set(
            chr(c) for a, b in font.RANGES for c in range(a, b + 1)))), path.name
    assert slices[0].stat().st_size < 4_000, "the first slice (the English pages' 中文) grew"
    assert sum(p.stat().st_size for p in slices) < 1_000_000, "the font grew past 1 MB"
    for where in ("", "zh/"):
        for name in [p.name for p in slices] + [sheet.name]:
            assert (site["html"] / where / "_static" / "fonts" / name).exists(), where + name


def test_every_chinese_page_has_the_english_pages_math(site):
    """The same formulas on both editions of every page (the English tour checks that MathJax
    typesets them; the Chinese tour stubs MathJax out to stay cheap)."""
    from collections import Counter

    math = re.compile(r'<(?:span|div) class="math[^"]*">(.*?)</(?:span|div)>', re.S)
    differ = []
    for name in _toc_pages():
        en = Counter(math.findall((site["html"] / f"{name}.html").read_text(encoding="utf-8")))
        zh = Counter(math.findall((site["html"] / "zh" / f"{name}.html").read_text(encoding="utf-8")))
        if en != zh:
            differ.append(f"{name}: only English {list((en - zh).elements())[:2]}, "
                          f"only Chinese {list((zh - en).elements())[:2]}")
    assert not differ, "\n".join(differ)


def test_chinese_pages_draw_the_figures_in_chinese(site):
    """Each matplotlib figure: a PNG image on the English page, inline SVG in Chinese on the
    Chinese page (role="img", aria-label in Chinese; attnbook/i18n/figures.py), as many."""
    from attnbook.i18n import figures

    pages = [p for p in (ROOT / "chapters").glob("*.ipynb")
             if '"image/png"' in p.read_text(encoding="utf-8")]
    assert len(pages) >= 25
    cjk = re.compile("[\u4e00-\u9fff]")
    for nb in pages:
        en = (site["html"] / "chapters" / f"{nb.stem}.html").read_text(encoding="utf-8")
        zh = (site["html"] / "zh" / "chapters" / f"{nb.stem}.html").read_text(encoding="utf-8")
        n_png = len(re.findall(r'<img [^>]*src="[^"]*\.png"', en))
        svgs = re.findall(r'<svg role="img" aria-label="([^"]*)" class="%s"(.*?)</svg>'
                          % figures.HTML_CLASS, zh, re.S)
        assert n_png and len(svgs) == n_png, f"{nb.stem}: {n_png} PNG(s) in English, {len(svgs)} SVG(s) in Chinese"
        assert "attnbook-figure-zh" not in en, nb.stem
        for label, body in svgs:
            assert cjk.search(label), f"{nb.stem}: an aria-label not in Chinese: {label[:60]}"
            assert any(cjk.search(t) for t in re.findall(r"<text\b[^>]*>([^<]*)</text>", body)), \
                f"{nb.stem}: a figure with no Chinese word"


# The theme's interface strings on the Chinese site (attnbook/i18n/sphinx_ext.py: THEME_ZH,
# TEMPLATE_EDITS, HIDDEN_CELL; the live figures' note: attnbook/live/base.py NOSCRIPT).
ENGLISH_UI = ["Search this book...", "列印成", "Toggle primary sidebar", "Toggle secondary sidebar",
              "Color mode", "System Settings", "Link to this heading", "The attnbook authors",
              "Toggle hidden content", "This live figure needs JavaScript", "© Copyright",
              'aria-label="Main"', 'aria-label="Page"']
CHINESE_UI = ['placeholder="搜索本书……"', "打印为PDF", 'title="显示/隐藏目录"', 'title="显示/隐藏本页导航"',
              'data-bs-title="颜色模式"', 'title="链接到此标题"', "作者：attnbook编写组",
              'aria-label="显示/隐藏代码"', "这个交互图需要JavaScript", "版权所有"]
# English a Chinese page may keep in an attribute: the switch to the English page (written in
# the language it leads to), key names, the language's own name
ENGLISH_ALLOWED = {"Read this page in English", "English", "Ctrl"}


def test_the_chinese_site_speaks_chinese_in_its_interface(site):
    """Chapter 01 in Chinese (a live figure, hidden code cells, headings, the footer) has none
    of the theme's English strings and all their Chinese; the English page keeps its English."""
    zh = (site["html"] / "zh" / "chapters" / "01_three_tokens.html").read_text(encoding="utf-8")
    assert not [s for s in ENGLISH_UI if s in zh], [s for s in ENGLISH_UI if s in zh]
    assert not [s for s in CHINESE_UI if s not in zh], [s for s in CHINESE_UI if s not in zh]
    en = (site["html"] / "chapters" / "01_three_tokens.html").read_text(encoding="utf-8")
    for s in ["Search this book...", "Toggle primary sidebar", "Link to this heading",
              "By The attnbook authors", "This live figure needs JavaScript", "Print to PDF"]:
        assert s in en, s
    assert not re.search(r"[\u4e00-\u9fff]", re.sub(r'<nav class="attnbook-lang".*?</nav>', "", en[:en.find(
        '<article')], flags=re.S)), "Chinese in the English page's interface"


def test_no_english_attribute_on_a_chinese_page(site):
    """Every title, aria-label, placeholder and tooltip of every Chinese page is Chinese (or
    one of ENGLISH_ALLOWED); a theme update that brings back an English label fails here."""
    english = {}
    for page in sorted((site["html"] / "zh").rglob("*.html")):
        rel = page.relative_to(site["html"]).as_posix()
        if re.search(r"(^|/)_(static|sources|images)/", rel):
            continue
        text = page.read_text(encoding="utf-8")
        for value in re.findall(r'(?:title|aria-label|placeholder|data-bs-title|data-tooltip)="([^"]*)"',
                                text):
            if re.search(r"[A-Za-z]{3}", value) and not re.search(r"[\u4e00-\u9fff]", value) \
                    and value not in ENGLISH_ALLOWED:
                english.setdefault(value, rel)
    assert not english, f"{len(english)} English attribute value(s) on Chinese pages: " + \
        "; ".join(f"{v!r} ({p})" for v, p in list(english.items())[:20])
