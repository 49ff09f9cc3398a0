"""Live figures (attnbook/live): the JavaScript agrees with the answer key, the copy
stored in each notebook is the package's current file, and on the built site each
figure responds to its control offline, over http and over file://.

- freshness: the ES module and style stored in each notebook's widget state are
  ``attnbook.live``'s current files (a stale copy fails, with the fix: `make outputs`);
- tidy: `make outputs` keeps exactly the live figures' state, numbered in order, so
  re-executing gives the same file (one chapter is re-executed here to show it);
- parity: on the built page, each figure's JavaScript is driven over its control's
  whole range (every slider value; for the mask, every mask of every row) and every
  number it shows (``data-live-number``) must equal the answer key's, formatted by
  Python (:meth:`attnbook.live.LiveFigure.numbers`);
- the site: the slider is dragged with the mouse (the mask clicked), with every
  request to another host blocked, over http and file://; zero external requests,
  zero console errors (beyond the theme's known noise), page weight within budget;
  screenshots of each figure at 1280 and 390 px go to _build/screenshots/.

The browser tests use Debian's chromium (never `playwright install`) and skip
without it.
"""

from __future__ import annotations

import copy
import functools
import http.server
import json
import os
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest

pytest.importorskip("anywidget", reason="anywidget is missing: pip install -r requirements.txt")

from attnbook import live, nbtools  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# chapter -> the live figure it shows
CHAPTERS = {"01_three_tokens": live.InputScale, "02_soft_lookup": live.QueryLookup,
            "04_scaling": live.TemperatureBars, "06_masking": live.MaskEditor,
            "15_grouped_query": live.KVCacheSizes,
            "17_flash_attention": live.FlashBlocks}
PAGE_BUDGET = 1_500_000  # bytes: a chapter page's HTML, images and the loader
SCREENSHOTS = Path(os.environ.get("ATTNBOOK_SCREENSHOTS", ROOT / "_build" / "screenshots"))
CONSOLE_ALLOW = [  # the theme's known noise (see tests/test_browser.py)
    r"Identifier 'THEBE_JS_URL' has already been declared",
    r"Got invalid theme mode",
    r"404.*favicon\.ico",  # the theme asks for a favicon the book does not have
]


def notebook(stem):
    return json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))


def live_states(nb):
    state = nb["metadata"].get("widgets", {}).get(live.WIDGET_STATE, {}).get("state", {})
    return {mid: m["state"] for mid, m in state.items() if live.is_live_figure(m)}


def the_figure(stem):
    """The live figure stored in a chapter, rebuilt in Python from its state."""
    states = list(live_states(notebook(stem)).values())
    assert len(states) == 1, f"{stem}: expected one live figure, found {len(states)}"
    return CHAPTERS[stem].from_state(states[0])


def stale(nb) -> list[str]:
    """What in a notebook's stored live figures differs from the package's files."""
    classes = {f"attnbook.live.{cls.__name__}": cls for cls in live.FIGURES}
    problems = []
    for mid, st in live_states(nb).items():
        cls = classes.get(st.get("_anywidget_id"))
        if cls is None:
            problems.append(f"{mid}: unknown figure {st.get('_anywidget_id')!r}")
        elif st.get("_esm") != live.esm_source(cls.js_file):
            problems.append(f"{cls.__name__}: stored JavaScript is not core.js + {cls.js_file}")
        elif st.get("_css") != live.css_source():
            problems.append(f"{cls.__name__}: stored style is not live.css")
    return problems


# --- the notebooks: freshness and tidy, no browser ---

@pytest.mark.parametrize("stem", CHAPTERS)
def test_stored_javascript_is_the_package_file(stem):
    nb = notebook(stem)
    states = live_states(nb)
    assert [s["_anywidget_id"] for s in states.values()] == \
        [f"attnbook.live.{CHAPTERS[stem].__name__}"], f"{stem}: its live figure is not stored"
    assert not stale(nb), f"{stem}: {stale(nb)}; run `make outputs NOTEBOOKS=chapters/{stem}.ipynb`"
    cells = [c for c in nb["cells"] if any(live.WIDGET_VIEW in o.get("data", {})
                                           for o in c.get("outputs", []))]
    assert len(cells) == 1
    assert {"live-figure", "nbval-ignore-output"} <= set(cells[0]["metadata"]["tags"])


def test_a_stale_copy_is_caught():
    nb = notebook("04_scaling")
    assert not stale(nb)
    for key, edit in [("_esm", lambda s: s.replace("Math.exp", "Math.expm1")),
                      ("_css", lambda s: s + "\n")]:
        doctored = copy.deepcopy(nb)
        for st in live_states(doctored).values():
            st[key] = edit(st[key])
        assert stale(doctored), f"a changed {key} went unnoticed"


def _fake_executed(ids):
    """A notebook as nbconvert stores it: a live figure, its layout, and an interact
    slider (which needs a kernel), under the given model ids."""
    fig, layout, slider = ids
    live_state = {"_anywidget_id": "attnbook.live.TemperatureBars", "_css": live.css_source(),
                  "_esm": "export default {}", "layout": f"IPY_MODEL_{layout}", "value": 1.0}
    return {"metadata": {"widgets": {live.WIDGET_STATE: {"version_major": 2, "version_minor": 0,
        "state": {
            slider: {"model_module": "@jupyter-widgets/controls", "model_name": "FloatSliderModel",
                     "state": {"value": 0.5}},
            layout: {"model_module": "@jupyter-widgets/base", "model_name": "LayoutModel",
                     "state": {"width": None}},
            fig: {"model_module": "anywidget", "model_name": "AnyModel", "state": live_state}}}}},
        "cells": [
            {"cell_type": "code", "outputs": [{"output_type": "display_data", "data": {
                live.WIDGET_VIEW: {"model_id": slider}, "text/plain": "slider"}}]},
            {"cell_type": "code", "outputs": [
                {"output_type": "display_data", "data": {"text/html": "<noscript>x</noscript>"}},
                {"output_type": "display_data", "data": {
                    live.WIDGET_VIEW: {"model_id": fig}, "text/plain": "fig"}}]}]}


def test_tidy_keeps_only_the_live_figures_and_numbers_them():
    a, b = _fake_executed(["f1", "l1", "s1"]), _fake_executed(["f2", "l2", "s2"])
    assert live.tidy_widget_state(a, "ch") and live.tidy_widget_state(b, "ch")
    assert a == b, "the result must not depend on the random ids of the run"
    state = a["metadata"]["widgets"][live.WIDGET_STATE]["state"]
    assert [m["model_name"] for m in state.values()] == ["AnyModel", "LayoutModel"]
    fig_id, layout_id = state
    assert state[fig_id]["state"]["layout"] == f"IPY_MODEL_{layout_id}"
    assert a["cells"][0]["outputs"] == [], "the interact slider's output is removed"
    assert a["cells"][1]["outputs"][1]["data"][live.WIDGET_VIEW]["model_id"] == fig_id
    assert not live.tidy_widget_state(a, "ch"), "a second tidy changes nothing"
    other = _fake_executed(["f1", "l1", "s1"])
    live.tidy_widget_state(other, "another chapter")
    assert set(other["metadata"]["widgets"][live.WIDGET_STATE]["state"]).isdisjoint(state)


def test_tidy_drops_the_state_when_no_live_figure_is_shown():
    nb = _fake_executed(["f", "l", "s"])
    nb["cells"] = nb["cells"][:1]
    assert live.tidy_widget_state(nb, "x")
    assert "widgets" not in nb["metadata"] and nb["cells"][0]["outputs"] == []


def test_reexecuting_a_chapter_gives_the_same_widget_state(tmp_path):
    """Executes chapter 04 as `make outputs` does and compares what tidy keeps."""
    nbclient = pytest.importorskip("nbclient", reason="nbclient comes with nbconvert")
    import nbformat

    path = tmp_path / "04_scaling.ipynb"
    shutil.copy(ROOT / "chapters" / "04_scaling.ipynb", path)
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, record_timing=False,
                            resources={"metadata": {"path": str(ROOT / "chapters")}}).execute()
    nbformat.write(nb, path)
    nbtools.tidy(path)
    again, committed = json.loads(path.read_text()), notebook("04_scaling")
    assert again["metadata"]["widgets"] == committed["metadata"]["widgets"]
    views = lambda n: [o for c in n["cells"] for o in c.get("outputs", [])  # noqa: E731
                       if live.WIDGET_VIEW in o.get("data", {})]
    assert views(again) == views(committed)


# --- the Python side of each figure ---

def test_control_values_cover_the_range_as_the_browser_gives_them():
    fig = live.InputScale(np.eye(2), np.eye(2), np.eye(2), ["a", "b"], s=0.1)
    values = fig.control_values()
    assert values[0] == 0.02 and values[-1] == 1.0 and len(values) == 50
    assert 0.06 in values and 0.1 in values  # 0.02 + 2 * 0.02 != 0.06 in floating point


def test_bad_input_is_refused_with_a_clear_message():
    with pytest.raises(ValueError, match="min <= value <= max"):
        live.TemperatureBars([1.0, 2.0], t=40.0)
    with pytest.raises(ValueError, match=r"q \(3, 2\), k \(2, 2\)"):
        live.MaskEditor(np.ones((3, 2)), np.ones((2, 2)), ["a", "b", "c"])


def test_a_fully_masked_row_shows_zeros_like_the_answer_key():
    fig = live.MaskEditor(np.eye(3), np.eye(3), ["a", "b", "c"])
    mask = np.tril(np.ones((3, 3), dtype=bool))
    mask[1] = False
    w = fig.weights(mask)
    assert not w[1].any() and np.allclose(w[[0, 2]].sum(axis=-1), 1.0)
    e = np.exp(np.array([0.0, 0.0, 1.0]) / np.sqrt(3))  # row 2: q_2 . k_j / sqrt(3)
    row2 = [f"{x:.2f}" for x in e / e.sum()]
    # row 0 (one weight and its sum), nothing for row 1, row 2 and its sum
    assert fig.numbers(mask) == ["1.00", "1.00", *row2, "1.00"]


def test_kv_cache_sizes_follow_the_formula_and_the_window():
    from attnbook.check_llm import _kv_bytes

    models = {"A": dict(layers=2, q_heads=4, kv_heads=2, head_dim=8),
              "B": dict(layers=3, q_heads=6, kv_heads=1, head_dim=4, window=2048)}
    fig = live.KVCacheSizes(models, k_tokens=1, k_max=4)
    assert fig.control_values() == [1.0, 2.0, 3.0, 4.0]
    for k in fig.control_values():
        n = 1024 * int(k)
        gib = [_kv_bytes(2, 2, 8, n), _kv_bytes(2, 4, 8, n), _kv_bytes(3, 1, 4, n),
               _kv_bytes(3, 6, 4, n), _kv_bytes(3, 1, 4, min(n, 2048))]
        assert fig.numbers(k) == [f"{b / 2 ** 30:.2f}" for b in gib] + [f"{n:,}"]
    assert [b for _, bars in fig.gib(4) for b in bars][-1] == 2 * 3 * 4 * 2 * 2048 / 2 ** 30
    with pytest.raises(ValueError, match="q_heads a multiple of kv_heads"):
        live.KVCacheSizes({"C": dict(layers=2, q_heads=4, kv_heads=3, head_dim=8)})
    with pytest.raises(ValueError, match="C: need positive whole"):
        live.KVCacheSizes({"C": dict(layers=2, q_heads=4, kv_heads=2)})


# --- the browser ---

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _browser_or_skip():
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed: run `apt-get install chromium` (Debian/Ubuntu), "
                    "or set CHROMIUM=/path/to/chromium")
    return pytest.importorskip("playwright.sync_api", reason="Playwright for Python is missing: "
                               "`pip install -r requirements.txt` (never `playwright install`)")


@pytest.fixture(scope="module")
def site(built_site):
    assert built_site["returncode"] == 0, built_site["log"][-3000:]
    return built_site["html"]


@pytest.fixture(scope="module")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    sync_api = _browser_or_skip()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()


class Visit:
    """A page opened with every request to another host blocked and counted."""

    def __init__(self, browser, url, width=1280, height=900):
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.external, self.errors = [], []
        local = urlsplit(url).netloc

        def route(r):
            u = urlsplit(r.request.url)
            if u.scheme in ("file", "blob", "data") or u.netloc == local:
                r.continue_()
            else:
                self.external.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.on("console", lambda m: self.errors.append(
            f"{m.text} ({m.location.get('url', '')})") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url}")
                     if "favicon" not in r.url and r.url not in self.external else None)
        self.page.goto(url)
        self.page.wait_for_function("window.attnbookLiveReady !== undefined", timeout=15000)
        self.page.evaluate("window.attnbookLiveReady")
        self.host = self.page.locator(".attnbook-live-host")
        assert self.host.count() == 1, "the live figure did not render"

    def numbers(self):
        return self.host.locator("[data-live-number]").all_text_contents()

    def problems(self):
        errors = [e for e in self.errors if not any(re.search(p, e) for p in CONSOLE_ALLOW)]
        return self.external, errors

    def close(self):
        self.context.close()


SWEEP = """
(values) => {
  const host = document.querySelector(".attnbook-live-host");
  const input = host.querySelector("input[type=range]");
  return values.map((v) => {
    input.value = String(v);
    input.dispatchEvent(new Event("input", { bubbles: true }));
    return [Number(input.value),
            [...host.querySelectorAll("[data-live-number]")].map((e) => e.textContent)];
  });
}
"""

# Every mask of every row (the rows are independent), in Gray-code order, one click per
# step, the other rows causal; returns [mask, numbers] after each click.
MASK_SWEEP = """
() => {
  const host = document.querySelector(".attnbook-live-host");
  const causal = [...host.querySelectorAll("button")].find((b) => b.textContent === "causal mask");
  const n = host.querySelectorAll("rect[data-row='0']").length;
  const seen = [];
  const click = (i, j) => host.querySelector(`rect[data-row='${i}'][data-col='${j}']`)
      .dispatchEvent(new MouseEvent("click", { bubbles: true }));
  for (let i = 0; i < n; i++) {
    causal.click();
    const mask = [...Array(n)].map((_, a) => [...Array(n)].map((_, b) => b <= a));
    for (let k = 0; k < (1 << n); k++) {
      const g = k ^ (k >> 1);
      for (let j = 0; j < n; j++) {
        const want = Boolean((g >> j) & 1);
        if (mask[i][j] !== want) { click(i, j); mask[i][j] = want; }
      }
      seen.push([mask.map((r) => r.slice()),
                 [...host.querySelectorAll("[data-live-number]")].map((e) => e.textContent)]);
    }
  }
  return seen;
}
"""


@pytest.mark.parametrize("stem", CHAPTERS)
def test_parity_with_the_answer_key_over_the_whole_range(stem, browser, server):
    fig = the_figure(stem)
    visit = Visit(browser, f"{server}/chapters/{stem}.html")
    try:
        assert visit.numbers() == fig.numbers(), "the figure as the page opens"
        if isinstance(fig, live.SliderFigure):
            values = fig.control_values()
            seen = visit.page.evaluate(SWEEP, values)
            assert [v for v, _ in seen] == values, "the slider did not take every value"
        else:
            seen = visit.page.evaluate(MASK_SWEEP)
            assert len(seen) == len(fig.tokens) * 2 ** len(fig.tokens)
        wrong = [(v, shown, fig.numbers(v)) for v, shown in seen if shown != fig.numbers(v)]
        assert not wrong, f"{len(wrong)} of {len(seen)} settings differ, e.g. {wrong[:2]}"
        assert visit.problems() == ([], [])
    finally:
        visit.close()


FORMAT_CASES = [0.125, 0.375, 2.5, 0.5, 1.5, 0.005, 0.015, 1.005, 0.0, -0.0, -0.001,
                1e-7, 0.9999, 0.99951, 123.456, 2.675, 1 / 3, 2 / 3, 168.0004, 174.99955]


def test_python_formatting_in_javascript(browser, server):
    """core.js's pyFixed formats like Python, ties included (toFixed does not)."""
    cases = FORMAT_CASES + list(np.random.default_rng(0).uniform(0, 1, 300))
    cases += [k / 2 ** 10 for k in range(0, 1025, 7)]  # many exact binary ties
    visit = Visit(browser, f"{server}/chapters/04_scaling.html")
    try:
        esm = live.esm_source(live.TemperatureBars.js_file)
        got = visit.page.evaluate(
            """async ([esm, cases]) => {
                 const src = esm + "\\nexport { pyFixed };";
                 const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
                 const { pyFixed } = await import(url);
                 return cases.map((x) => [0, 1, 2, 3].map((d) => pyFixed(x, d)));
               }""", [esm, [float(x) for x in cases]])
        want = [[f"{x:.{d}f}" for d in range(4)] for x in cases]
        assert got[:len(FORMAT_CASES)] == want[:len(FORMAT_CASES)]
        assert got == want
    finally:
        visit.close()


def _drag(page, slider, fraction):
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    value = float(slider.input_value())
    lo, hi = float(slider.get_attribute("min")), float(slider.get_attribute("max"))
    x0 = box["x"] + 8 + (box["width"] - 16) * (value - lo) / (hi - lo)  # the thumb
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * fraction, y, steps=8)
    page.mouse.up()
    return float(slider.input_value())


@pytest.mark.parametrize("scheme", ["http", "file"])
@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_figure_responds_on_the_site_offline(stem, scheme, browser, server, site):
    fig = the_figure(stem)
    base = server if scheme == "http" else (site.resolve().as_uri())
    visit = Visit(browser, f"{base}/chapters/{stem}.html")
    page = visit.page
    try:
        assert visit.numbers() == fig.numbers()
        if isinstance(fig, live.SliderFigure):
            slider = visit.host.locator("input[type=range]")
            for fraction in (0.8, 0.3):
                start = float(slider.input_value())
                value = _drag(page, slider, fraction)
                assert value != start, f"dragging to {fraction:.0%} did not move the slider"
                assert value in fig.control_values()
                assert visit.numbers() == fig.numbers(value), f"at {value}"
                readout = visit.host.locator("output").text_content()
                digits = getattr(fig, "readout_digits", 2)  # 0: a count
                assert readout == f"{value:.{digits}f}"
            slider.focus()
            page.keyboard.press("Home")
            assert visit.numbers() == fig.numbers(fig.min)
            page.keyboard.press("ArrowRight")
            assert visit.numbers() == fig.numbers(fig.control_values()[1])
        else:
            mask = np.array(fig.mask, dtype=bool)
            for i, j in [(3, 1), (0, 0), (3, 1)]:  # hide, empty row 0, show again
                visit.host.locator(f"rect[data-row='{i}'][data-col='{j}']").click()
                mask[i, j] = not mask[i, j]
                assert visit.numbers() == fig.numbers(mask), f"after clicking ({i}, {j})"
            cell = visit.host.locator("rect[data-row='2'][data-col='0']")
            cell.focus()
            page.keyboard.press("Enter")  # the keyboard toggles a cell too
            mask[2, 0] = False
            assert visit.numbers() == fig.numbers(mask)
            page.keyboard.press(" ")
            mask[2, 0] = True
            assert visit.numbers() == fig.numbers(mask)
            caption = visit.host.locator(".attnbook-live-caption").text_content()
            assert 'hidden from "People"' in caption and 'fully_masked="zeros"' in caption
            assert "no key: all 0" in visit.host.locator("svg").text_content()
            visit.host.get_by_role("button", name="causal mask").click()
            assert visit.numbers() == fig.numbers(fig.causal)
        external, errors = visit.problems()
        assert not external, f"requests to other hosts: {external}"
        assert not errors, f"console errors: {errors}"
    finally:
        visit.close()


@pytest.mark.parametrize("width,height", [(1280, 900), (390, 844)])
def test_screenshots_and_fit(width, height, browser, server):
    """Saves each figure at both widths (look at them) and checks it fits the column."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for stem in CHAPTERS:
        visit = Visit(browser, f"{server}/chapters/{stem}.html", width, height)
        try:
            figure = visit.page.locator(".attnbook-live")
            figure.scroll_into_view_if_needed()
            box = figure.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width, f"{stem} overflows at {width}"
            figure.screenshot(path=str(SCREENSHOTS / f"live-{stem}-{width}.png"))
        finally:
            visit.close()


def test_pages_load_no_widget_manager_and_stay_within_budget(site):
    rows = []
    loader = (site / "_static" / "live-figures.js").stat().st_size
    for stem in CHAPTERS:
        page = site / "chapters" / f"{stem}.html"
        text = page.read_text(encoding="utf-8")
        assert "application/vnd.jupyter.widget-state+json" in text
        for banned in ("require.js", "require.min.js", "embed-amd", "html-manager", "cdn."):
            assert banned not in text, f"{stem}: {banned} on the page"
        images = sum((page.parent / src).stat().st_size
                     for src in set(re.findall(r'<img[^>]+src="([^"]+)"', text)))
        total = page.stat().st_size + images + loader
        rows.append((stem, total))
        assert total <= PAGE_BUDGET, f"{stem}: {total} bytes > {PAGE_BUDGET}"
    assert loader < 8_000, f"the loader grew to {loader} bytes"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_without_javascript_a_note_stands_in_for_the_figure(stem, browser, server):
    note = "This live figure needs JavaScript"
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{server}/chapters/{stem}.html")
        assert page.locator("noscript[data-attnbook-live] em", has_text=note).is_visible()
    finally:
        context.close()
    visit = Visit(browser, f"{server}/chapters/{stem}.html")
    try:  # with JavaScript, the note's output box is hidden, not left empty
        assert visit.page.locator("noscript[data-attnbook-live]").count() == 1
        assert not visit.page.locator(".output:has(> noscript[data-attnbook-live])").is_visible()
    finally:
        visit.close()
