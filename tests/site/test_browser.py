"""The built site in a real browser: Debian's chromium, driven by Playwright for Python.

The book is built once (``built_site`` in conftest.py) and served on 127.0.0.1 on a
free port. One browser tours the site once (tests/site_tour.py: every page visited
once, with every request to another host blocked and counted), and the tests below
check what it saw:

- no request fails, and no request goes to another host (the count must be zero);
- no console error except the allow-list below (known theme noise, with reasons);
- math is rendered by MathJax wherever a page has math, with no MathJax error;
- every image loads (naturalWidth > 0) and has non-empty alt text;
- every internal link points at a file of the site, and every #anchor at an id on it;
- no empty output box and no widget JavaScript (the site shows the static demos);
- the built-in search finds a chapter by its title;
- every figure has an opaque light background, so it reads the same in dark mode; chapter 01
  really turns dark in dark mode (screenshots in light and dark mode are saved in
  _build/screenshots/ to look at);
- every page of both editions moves at most 0.9 MB on a first visit (every file it loads,
  gzip level 6, as a static server sends it); a table of each page's weight and its largest
  files is printed at the end of the run; no page loads the theme's fontawesome.js;
- every table and figure fits the article's column at 1280 px and at 390 px (a phone); a
  display equation fits, or scrolls sideways and shows that it does (a shadow at the
  hidden edge); the run's report lists those that scroll;
- in a 1280 x 900 desktop window no code block and no text output scrolls sideways
  (solutions and hidden inputs opened first): the notebooks keep lines of at most 79
  characters (tests/chapters/test_line_length.py) and _static/attnbook.css gives the article
  the width they need.

Without chromium these tests skip, saying how to install it. The browser is never
downloaded by Playwright (no `playwright install`): set CHROMIUM=/path/to/chromium to
use another binary.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from site_tour import (CHAPTER, DESKTOP, PARTS, PHONE, SEARCHES, ZH_SEARCHES, _part_pages,
                       site_pages, switch_pages, zh_pages)

ROOT = Path(__file__).resolve().parents[2]

# Console messages that are known noise of the theme, not the book's doing. Keep it short.
CONSOLE_ALLOW = [
    (r"Identifier 'THEBE_JS_URL' has already been declared",
     "sphinx-book-theme 1.3 writes sphinx-thebe's config script twice on every page; thebe is off"),
    (r"Got invalid theme mode",
     "pydata-sphinx-theme on a first visit, before a light/dark choice is stored; it resets to auto"),
]


@pytest.fixture(scope="module")
def html(built_site):
    if built_site["returncode"] != 0:
        pytest.fail("the book did not build (see test_site.py)")
    return built_site["html"]


@pytest.mark.parametrize("part", PARTS)
def test_tour(part, tour_part, html):
    """Each part of the tour (taken here, first: see tests/site_tour.py) visited its pages."""
    seen = tour_part(part)
    if part == PARTS[3]:
        assert seen["dark"]["backgrounds"]["figures"] and len(seen["file"]) == len(seen["nojs"])
        return
    if part == PARTS[4]:
        assert sorted(seen["zh"]) == zh_pages(html) and len(seen["zh"]) == len(switch_pages(html))
        return
    assert sorted(seen["pages"]) == _part_pages(html, part) and seen["pages"]
    assert all(data["title"] for data in seen["pages"].values()), "a page without a title"


@pytest.fixture(scope="module")
def visits(site_tour):
    """What the tour saw on every page in light mode over http, and its records."""
    return {"pages": site_tour["pages"], "rec": site_tour["http"],
            "seconds": sum(site_tour["seconds"].values())}


def _allowed(text):
    return any(re.search(pattern, text) for pattern, _ in CONSOLE_ALLOW)


def test_every_page_was_visited(visits, html):
    pages = visits["pages"]
    assert sorted(pages) == site_pages(html) and CHAPTER in pages and "intro.html" in pages
    assert all(data["title"] for data in pages.values()), "a page without a title"


def test_no_request_to_another_host(visits):
    blocked = visits["rec"]["blocked"]
    assert len(blocked) == 0, f"{len(blocked)} request(s) to other hosts (blocked):\n" + \
        "\n".join(f"  {page}: {url}" for page, url in blocked[:30])


def test_no_failed_request(visits):
    failed = visits["rec"]["failed"]
    assert not failed, "failed requests:\n" + "\n".join(f"  {p}: {u} ({why})" for p, u, why in failed[:30])


def test_no_console_error_beyond_the_allow_list(visits, record_property):
    messages = visits["rec"]["console"]
    errors = [(p, kind, text) for p, kind, text in messages
              if kind in ("error", "pageerror") and not _allowed(text)]
    counts = {}
    for _, kind, text in messages:
        key = (kind, re.sub(r"\s+", " ", text)[:110])
        counts[key] = counts.get(key, 0) + 1
    report = [f"{len(visits['pages'])} pages visited in {visits['seconds']:.1f} s; console messages seen:"]
    report += [f"  {n:3d} x {kind:9s} {text}" + ("   [allowed]" if _allowed(text) else "")
               for (kind, text), n in sorted(counts.items(), key=lambda kv: -kv[1])]
    record_property("report:browser: pages and console messages", "\n".join(report))
    assert not errors, "console errors:\n" + "\n".join(f"  {p}: [{k}] {t[:300]}" for p, k, t in errors[:30])


def test_math_is_rendered(visits):
    problems = []
    for path, data in visits["pages"].items():
        if data["math"] and (data["mathjax"] < data["math"] or data["rawTex"]):
            problems.append(f"{path}: {data['math']} math elements, {data['mathjax']} rendered; "
                            f"not rendered: {data['rawTex'][:3]}")
        if data["mathErrors"]:
            problems.append(f"{path}: {data['mathErrors']} MathJax error(s)")
    assert not problems, "\n".join(problems)
    assert visits["pages"][CHAPTER]["mathjax"] > 0, "chapter 01 has math, but none was rendered"


def test_every_image_loads_and_has_alt_text(visits):
    problems = []
    for path, data in visits["pages"].items():
        for img in data["images"]:
            name = img["src"].rsplit("/", 1)[-1][:60]
            if img["width"] == 0:
                problems.append(f"{path}: image did not load: {name}")
            if not img["alt"]:
                problems.append(f"{path}: image without alt text: {name}")
    assert not problems, "\n".join(problems)


def test_internal_links_and_anchors_resolve(visits, html):
    ids = {path: set(data["ids"]) for path, data in visits["pages"].items()}
    problems, checked = [], 0
    for path, data in visits["pages"].items():
        base_url = data["base_url"]  # the server of the worker that took this part of the tour
        for href in sorted(set(data["links"])):
            if not href.startswith(base_url):
                continue  # another host (a launch button, a citation): not fetched, not checked here
            checked += 1
            parts = urlsplit(href)
            target = unquote(parts.path[len(urlsplit(base_url).path):]) or "index.html"
            if target.endswith("/"):
                target += "index.html"
            if not (html / target).is_file():
                problems.append(f"{path}: link to a missing file: {target}")
                continue
            anchor = unquote(parts.fragment)
            if anchor and target.endswith(".html"):
                if target not in ids:  # a page not visited (index.html): read its ids from the file
                    ids[target] = set(re.findall(r'\bid="([^"]+)"', (html / target).read_text(encoding="utf-8")))
                if anchor not in ids[target]:
                    problems.append(f"{path}: link to a missing anchor: {target}#{anchor}")
    assert checked > 0
    assert not problems, "\n".join(problems[:40])


def test_no_empty_widget_box_and_no_widget_javascript(visits, html):
    problems = []
    for path, data in visits["pages"].items():
        if data["widgetViews"]:
            problems.append(f"{path}: {data['widgetViews']} widget view(s), which cannot run without a kernel")
        if data["widgetScripts"]:
            problems.append(f"{path}: widget JavaScript: {data['widgetScripts']}")
        if data["emptyOutputs"]:
            problems.append(f"{path}: {data['emptyOutputs']} empty output box(es)")
    fetched = [url for _, url in visits["rec"]["fetched"] if re.search(r"require(\.min)?\.js|jupyter-widgets|embed-amd", url)]
    assert not fetched, f"widget JavaScript was loaded: {fetched}"
    assert not problems, "\n".join(problems)


def test_launch_and_download_buttons_on_every_chapter(visits):
    """The download button on every chapter; the Binder and Colab buttons only when the book
    names a repository (`make repository`), then opening its tag (what the
    built pages hold, placeholder or not, is checked in tests/classroom/test_repository.py)."""
    import yaml

    from attnbook import nbtools

    url, tag = nbtools.repository()[0], nbtools.setup_cell.launch_ref()
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    hub = (config.get("launch_buttons", {}).get("jupyterhub_url") or "").rstrip("/")
    for path, data in visits["pages"].items():
        if not path.startswith("chapters/"):
            continue
        links = data["links"]
        stem = Path(path).stem
        assert any(u.endswith(f"_sources/chapters/{stem}.ipynb") for u in links), f"{path}: no notebook download button"
        launch = [u for u in links if u.startswith(("https://mybinder.org/", "https://colab.research.google.com/"))]
        if url is None:
            assert not launch, f"{path}: launch buttons, but the book names no repository: {launch}"
            continue
        owner_repo = "/".join(url.split("/")[-2:])
        assert any(u.startswith(f"https://mybinder.org/v2/gh/{owner_repo}/{tag}") for u in links), f"{path}: no Binder button"
        assert any(u.startswith(f"https://colab.research.google.com/github/{owner_repo}/blob/{tag}/")
                   and u.endswith(f"{stem}.ipynb") for u in links), f"{path}: no Colab button"
        if hub:
            assert any(u.startswith(hub + "/hub/user-redirect/git-pull?") for u in links), f"{path}: no JupyterHub button"


@pytest.mark.parametrize("query,expected", SEARCHES, ids=[q for q, _ in SEARCHES])
def test_search_finds_the_chapter(site_tour, html, query, expected):
    if not (html / expected).exists():
        pytest.skip(f"{expected} is not in this build yet (the search for {query!r} needs it)")
    results = site_tour["searches"][query]
    # Sphinx ranks every page with the term in a section title alike, so ask for the first five.
    assert expected in results[:5], \
        f"search for {query!r}: {expected} is not among the first results {results[:8]}"
    where = "search.html?q=" + query.replace(" ", "+")
    http = site_tour["http"]
    assert not [u for w, u in http["blocked"] if w == where]
    assert not [u for w, u, _ in http["failed"] if w == where]


def test_every_figure_has_an_opaque_light_background(visits):
    """So that it reads the same in dark mode (the book style saves figures on opaque white)."""
    problems = []
    for path, data in visits["pages"].items():
        for fig in data["figures"]:
            # 255 is fully opaque; scaling to the 64x64 canvas may blend an edge pixel a little
            if fig["minAlpha"] < 250:
                problems.append(f"{path}: {fig['src']} has transparent pixels (min alpha {fig['minAlpha']})")
            if fig["cornerLuminance"] < 200:
                problems.append(f"{path}: {fig['src']} has no light background (corner luminance "
                                f"{fig['cornerLuminance']:.0f})")
    assert not problems, "\n".join(problems)
    assert visits["pages"][CHAPTER]["figures"], "no figures found on chapter 01"


def test_chapter_in_light_and_dark_mode(site_tour, visits):
    """Chapter 01 in both modes (screenshots in _build/screenshots/); in dark mode every figure
    keeps its opaque background. The tour visits the page once in each mode."""
    results = {"light": visits["pages"][CHAPTER]["backgrounds"],
               "dark": site_tour["dark"]["backgrounds"]}
    assert not site_tour["dark"]["blocked"] and not site_tour["dark"]["failed"]
    assert results["light"]["theme"] == "light" and results["light"]["bodyLuminance"] > 200
    dark = results["dark"]
    assert dark["theme"] == "dark" and dark["bodyLuminance"] < 80, \
        f"the page is not in dark mode: {dark}"
    assert dark["figures"], "no figures found on the chapter"
    for fig in dark["figures"]:
        # 255 is fully opaque; scaling to the 64x64 canvas may blend an edge pixel a little
        assert fig["minAlpha"] >= 250, \
            f"{fig['src']} has transparent pixels: unreadable on a dark page"
        assert fig["cornerLuminance"] > 200, \
            f"{fig['src']} has no light background in dark mode: {fig}"


def test_no_code_block_or_output_scrolls_sideways_at_1280px(visits):
    problems, blocks = [], 0
    for path, data in visits["pages"].items():
        blocks += data["sideways"]["count"]
        for b in data["sideways"]["sideways"]:
            problems.append(f"{path}: {b['kind']} #{b['index']} scrolls sideways ({b['scrollWidth']} px of "
                            f"content in {b['clientWidth']} px); its longest line has {b['longest']} "
                            f"characters: {b['line']}")
    assert blocks > 100, f"only {blocks} code blocks and outputs found on the site"
    assert not problems, (f"{len(problems)} block(s) scroll sideways at {DESKTOP['width']} px (lines must "
                          "fit in 79 characters):\n" + "\n".join(problems))


def fit_problems(fit: dict) -> list[str]:
    """What on one page does not fit its column (``site_tour.FIT`` at each width)."""
    problems = []
    for width, seen in fit.items():
        for item in seen["items"]:
            wide = item["width"] > seen["width"] + 1 or item["outside"] > 1
            if not (wide or item["scrolls"]):
                continue
            if item["kind"] == "equation" and item["cue"]:
                continue  # scrolls, and shows it (listed in the run's report)
            how = ("scrolls sideways without showing it" if item["scrolls"] and not item["cue"]
                   else "scrolls sideways" if item["scrolls"] else "sticks out of it")
            a = "an" if item["kind"][0] in "aeiou" else "a"
            problems.append(f"at {width} px: {a} {item['kind']} {item['width']} px wide in a "
                            f"{seen['width']} px column ({how}): {item['text']!r}")
    return problems


def test_tables_figures_and_equations_fit_their_column(visits, record_property):
    """No table, figure or equation is cut off or hides part of itself: at 1280 px and at
    390 px each table and figure fits the article's column (a table of prose is read row by
    row on a phone); a display equation fits too, or scrolls sideways with a shadow at its
    hidden edge (_static/attnbook.css). The equations that scroll are listed in the run's
    report: at 1280 px, one is worth splitting into lines."""
    problems, counted, scrolling = [], {}, []
    for path, data in visits["pages"].items():
        problems += [f"{path}: {p}" for p in fit_problems(data["fit"])]
        for item in data["fit"][str(DESKTOP["width"])]["items"]:
            counted[item["kind"]] = counted.get(item["kind"], 0) + 1
        for width, seen in data["fit"].items():
            scrolling += [f"  at {width:>4s} px, {path}: {item['width']} px in {seen['width']}: "
                          f"{item['text'][:50]}" for item in seen["items"]
                          if item["kind"] == "equation" and item["scrolls"]]
    record_property("report:display equations that scroll sideways (with a shadow)",
                    "\n".join(sorted(scrolling)) or "  none")
    assert counted.get("table", 0) > 40 and counted.get("figure", 0) > 30, counted
    import site_tour

    assert counted.get("equation", 0) > 20, counted
    assert counted.get("live figure") == len(site_tour.live_chapters()), counted
    assert not problems, f"{len(problems)} table(s), figure(s) or equation(s) do not fit:\n" + \
        "\n".join(problems[:40])


def test_chinese_pages_fit_their_column(zh_tour):
    """The Chinese glossary's table (Chinese columns, code kept whole) and chapters 08 and 09
    (their long inline formulas, which a phone wraps: _static/attnbook.css) fit their column
    at 1280 and 390 px, measured as the English pages are, with MathJax typeset."""
    import site_tour

    fits = zh_tour["zh_fit"]
    assert sorted(fits) == sorted(site_tour.ZH_FIT), sorted(fits)
    counted = {}
    for fit in fits.values():
        for item in fit[str(PHONE["width"])]["items"]:
            counted[item["kind"]] = counted.get(item["kind"], 0) + 1
    assert counted.get("table", 0) >= 2 and counted.get("formula", 0) > 100, counted
    problems = [f"zh/{path}: {p}" for path, fit in fits.items() for p in fit_problems(fit)]
    assert not problems, "\n".join(problems)


def test_chinese_labels_stay_chinese_once_the_scripts_ran(zh_tour):
    """The labels of the Chinese pages after their scripts ran: sphinx-togglebutton's script
    writes its buttons' aria-label in English; _static/lang-switch.js names them in Chinese
    (test_site.py checks the labels in the built HTML, before any script)."""
    from test_site import ENGLISH_ALLOWED

    labels = zh_tour["zh_labels"]
    assert labels and all(labels.values()), labels
    assert any("显示/隐藏内容" in v for v in labels["chapters/08_multihead.html"])
    english = sorted({f"{path}: {v}" for path, values in labels.items() for v in values
                      if re.search(r"[A-Za-z]{3}", v) and not re.search(r"[\u4e00-\u9fff]", v)
                      and v not in ENGLISH_ALLOWED})
    assert not english, english


def test_the_fit_check_catches_what_does_not_fit(tmp_path):
    """FIT and fit_problems on a page made for it: a table and an image wider than the
    column, an equation that scrolls with no shadow, are each caught, at both widths; what
    fits, and an equation that scrolls with its shadow, pass."""
    import site_tour

    if not Path(site_tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: run `apt-get install chromium`")
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is missing")
    wide = '<div style="width: 900px; height: 10px"></div>'
    scroller = ('<div class="math"><mjx-container display="true" style="display: block; '
                'overflow-x: auto;{}">{}</mjx-container></div>')
    cue = " background: linear-gradient(white, white) local;"
    (tmp_path / "page.html").write_text(
        '<!doctype html><title>t</title><article class="bd-article" style="width: 700px; '
        'padding: 0 10px">'
        f'<table id="ok"><tr><td>fits</td></tr></table><table><tr><td>{wide}</td></tr></table>'
        '<img alt="wide" src="data:image/svg+xml,<svg xmlns=%27http://www.w3.org/2000/svg%27 '
        'width=%27800%27 height=%275%27/>">' + scroller.format("", wide) + scroller.format(cue, wide) +
        '</article>', encoding="utf-8")
    with site_tour.chromium(tmp_path) as (browser, base):
        rec = site_tour.Recorder(browser, base, viewport=DESKTOP)
        try:
            rec.visit("page.html", collect=False)
            seen = rec.page.evaluate(site_tour.FIT)
        finally:
            rec.close()
    assert seen["width"] == 700 and len(seen["items"]) == 5, seen
    at = lambda width: fit_problems({str(width): seen})  # noqa: E731
    desktop, phone = at(DESKTOP["width"]), at(PHONE["width"])
    assert len(desktop) == 3 and len(phone) == 3, (desktop, phone)
    assert "a table 9" in desktop[0] and "sticks out" in desktop[0]
    assert "a figure 800 px wide in a 700 px column" in desktop[1]
    assert "scrolls sideways without showing it" in desktop[2]
    assert ("a table 9" in phone[0] and "a figure 800" in phone[1]
            and "an equation 900 px" in phone[2] and "without showing it" in phone[2]), phone


@pytest.fixture(scope="module")
def weights(site_tour, tour_part, html):
    import site_tour as tour

    zh = tour_part(PARTS[4])
    return tour.first_visit_weights(html, site_tour["http"]["fetched"], zh["zh_record"]["fetched"],
                                    zh["base_url"])


def test_first_visit_weight(weights, html, record_property):
    """Every page of both editions moves at most WEIGHT_BUDGET (0.9 MB) on a first visit,
    counting every file it loads (its HTML, style sheets, scripts, fonts, MathJax, images)
    compressed as a static server sends it (gzip, level 6). The tour's records give an upper
    bound for each page; a page over budget by them is opened again in a new context, with
    an empty cache (site_tour.cold_visit), and that count decides. The table (in the run's
    report) gives each page's weight and its largest files; a page over budget is named with
    them."""
    from site_tour import WEIGHT_BUDGET, cold_visit

    kb = lambda n: f"{n / 1000:,.0f} kB"  # noqa: E731
    zh = [p for p in weights if p.startswith("zh/")]
    assert len(zh) >= 30 and len(weights) - len(zh) >= 30, sorted(weights)
    measured = {}
    for page, files in weights.items():
        cold = sum(files.values()) > WEIGHT_BUDGET
        measured[page] = (cold_visit(html, page) if cold else files), cold
    lines, over = [f"{'page':44s} {'files':>5s} {'gzip':>8s}  largest files"], []
    for page, (files, cold) in sorted(measured.items(), key=lambda kv: -sum(kv[1][0].values())):
        total = sum(files.values())
        top = sorted(files.items(), key=lambda kv: -kv[1])[:3]
        largest = ", ".join(f"{Path(f).name[:24]} {kb(n)}" for f, n in top)
        how = " (new context)" if cold else ""
        lines.append(f"{page + how:44s} {len(files):5d} {kb(total):>8s}  {largest}")
        if total > WEIGHT_BUDGET:
            over.append(f"{page}: {kb(total)} in {len(files)} files; largest: {largest}")
    lines.append(f"budget per page: {kb(WEIGHT_BUDGET)} gzip on a first visit")
    record_property("report:first-visit weight (gzip level 6, every file a page loads)", "\n".join(lines))
    # the icons come from the theme's web font, cut to the site's icons; no fontawesome.js
    loaded = {f for files in weights.values() for f in files}
    assert not [f for f in loaded if f.endswith("fontawesome.js")], "fontawesome.js is loaded"
    assert not over, f"pages over {kb(WEIGHT_BUDGET)} gzip on a first visit:\n" + "\n".join(over)


@pytest.mark.parametrize("page", ["intro.html", "chapters/01_three_tokens.html",
                                  "chapters/06_masking.html"])
def test_english_pages_fetch_small_slices_of_the_chinese_font(page, html):
    """An English page shows a few Chinese characters (its 中文 link; in a few chapters a
    source's Chinese title): on a first visit it fetches the font's first two slices at most
    (about 6 KB), not the Chinese pages' slices."""
    from site_tour import cold_visit

    files = cold_visit(html, page)
    fonts = {f for f in files if f.startswith("_static/fonts/")}
    small = {"_static/fonts/noto-sans-sc.css", "_static/fonts/noto-sans-sc-00.woff2",
             "_static/fonts/noto-sans-sc-01.woff2"}
    assert "_static/fonts/noto-sans-sc-00.woff2" in fonts and fonts <= small, sorted(fonts)
    assert sum(files[f] for f in fonts) < 10_000, {f: files[f] for f in fonts}


def test_the_tour_blocks_and_records_a_request_to_another_host(tmp_path):
    """The tour's guard works: a page asking another host for an image, a script and a
    fetch gets nothing, and each request is recorded as blocked; a missing local file is
    recorded as failed (the other tests rely on these records being complete)."""
    import site_tour

    if not Path(site_tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: run `apt-get install chromium`")
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is missing")
    (tmp_path / "page.html").write_text(
        '<!doctype html><title>t</title><img src="http://example.org/a.png" alt="a">'
        '<img src="missing.png" alt="a file the site does not have">'
        '<script src="https://cdn.example.net/b.js"></script>'
        '<script>window.got = fetch("http://93.184.216.34/c").then(() => "reached",'
        ' () => "failed");</script>', encoding="utf-8")
    with site_tour.chromium(tmp_path) as (browser, base):
        rec = site_tour.Recorder(browser, base)
        rec.visit("page.html", collect=False)
        assert rec.page.evaluate("window.got") == "failed"
        rec.note_resources()
        rec.close()
    blocked = sorted(url for _, url in rec.blocked)
    assert blocked == ["http://93.184.216.34/c", "http://example.org/a.png",
                       "https://cdn.example.net/b.js"], rec.blocked
    assert base + "page.html" in [url for _, url in rec.fetched], rec.fetched
    assert ["page.html", base + "missing.png", "HTTP 404"] in rec.failed, rec.failed



# --- the Chinese edition ---------------------------------------------------------------

@pytest.fixture(scope="module")
def zh_tour(tour_part):
    return tour_part(PARTS[4])


def test_every_chinese_page_is_chinese(zh_tour):
    bad = []
    for path, data in zh_tour["zh"].items():
        if data["lang"] != "zh-CN" or not data["title"] or not data["h1"].strip():
            bad.append(f"{path}: lang {data['lang']!r}, title {data['title']!r}")
        if not re.search(r"[\u4e00-\u9fff]", data["h1"] + data["title"]):
            bad.append(f"{path}: the title is not Chinese: {data['h1']!r}")
    assert not bad, "\n".join(bad)


def test_chinese_pages_load_nothing_from_another_host(zh_tour):
    record = zh_tour["zh_record"]
    # "csp": a page's script not run because the visit had scripts off, on purpose
    failed = [f for f in record["failed"] if f[2] != "csp"]
    assert not record["blocked"] and not failed, (record["blocked"][:5], failed[:5])
    errors = [m for m in record["console"] if m[1] in ("error", "pageerror") and not _allowed(m[2])]
    assert not errors, errors[:5]


def test_chinese_text_is_drawn_in_the_served_font(zh_tour):
    """Every Chinese character of every Chinese page is drawn by the site's own web font
    (a custom font, not a system font, and never boxes): the probe holds them all."""
    bad = []
    for path, data in zh_tour["zh"].items():
        if data["probe_chars"] < 20:
            bad.append(f"{path}: only {data['probe_chars']} Chinese characters")
        system = [f for f in data["fonts"] if not f[1]]
        custom = [f for f in data["fonts"] if f[1]]
        if system or not custom:
            bad.append(f"{path}: drawn with {data['fonts']}")
    assert not bad, "\n".join(bad)


def test_chinese_in_live_figures_is_drawn_in_the_served_font(zh_tour):
    """The live figures' Chinese (caption, labels, buttons, the SVG's text) is drawn by the
    site's own web font, not a system font: a copy of each kind of element holding all the
    figure's Chinese characters is drawn by custom fonts only."""
    bad, seen = [], 0
    for path, data in zh_tour["zh"].items():
        if not data["live"]:
            continue
        probe = data["live_fonts"]
        seen += 1
        if probe["chars"] < 5 or not probe["fonts"]:
            bad.append(f"{path}: {probe['chars']} Chinese characters, probes {probe['fonts']}")
        for selector, fonts in probe["fonts"].items():
            if [f for f in fonts if not f[1]] or not fonts:
                bad.append(f"{path} {selector}: drawn with {fonts}")
    assert seen >= 8 and not bad, "\n".join(bad)


def test_language_switch_both_ways_on_every_page(zh_tour, html):
    for how in ("switch_http", "switch_file"):
        trips = zh_tour[how]
        assert sorted(trips) == switch_pages(html), how
        wrong = {p: t for p, t in trips.items() if t != ["zh/" + p, p]}
        assert not wrong, f"{how}: page -> [after one click, after two]:\n" + "\n".join(
            f"  {p}: {t}" for p, t in list(wrong.items())[:20])


def test_language_switch_keeps_the_section(zh_tour):
    sec = zh_tour["zh_section"]
    assert zh_tour["zh_section_docked"], "the switch is not in the header bar"
    assert sec["url"] == "zh/chapters/03_softmax.html#" + sec["zh_sections"][3], sec


@pytest.mark.parametrize("query, expected", ZH_SEARCHES)
def test_chinese_search_finds_the_page(zh_tour, query, expected):
    results = zh_tour["zh_searches"][query]
    assert expected in results, f"searching {query} lists {results[:10]}"


def test_live_figures_speak_chinese_on_chinese_pages(zh_tour):
    figures = {p: d["live"] for p, d in zh_tour["zh"].items() if d["live"]}
    assert len(figures) >= 8, sorted(figures)
    english = [(p, t[:80]) for p, texts in figures.items() for t in texts
               if not re.search(r"[\u4e00-\u9fff]", t)]
    assert not english, english
    assert any("因果掩码" in t for t in figures["chapters/06_masking.html"])
