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
- keyboard and projector: Tab alone reaches every control of each figure, each showing
  its focus; the arrow keys (Home, End) move a slider, Enter and Space toggle a mask
  cell, and the numbers follow; at browser zoom 200 % (a 640 x 450 window) the figure
  fits and its smallest text is at least 10 px (20 px on the screen);
- the site: the slider is dragged with the mouse (the mask clicked), with every
  request to another host blocked, over http and file://; zero external requests,
  zero console errors (beyond the theme's known noise), page weight within budget;
  screenshots of each figure at 1280 and 390 px go to _build/screenshots/.

The browser tests check what chromium saw on its one tour of the built site
(tests/site_tour.py, shared with test_browser.py): each chapter page is loaded once
and everything above is done on it. They use Debian's chromium (never `playwright
install`) and skip without it.
"""

from __future__ import annotations

import copy
import json
import re
import shutil

import numpy as np
import pytest

pytest.importorskip("anywidget", reason="anywidget is missing: pip install -r requirements.txt")

from attnbook import live, nbtools  # noqa: E402
from site_tour import (  # noqa: E402
    FORMAT_CASES, ROOT, SCREENSHOTS, live_chapters, live_states, notebook, the_figure)

# chapter -> the live figure it shows
CHAPTERS = live_chapters()
PAGE_BUDGET = 1_500_000  # bytes: a chapter page's HTML, images and the loader
CONSOLE_ALLOW = [  # the theme's known noise (see tests/site/test_browser.py)
    r"Identifier 'THEBE_JS_URL' has already been declared",
    r"Got invalid theme mode",
]


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
    """Executes a chapter as `make outputs` does and compares what tidy keeps.

    Chapter 02 (a live figure, quick to execute); tidy's handling of the other widgets
    (an interact slider) is checked above on a notebook made for it."""
    nbclient = pytest.importorskip("nbclient", reason="nbclient comes with nbconvert")
    import nbformat

    path = tmp_path / "02_soft_lookup.ipynb"
    shutil.copy(ROOT / "chapters" / "02_soft_lookup.ipynb", path)
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, record_timing=False,
                            kernel_manager_class=nbtools.ipc_kernel_manager(),
                            resources={"metadata": {"path": str(ROOT / "chapters")}}).execute()
    nbformat.write(nb, path)
    nbtools.tidy(path)
    again, committed = json.loads(path.read_text()), notebook("02_soft_lookup")
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
    with pytest.raises(ValueError, match="names_zh has 1 names for 2 keys"):
        live.QueryLookup(np.eye(2), [1.0, 2.0], ["a", "b"], [1, 0], [0, 1], names_zh=["甲"])
    fig = live.QueryLookup(np.eye(2), [1.0, 2.0], ["a", "b"], [1, 0], [0, 1],
                           names_zh=["甲", "乙"], labels_zh=("甲", "乙"))
    assert fig.names == ["a", "b"] and fig.names_zh == ["甲", "乙"] and fig.to_label_zh == "乙"


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
    from attnbook.check.kv_cache import _kv_bytes

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


# --- the browser: what the tour of the site saw (tests/site_tour.py) ---

def _page(site_tour, stem):
    data = site_tour["pages"].get(f"chapters/{stem}.html")
    assert data is not None, f"the tour did not visit chapters/{stem}.html"
    assert data["live"]["hosts"] == 1, "the live figure did not render"
    return data["live"]


def _problems(record, stem):
    """Requests to other hosts and console errors seen on a chapter's page."""
    where = f"chapters/{stem}.html"
    external = [url for w, url in record["blocked"] if w == where]
    errors = [f"{text}" for w, kind, text in record["console"]
              if w == where and kind in ("error", "pageerror")
              and not any(re.search(p, text) for p in CONSOLE_ALLOW)]
    errors += [f"failed: {url} ({why})" for w, url, why in record["failed"]
               if w == where and "favicon" not in url]
    return external, errors


@pytest.fixture(scope="module")
def site(built_site):
    assert built_site["returncode"] == 0, built_site["log"][-3000:]
    return built_site["html"]


@pytest.mark.parametrize("stem", CHAPTERS)
def test_parity_with_the_answer_key_over_the_whole_range(stem, site_tour):
    """On the page over http, every slider value (every mask of every row) shows the numbers
    the answer key gives, formatted by Python."""
    fig, shown = the_figure(stem), _page(site_tour, stem)
    assert shown["initial"] == fig.numbers(), "the figure as the page opens"
    seen = shown["sweep"]
    if isinstance(fig, live.SliderFigure):
        assert [v for v, _ in seen] == fig.control_values(), "the slider did not take every value"
        wrong = [(v, got, fig.numbers(v)) for v, got in seen if got != fig.numbers(v)]
    else:
        assert len(seen) == len(fig.tokens) * 2 ** len(fig.tokens)
        wrong = [(m, got, fig.numbers(np.array(m, dtype=bool))) for m, got in seen
                 if got != fig.numbers(np.array(m, dtype=bool))]
    assert not wrong, f"{len(wrong)} of {len(seen)} settings differ, e.g. {wrong[:2]}"
    assert _problems(site_tour["http"], stem) == ([], [])


def test_python_formatting_in_javascript(site_tour):
    """core.js's pyFixed formats like Python, ties included (toFixed does not)."""
    run = _page(site_tour, "04_scaling")["pyfixed"]
    cases, got = run["cases"], run["got"]
    assert len(cases) > 400 and cases[:len(FORMAT_CASES)] == FORMAT_CASES
    want = [[f"{x:.{d}f}" for d in range(4)] for x in cases]
    assert got[:len(FORMAT_CASES)] == want[:len(FORMAT_CASES)]
    assert got == want


def _check_steps(fig, steps, full=True):
    """The numbers after each step of the tour's interaction equal the answer key's."""
    if isinstance(fig, live.SliderFigure):
        drags = [s for s in steps if s[0] == "drag"]
        assert len(drags) == (2 if full else 1)
        for _, value, numbers, extra in drags:
            assert value != extra["start"], \
                f"dragging to {extra['fraction']:.0%} did not move the slider"
            assert value in fig.control_values()
            assert numbers == fig.numbers(value), f"at {value}"
            digits = getattr(fig, "readout_digits", 2)  # 0: a count
            assert extra["readout"] == f"{value:.{digits}f}"
        if full:
            keys = {s[0]: s for s in steps}
            assert keys["Home"][1] == fig.min and keys["Home"][2] == fig.numbers(fig.min)
            second = fig.control_values()[1]
            assert keys["ArrowRight"][1] == second
            assert keys["ArrowRight"][2] == fig.numbers(second)
        return
    mask = np.array(fig.mask, dtype=bool)
    for what, where, numbers, extra in steps:
        if what == "causal":
            assert numbers == fig.numbers(fig.causal)
            assert 'hidden from "People"' in extra["caption"]
            assert 'fully_masked="zeros"' in extra["caption"]
            assert "no key: all 0" in extra["svg"]
            continue
        i, j = where
        mask[i, j] = not mask[i, j]
        assert numbers == fig.numbers(mask), f"after {what} on ({i}, {j})"
    assert [s[0] for s in steps] == (["click"] * 3 + ["Enter", "Space", "causal"] if full
                                     else ["click"])


@pytest.mark.parametrize("scheme", ["http", "file"])
@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_figure_responds_on_the_site_offline(stem, scheme, site_tour):
    """Dragged with the mouse and driven from the keyboard (a mask: cells clicked and
    toggled with Enter and Space) over http; opened from the folder (file://) and moved
    once. No request leaves the machine, no console error."""
    fig = the_figure(stem)
    if scheme == "http":
        shown, record = _page(site_tour, stem), site_tour["http"]
        _check_steps(fig, shown["steps"])
    else:
        shown, record = site_tour["file"][stem], site_tour["file_record"]
        assert shown["hosts"] == 1, "the live figure did not render from file://"
        assert shown["initial"] == fig.numbers()
        _check_steps(fig, shown["steps"], full=False)
    external, errors = _problems(record, stem)
    assert not external, f"requests to other hosts: {external}"
    assert not errors, f"console errors: {errors}"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_keyboard_alone_reaches_and_moves_the_figure(stem, site_tour):
    """Tab from the figure's box reaches each of its controls once, in order, and each shows
    its focus; then the keys move the figure and its numbers follow (see site_tour._keyboard)."""
    fig, kb = the_figure(stem), _page(site_tour, stem)["keyboard"]
    stops = kb["stops"]
    assert stops, "Tab never reached a control of the figure"
    assert [s["index"] for s in stops] == list(range(stops[0]["of"])), \
        f"Tab skipped a control or went out of order: {[s['name'] for s in stops]}"
    hidden = [s["name"] for s in stops if not (s["visible"] and s["focusVisible"])]
    assert not hidden, f"focus not visible on: {hidden}"
    if isinstance(fig, live.SliderFigure):
        assert kb["first"]["tag"] == "input"
        values = fig.control_values()
        want = [fig.min, values[1], values[2], values[1], fig.max]
        assert [v for _, v, _ in kb["keys"]] == want, kb["keys"]
        for key, value, numbers in kb["keys"]:
            assert numbers == fig.numbers(value), f"after {key}, at {value}"
        return
    assert kb["first"]["name"].startswith(f"query {fig.tokens[0]}, key {fig.tokens[1]}: hidden")
    shown = np.array(fig.causal, dtype=bool)
    shown[0, 1] = True
    (_, after_enter, enter_numbers), (_, after_space, space_numbers) = kb["keys"]
    assert enter_numbers == fig.numbers(shown), "Enter did not show key 1 to query 0"
    assert space_numbers == fig.numbers(np.array(fig.causal, dtype=bool))
    for focus in (after_enter, after_space):  # the figure redraws; the focus stays put
        assert focus and focus["index"] == kb["first"]["index"] and focus["visible"], focus


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_figure_at_browser_zoom_200(stem, site_tour):
    """What a 1280 x 900 projector shows at zoom 200 %: a 640 x 450 window. The figure fits
    it (screenshot: _build/screenshots/live-<chapter>-zoom200.png) and no text in it is
    smaller than 10 px (20 screen pixels)."""
    zoom = _page(site_tour, stem)["zoom"]
    box = zoom["box"]
    assert box["x"] >= 0 and box["x"] + box["width"] <= 640, f"{stem} overflows: {box}"
    assert box["width"] <= zoom["column"] + 1
    assert zoom["smallest_text"] >= 10, f"{stem}: text of {zoom['smallest_text']:.1f} px"
    assert (SCREENSHOTS / f"live-{stem}-zoom200.png").stat().st_size > 1000


@pytest.mark.parametrize("width", [1280, 390])
def test_screenshots_and_fit(width, site_tour):
    """Each figure is saved at both widths (look at them: _build/screenshots/live-*.png)
    and fits the window."""
    for stem in CHAPTERS:  # at 390 px: the visit from file:// (a phone-sized window)
        box = (_page(site_tour, stem)["box"][str(width)] if width == 1280
               else site_tour["file"][stem]["box"])
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, f"{stem} overflows at {width}"
        assert (SCREENSHOTS / f"live-{stem}-{width}.png").stat().st_size > 1000


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
def test_without_javascript_a_note_stands_in_for_the_figure(stem, site_tour):
    nojs = site_tour["nojs"][stem]
    assert not nojs["scripts_ran"], "the page's scripts ran: JavaScript was not off"
    assert nojs["note_visible"], "without JavaScript, the note is not shown"
    shown = _page(site_tour, stem)  # with JavaScript, the note's box is hidden, not left empty
    assert shown["noscript"] == 1 and not shown["noscript_box_visible"]


def test_the_browser_leaves_no_event_loop_behind(site_tour):
    """The browser files run on one worker, before other files (the root conftest.py), and
    share one chromium; a later test there may call asyncio.run() (test_kernel_messaging.py
    does), which fails while Playwright's sync API still has its event loop open in this
    thread. The root conftest.py closes the browser after the last browser test, as here."""
    import asyncio

    import site_tour as tour

    tour.shared_browser()
    assert tour.browser_is_open()
    tour.close_browser()
    assert not tour.browser_is_open()
    assert asyncio.run(asyncio.sleep(0, result=42)) == 42


def test_the_browser_is_closed_when_the_next_test_is_not_a_browser_test(monkeypatch, request):
    """The root conftest.py's teardown hook: close between two files only when the next
    test of this worker is not in a browser file (or there is no next test)."""
    import site_tour as tour

    root_conftest = next(p for p in request.config.pluginmanager.get_plugins()
                         if getattr(p, "__file__", None) == str(ROOT / "conftest.py"))

    class Item:
        def __init__(self, name):
            self.path = ROOT / "tests" / name

    closed = []
    monkeypatch.setattr(tour, "browser_is_open", lambda: True)
    monkeypatch.setattr(tour, "close_browser", lambda: closed.append(True))
    here = Item("site/test_live_figures.py")
    for nextitem, closes in [(Item("site/test_browser.py"), False),
                             (Item("site/test_live_figures.py"), False),
                             (Item("tooling/test_kernel_messaging.py"), True), (None, True)]:
        closed.clear()
        root_conftest.pytest_runtest_teardown(here, nextitem)
        assert closed == ([True] if closes else []), nextitem


def test_the_instructor_guide_counts_the_live_figures():
    """The guide says how many live figures the site has, in two places, as the substitutions
    attnbook.book_numbers computes when the book is built (a typed count went stale), and lists
    them in a table (one row per chapter with a live figure): each agrees with the chapters."""
    from attnbook import book_numbers

    words = dict(zip("four five six seven eight nine ten eleven twelve thirteen fourteen "
                     "fifteen sixteen seventeen eighteen nineteen twenty".split(), range(4, 21)))
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    said = [s for s in re.findall(r"(\{\{ \w+ \}\}|\w+) (?:live figures|figures on the site are live)",
                                  guide) if s.startswith("{{") or s.lower() in words or s.isdigit()]
    assert len(said) >= 2 and set(said) <= {"{{ live_figures }}", "{{ Live_figures }}"}, \
        f"the guide types its count of live figures ({said}): use {{{{ live_figures }}}}"
    assert not [w for w in said if w.lower() in words]
    computed = book_numbers.substitutions(ROOT)
    assert computed["live_figures_n"] == str(len(CHAPTERS)), (computed, len(CHAPTERS))
    assert computed["live_figures"] == book_numbers.english(len(CHAPTERS))
    section = guide.split("### Live figures in class", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| (\d\d)[a-z]? ", section, flags=re.M)
    assert sorted(rows) == sorted(stem[:2] for stem in CHAPTERS), rows
