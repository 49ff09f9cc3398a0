"""`make slides`: decks that work offline, with MyST shown as what it is (attnbook/slides_export.py).

The MyST conversion is tested on text; one chapter's deck (chapter 01: exercises, "In
the source" dropdowns, math, an SVG figure, a live figure) is exported and opened in chromium over
http and over file://, with every other host blocked, and stepped through to its last
fragment.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from attnbook import slides_export as sx

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "node_modules"
CHAPTER = ROOT / "chapters" / "01_three_tokens.ipynb"  # an SVG figure, a live figure, dropdowns
LATER = ROOT / "chapters" / "06_masking.ipynb"  # its exercises are numbered after earlier chapters


def _markdown_cells(path):
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]
            if c["cell_type"] == "markdown"]


def _html(text, first=1):
    return sx._open_boxes(sx.myst_to_html(text, sx._Numbers(first)))


# --- MyST as HTML (no browser) ---

def test_exercise_becomes_a_numbered_box_with_its_body_inside():
    out = _html("```{exercise}\n:label: ex-a\nWrite `f(x)` for $x$.\n```", first=15)
    assert re.search(r'<div class="attnbook-directive exercise"><p class="title">Exercise 15 '
                     r'\(chapter exercise 1\)</p>'
                     r"\s+Write `f\(x\)` for \$x\$.\s+</div>", out), out
    assert "{exercise}" not in out and ":label:" not in out


def test_an_exercise_shows_the_sites_number_and_the_chapters_own():
    """The site numbers exercises through the book (15, 16, ...), JupyterLab in the student kit
    within the notebook (1, 2, ...): a deck shows both, in its language."""
    text = "```{exercise}\n:label: ex-a\nA.\n```\n\n```{exercise}\n:label: ex-b\nB.\n```"
    en = _html(text, first=15)
    assert re.findall(r'<p class="title">([^<]*)</p>', en) == [
        "Exercise 15 (chapter exercise 1)", "Exercise 16 (chapter exercise 2)"]
    zh = sx._open_boxes(sx.myst_to_html(text, sx._Numbers(15, "zh")))
    assert re.findall(r'<p class="title">([^<]*)</p>', zh) == ["练习 15（本章第 1 题）",
                                                               "练习 16（本章第 2 题）"]
    solution = "```{solution-start} ex-b\n```\nS.\n```{solution-end}\n```"
    assert "Solution to Exercise 16" in _html(text + "\n\n" + solution, first=15)


ZH_EMPHASIS = 'html[lang="zh-CN"] .reveal em { font-synthesis-style: none; font-weight: 600; }'


def test_chinese_emphasis_is_upright_as_on_the_chinese_site():
    """Noto Sans SC has no italic: the Chinese site sets emphasis upright and bolder
    (_static/attnbook.css); a Chinese deck does the same, an English deck keeps its italics."""
    site = (ROOT / "_static" / "attnbook.css").read_text()
    rule = re.search(r'html\[lang="zh-CN"\] \.bd-article em \{([^}]*)\}', site)
    assert rule and "font-synthesis-style: none" in rule[1] and "font-weight: 600" in rule[1]
    page = "<html lang=\"en\"><head></head><body><em>x</em></body></html>"
    assert ZH_EMPHASIS in sx._localise(page, "zh") and ZH_EMPHASIS not in sx._localise(page, "en")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_deck_figures_carry_the_cells_alt_text(lang):
    """Every figure a code cell draws (PNG) carries the cell's alt text from its mystnb
    metadata, Chinese in a Chinese deck: never nbconvert's "No description has been provided
    for this image". An inline SVG (text/html, with its own aria-label) is left as it is."""
    import nbformat

    path = LATER if lang == "en" else ROOT / "zh" / "chapters" / LATER.name
    nb = nbformat.read(path, as_version=4)
    # a figure shows as a PNG, or as an inline SVG where the output has one (text/html comes
    # first: the Chinese pages' figures, drawn with Chinese labels)
    figures = [(c, o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
               if "image/png" in o.get("data", {})]
    alts = [sx._image_alt(c) for c, o in figures if "text/html" not in o["data"]]
    inline = [o for c, o in figures if "text/html" in o["data"]]
    assert len([sx._image_alt(c) for c, o in figures if sx._image_alt(c)]) >= 3
    deck = sx.prepare_deck(nb, 1, solutions=True, folder=path.parent)
    # an HTML output (an inline SVG figure) stays untouched
    html_cell = nbformat.v4.new_code_cell("x", metadata={"mystnb": {"image": {"alt": "A"}}})
    html_cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": '<svg role="img" aria-label="B"></svg>'})]
    deck.cells.append(sx.prepare_deck(nbformat.v4.new_notebook(cells=[html_cell])).cells[0])
    body, _ = sx._exporter().from_notebook_node(
        deck, resources={"metadata": {"path": str(path.parent), "name": path.stem}})
    import html

    images = [tag for tag in re.findall(r"<img\b[^>]*>", body) if "data:image/png" in tag]
    assert len(images) == len(alts)
    assert "No description has been provided" not in body
    for alt, tag in zip(alts, images):
        got = re.search(r'\balt="([^"]*)"', tag)
        assert got and html.unescape(got[1]) == (alt or sx.NO_ALT[lang]), (alt, tag[:200])
    labels = re.findall(r'<svg aria-label="([^"]+)"[^>]*role="img"', body)
    assert len(labels) == len(inline) + 1  # and the HTML test cell's below
    if lang == "zh":
        assert all(re.search(r"[\u4e00-\u9fff]", a) for a in alts + labels[:-1] if a)
    assert '<svg aria-label="B" role="img"></svg>' in body  # (attributes sorted)


def test_dropdown_admonition_becomes_details_and_plain_admonition_a_box():
    out = _html(":::{admonition} In the source: `003`\n:class: dropdown\n- a **b**\n:::\n\n"
                "```{note}\nSee this.\n```")
    assert '<details class="attnbook-directive admonition"><summary class="title">' \
           "In the source: <code>003</code></summary>" in out
    assert "</details>" in out and ":::" not in out and ":class:" not in out
    assert '<div class="attnbook-directive admonition note"><p class="title">Note</p>' in out


def test_nested_directives_and_fences_of_several_lengths():
    text = "````{admonition} Outer\n```{exercise}\n:label: ex-in\nInner $x$.\n```\nAfter.\n````"
    out = _html(text, first=3)
    assert out.index("Outer") < out.index("Exercise 3") < out.index("Inner") < out.index("After.")
    assert out.count("<div") == out.count("</div>") == 2
    assert "```" not in out


def test_figure_math_labels_and_links():
    out = _html("(sec-x)=\n## A\n\n```{figure} ../figures/a.png\n:alt: blocks\nThe caption.\n```\n\n"
                "```{math}\na = b\n```\n\nSee [masks](06_masking.ipynb#s) and [terms](../glossary.md).")
    assert "(sec-x)=" not in out
    assert "![blocks](../figures/a.png)" in out and "<figcaption>" in out
    assert "$$\na = b\n$$" in out
    assert "[masks](06_masking.slides.html#s)" in out and "See" in out and "glossary.md" not in out


def test_local_images_embedded_even_with_brackets_in_their_alt_text():
    text = "![rows [token,\nhead, :] of (3, 2)](../figures/split_transpose.svg) and ![x](https://e.org/a.png)"
    out = sx._embed_images(text, CHAPTER.parent)
    assert "](data:image/svg+xml;base64," in out and "split_transpose" not in out
    assert "](https://e.org/a.png)" in out  # not a local file: left alone


def test_solutions_left_out_by_default_and_on_sub_slides_when_asked():
    import nbformat

    nb = nbformat.read(CHAPTER, as_version=4)
    deck = sx.prepare_deck(nb)
    gated = [c for c in deck.cells if "Solution to Exercise" in c.source]
    assert gated and all(c.metadata["slideshow"]["slide_type"] == "skip" for c in gated)
    shown = sx.prepare_deck(nb, solutions=True)
    starts = [c for c in shown.cells if "Solution to Exercise" in c.source]
    assert [c.metadata["slideshow"]["slide_type"] for c in starts] == ["subslide"] * len(starts)


def test_every_directive_in_the_book_is_converted():
    """No chapter's markdown keeps a directive fence or an option line after conversion."""
    left = []
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        numbers = sx._Numbers()
        for text in _markdown_cells(path):
            out = sx.myst_to_html(text, numbers)
            for line in out.splitlines():
                if re.match(r"^ {0,3}(`{3,}|:{3,})\s*\{", line) or re.match(r"^:(class|label):", line):
                    left.append(f"{path.name}: {line}")
    assert not left, left[:5]


def test_exercise_numbers_match_the_site(built_site):
    """The deck numbers exercises as the site does (sphinx-exercise counts book-wide)."""
    page = (built_site["html"] / "chapters" / "06_masking.html").read_text()
    site = [int(n) for n in re.findall(r'caption-number">Exercise (\d+) ', page)]
    first = sx._exercises_before(LATER) + 1
    numbers = sx._Numbers(first)
    for text in _markdown_cells(LATER):
        sx.myst_to_html(text, numbers)
    assert first > 1 and site == list(range(first, numbers.exercise + 1))


# --- one deck in chromium ---

@pytest.fixture(scope="module")
def deck(tmp_path_factory):
    missing = [f"{p}/{r}" for p, rels in sx.ASSET_FILES.items() for r in rels
               if not (NODE_MODULES / p / r).exists()]
    if missing:
        pytest.skip("node_modules/ lacks the deck's assets: run `make assets` (npm ci)")
    out = tmp_path_factory.mktemp("slides")
    [path] = sx.export(out, [CHAPTER])
    return path


def test_deck_names_no_other_host(deck):
    page = deck.read_text()
    urls = re.findall(r'(?:src|href)="([^"#][^"]*)"', page)
    remote = [u for u in urls if re.match(r"(https?:)?//", u)]
    assert not remote, remote
    assert re.search(r'src="assets/mathjax/MathJax.js', page)
    for url in urls:
        if not url.startswith(("data:", "http")) and not url.endswith(".slides.html"):
            assert (deck.parent / url.split("?")[0]).exists(), url


def _open_deck(browser, url):
    """Open a deck with every other host blocked (the browser's proxy does not exist),
    step through every slide and fragment; returns what it saw."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    context.set_default_timeout(30_000)
    seen = {"failed": [], "errors": [], "requests": []}
    page = context.new_page()
    page.on("request", lambda r: seen["requests"].append(r.url))
    page.on("requestfailed", lambda r: seen["failed"].append(f"{r.url} {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and seen["failed"].append(f"{r.url} {r.status}"))
    page.on("pageerror", lambda e: seen["errors"].append(str(e)))
    page.on("console", lambda m: m.type == "error" and seen["errors"].append(m.text))
    try:
        page.goto(url)
        page.wait_for_function("window.Reveal && Reveal.isReady()")
        page.wait_for_function("window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
                               " && document.querySelector('.MathJax_CHTML')")
        seen["slides"] = page.evaluate("Reveal.getTotalSlides()")
        page.keyboard.press("Space")  # the keyboard moves it (one step), then the deck's own
        page.wait_for_function("Reveal.getIndices().f !== undefined || Reveal.getIndices().h > 0")
        seen["steps"] = page.evaluate("""async () => {  // next() is what Space does
          // Slide by slide (fragments shown at once): each change re-renders the slide's math.
          Reveal.configure({ transition: "none", backgroundTransition: "none", fragments: false });
          let n = 1;
          // As a teacher steps: the next slide once the deck has re-rendered this one's math
          // (faster, MathJax 2 re-renders slides already hidden: "Math Processing Error").
          while (!Reveal.isLastSlide() && n < 500) {
            Reveal.next(); n++;
            await new Promise((ok) => MathJax.Hub.Queue(ok));
          }
          return n;
        }""")
        assert seen["steps"] < 500, "the deck never reaches its end"
        seen.update(page.evaluate("""() => {
          const slides = document.querySelector('.slides');
          const text = slides.innerText;
          return {
            math: slides.querySelectorAll('.MathJax_CHTML').length,
            formulas: slides.querySelectorAll('script[type^="math/tex"]').length,
            mathErrors: slides.querySelectorAll('.MathJax_Error, merror').length,
            rawMath: (text.match(/\\$[^$\\n]{1,40}\\$/g) || []).length,
            rawDirectives: (text.match(/(:::|```)\\s*\\{|:class:|:label:/g) || []).length,
            exercises: slides.querySelectorAll('.attnbook-directive.exercise').length,
            dropdowns: slides.querySelectorAll('details.attnbook-directive').length,
            live: document.querySelectorAll('[data-live-ready]').length,
            brokenImages: Array.from(document.images).filter((i) => !i.complete || !i.naturalWidth)
              .map((i) => i.src.slice(0, 80)),
            solutions: (text.match(/Solution to Exercise/g) || []).length,
          };
        }"""))
    finally:
        context.close()
    return seen


@pytest.mark.parametrize("scheme", ["http", "file"])
def test_deck_offline(deck, scheme):
    site_tour = pytest.importorskip("site_tour")
    if not Path(site_tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: apt-get install chromium (or set CHROMIUM=...)")
    browser = site_tour.shared_browser()
    base = site_tour.serve(deck.parent) if scheme == "http" else deck.parent.as_uri() + "/"
    seen = _open_deck(browser, base + deck.name)
    assert not seen["failed"], seen["failed"]
    others = [u for u in seen["requests"] if not u.startswith((base, "data:", "blob:"))]
    assert not others, others
    assert not seen["errors"], seen["errors"]
    assert seen["slides"] >= 10 and seen["steps"] == seen["slides"]  # 1 key press + next()s
    # every formula typeset (MathJax keeps each one's TeX in a script beside its output)
    assert seen["math"] == seen["formulas"] > 20, (seen["math"], seen["formulas"])
    assert not seen["mathErrors"] and not seen["rawMath"], seen
    assert not seen["rawDirectives"] and not seen["brokenImages"], seen["brokenImages"]
    cells = _markdown_cells(CHAPTER)
    assert seen["exercises"] == sum(len(re.findall(r"\{exercise\}", t)) for t in cells)
    assert seen["dropdowns"] >= 1 and seen["live"] == 1 and seen["solutions"] == 0


# --- the Chinese edition's decks ---------------------------------------------------------

def test_chinese_deck_is_chinese_and_numbered_as_the_site(built_site, tmp_path):
    """A deck of a Chinese notebook (zh/): lang zh-CN, the deck's own words in Chinese, the
    exercises numbered as on the Chinese site, the book's web font beside it."""
    missing = [f"{p}/{r}" for p, rels in sx.ASSET_FILES.items() for r in rels
               if not (NODE_MODULES / p / r).exists()]
    if missing:
        pytest.skip("node_modules/ lacks the deck's assets: run `make assets` (npm ci)")
    zh = ROOT / "zh" / "chapters" / LATER.name
    [path] = sx.export(tmp_path, [zh])
    deck = path.read_text(encoding="utf-8")
    assert re.search(r'<html lang="zh-CN"', deck)
    page = (built_site["html"] / "zh" / "chapters" / "06_masking.html").read_text()
    site = [int(n) for n in re.findall(r'caption-number">练习 (\d+) ', page)]
    assert site and [int(n) for n in re.findall(r"练习 (\d+)（本章第 \d+ 题）</p>", deck)] == site, site
    # the chapter's own numbers, as the student kit's JupyterLab shows them
    assert re.findall(r"练习 \d+（本章第 (\d+) 题）</p>", deck) == [str(i) for i in range(1, len(site) + 1)]
    assert ZH_EMPHASIS in deck
    assert "Exercise " not in re.sub(r"<script.*?</script>", "", deck, flags=re.S)
    assert (tmp_path / "assets" / "fonts" / "noto-sans-sc.css").exists()
    assert (tmp_path / "assets" / "fonts" / "noto-sans-sc-01.woff2").exists()
    assert '<link rel="stylesheet" href="assets/fonts/noto-sans-sc.css">' in deck


DECK_PROBES = [".reveal h1", ".reveal h2", ".reveal p", ".reveal li", ".reveal td", ".reveal th",
               ".reveal summary", ".reveal .attnbook-live", ".reveal .attnbook-live button",
               ".reveal .attnbook-live-svg text"]


@pytest.fixture(scope="module")
def zh_deck_file(tmp_path_factory):
    """Chapter 06's Chinese deck, exported once for the tests below."""
    site_tour = pytest.importorskip("site_tour")
    if not Path(site_tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: apt-get install chromium (or set CHROMIUM=...)")
    missing = [f"{p}/{r}" for p, rels in sx.ASSET_FILES.items() for r in rels
               if not (NODE_MODULES / p / r).exists()]
    if missing:
        pytest.skip("node_modules/ lacks the deck's assets: run `make assets` (npm ci)")
    out = tmp_path_factory.mktemp("zh-deck")
    [path] = sx.export(out, [ROOT / "zh" / "chapters" / LATER.name])
    return path


@pytest.fixture
def zh_deck(zh_deck_file):
    """The deck served over http and opened in chromium at 1280 x 720 (a projector's
    window), its math typeset and its live figure drawn; yields the page."""
    import site_tour

    context = site_tour.shared_browser().new_context(viewport={"width": 1280, "height": 720})
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        page.goto(site_tour.serve(zh_deck_file.parent) + zh_deck_file.name)
        page.wait_for_function("window.Reveal && Reveal.isReady()")
        page.wait_for_function("window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0"
                               " && document.querySelector('.MathJax_CHTML')")
        page.wait_for_function("document.querySelector('[data-live-ready]')")
        yield page
    finally:
        context.close()


def test_the_first_slide_scrolls_when_the_deck_opens(zh_deck):
    """The title slide (taller than a 720 px window in most decks) scrolls as the deck
    opens, before any other slide has been shown."""
    seen = zh_deck.evaluate("""() => {
      const slide = Reveal.getCurrentSlide();
      const before = slide.scrollTop;
      slide.scrollTop = 200;
      return {index: Reveal.getIndices().h, height: slide.scrollHeight,
              window: document.querySelector(".reveal").clientHeight,
              overflow: getComputedStyle(slide).overflowY, scrolled: slide.scrollTop - before};
    }""")
    assert seen["index"] == 0 and seen["height"] > seen["window"], seen  # it is taller
    assert seen["overflow"] in ("scroll", "auto") and seen["scrolled"] > 0, seen


def test_chinese_deck_draws_its_chinese_in_the_served_font(zh_deck):
    """Chapter 06's Chinese deck (its polarity table, its boxes, the mask editor's labels and
    buttons): every Chinese character of it, in a copy of each kind of element, is drawn by
    the book's web font (a custom font), never by a system font; on a machine with no Chinese
    font, a system font would mean boxes."""
    import site_tour

    page = zh_deck
    # every slide laid out (reveal.js shows only the slides near the current one), boxes open
    page.add_style_tag(content=".reveal .slides section, .reveal .slides section[hidden] "
                       "{ display: block !important; visibility: visible !important; }")
    page.evaluate("() => document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    seen = site_tour.probe_fonts(page, ".reveal .slides", DECK_PROBES)
    assert seen["chars"] > 300 and {".reveal td", ".reveal .attnbook-live button",
                                    ".reveal .attnbook-live-svg text"} <= set(seen["fonts"]), seen
    bad = {sel: fonts for sel, fonts in seen["fonts"].items()
           if not fonts or [f for f in fonts if not f[1]]}
    assert not bad, bad


def test_deck_code_and_outputs_keep_their_lines(zh_deck):
    """No code line or output line of the deck is broken inside a word: each keeps its line
    (the book's lines go to 79 characters), and such a line fits the slide's width."""
    page = zh_deck
    page.add_style_tag(content=".reveal .slides section, .reveal .slides section[hidden] "
                       "{ display: block !important; visibility: visible !important; }")
    seen = page.evaluate("""() => [...document.querySelectorAll(
        '.reveal .jp-OutputArea-output pre, .reveal div.highlight > pre')]
      .filter((pre) => pre.getClientRects().length)
      .map((pre) => ({white: getComputedStyle(pre).whiteSpace,
                      longest: Math.max(...pre.textContent.split("\\n").map((l) => l.length)),
                      scroll: pre.scrollWidth, width: pre.clientWidth,
                      line: pre.textContent.split("\\n").reduce((a, b) => b.length > a.length ? b : a)}))""")
    assert len(seen) > 20, seen
    wraps = [s for s in seen if s["white"] != "pre"]
    assert not wraps, wraps[:3]
    cut = [s for s in seen if s["longest"] <= 79 and s["scroll"] > s["width"] + 1]
    assert not cut, cut[:3]


def test_chinese_emphasis_is_not_slanted_in_the_deck(zh_deck):
    """Emphasis on the Chinese deck: upright (no synthetic slant of a font with no italic)
    and bolder, as on the Chinese site."""
    seen = zh_deck.evaluate("""() => [...document.querySelectorAll('.reveal em')]
      .filter((em) => /[\\u4e00-\\u9fff]/.test(em.textContent))
      .map((em) => ({text: em.textContent, synthesis: getComputedStyle(em).fontSynthesisStyle,
                     weight: getComputedStyle(em).fontWeight}))""")
    assert seen, "chapter 06's Chinese deck has no Chinese emphasis to look at"
    bad = [s for s in seen if s["synthesis"] != "none" or int(s["weight"]) < 600]
    assert not bad, bad[:3]
