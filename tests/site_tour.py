"""One tour of the built site in chromium, shared by the browser tests.

(The tour is taken in four parts, PARTS, each a test of its own, so that no single test
takes long; ``merge`` joins them.)

tests/site/test_browser.py (the whole site) and tests/site/test_live_figures.py (the live
figures) check what one browser saw on one tour, instead of each opening its own
pages: loading a chapter page (theme scripts, MathJax typesetting) is what costs,
so every page is loaded once where one load can show everything. The tour:

1. light mode, 1280 x 900, over http (the site served on 127.0.0.1), in one browser
   context: every page of the site once. On each page it collects what the tests
   need (COLLECT: titles, math, images, links, ids, widget leftovers; the figures'
   backgrounds; code blocks that scroll sideways, measured last because it opens
   every solution), then the widths of every table, figure and display equation
   against the article's column (FIT), at 1280 px and again with the window narrowed
   to a phone's 390 px (the same page, reflowed). On a chapter with a live figure it
   also, before the sideways check: reads the numbers as the page opens; screenshots
   the figure (and measures that it fits the window); drags the slider
   with the mouse and presses keys (or clicks the mask's cells), recording the
   numbers after each step; sweeps the control over its whole range; then reaches
   every control with Tab alone (recording whether each shows its focus) and moves it
   with the keyboard (_keyboard); and, after the sideways check, on the way to the
   phone width, measures and screenshots the figure in a window of 640 x 450, which is
   what a 1280 x 900 screen shows at browser zoom 200 % (_zoom). On chapter 04
   it also runs core.js's number formatting on many values. Then the built-in search,
   in the same context.
2. dark mode: chapter 01 once, loaded with the system preference set to dark, in the
   same context (figure backgrounds; a screenshot of its first screen, as in light mode).
3. file://: each live chapter, opened from the folder as a reader who downloaded
   the site would, in a phone-sized window (390 x 844); MathJax is not loaded there
   (the figure is what is checked; MathJax is checked on every page in step 1): the
   figure draws, fits the window (screenshot) and responds to a drag.
4. JavaScript off (in step 1's context, its scripts disabled): each live chapter shows
   the note that stands in for its figure, and none of its scripts ran.

Every request to another host is blocked and recorded, with the page it came from,
as are failed requests and console messages. The result is plain JSON, computed once
per test run and shared by the xdist workers (see ``site_tour`` in conftest.py).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# The proxy does not exist: a request to another host fails (and is recorded as blocked).
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1;localhost"]
DESKTOP = {"width": 1280, "height": 900}  # every page is visited at this size
PHONE = {"width": 390, "height": 844}  # the live figures are also shot at this size
SCREENSHOTS = Path(os.environ.get("ATTNBOOK_SCREENSHOTS", ROOT / "_build" / "screenshots"))
CHAPTER = "chapters/01_three_tokens.html"  # the page screenshotted in light and dark mode
NOSCRIPT_NOTE = "This live figure needs JavaScript"

# (query, page whose title contains it): the search must list that page among its first results.
SEARCHES = [
    ("three tokens", "chapters/01_three_tokens.html"),
    ("softmax safely", "chapters/03_softmax.html"),
    ("rotary position", "chapters/13_rope.html"),
    ("latent attention", "chapters/16_latent_attention.html"),
    ("online softmax", "chapters/17_flash_attention.html"),
    ("FlashAttention", "chapters/17b_tiled_attention.html"),
    ("FlashAttention backward", "chapters/17c_flash_attention_backward.html"),
]

# Values core.js's pyFixed must format as Python does (ties included: toFixed does not).
FORMAT_CASES = [0.125, 0.375, 2.5, 0.5, 1.5, 0.005, 0.015, 1.005, 0.0, -0.0, -0.001,
                1e-7, 0.9999, 0.99951, 123.456, 2.675, 1 / 3, 2 / 3, 168.0004, 174.99955]


def format_cases() -> list[float]:
    cases = FORMAT_CASES + list(np.random.default_rng(0).uniform(0, 1, 300))
    cases += [k / 2 ** 10 for k in range(0, 1025, 7)]  # many exact binary ties
    return [float(x) for x in cases]


def live_chapters() -> dict:
    """chapter stem -> its live figure class, for every chapter page that shows one
    (found in the notebooks' stored widget state, by the figure's JavaScript)."""
    from attnbook import live

    found = {}
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        figures = live.figures_in(json.loads(path.read_text(encoding="utf-8")))
        if figures:
            assert all(cls is not None for cls, _ in figures), f"{path.name}: unknown live figure"
            found[path.stem] = figures[0][0]
    return found


def notebook(stem):
    return json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))


def live_states(nb):
    from attnbook import live

    state = nb["metadata"].get("widgets", {}).get(live.WIDGET_STATE, {}).get("state", {})
    return {mid: m["state"] for mid, m in state.items() if live.is_live_figure(m)}


def the_figure(stem):
    """The live figure stored in a chapter, rebuilt in Python from its state."""
    states = list(live_states(notebook(stem)).values())
    assert len(states) == 1, f"{stem}: expected one live figure, found {len(states)}"
    return live_chapters()[stem].from_state(states[0])


# --- what the browser runs on a page ---

# Every file the page loaded (itself included), with its HTTP status, from resource timing.
RESOURCES = """
() => performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource"))
    .map(e => [e.name, e.responseStatus || 0])
"""

# What the browser collects on each page after it has loaded, MathJax has typeset and every
# image has loaded (lazy images are made eager first).
COLLECT = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise, new Promise(r => setTimeout(r, 10000))]);
  }
  for (const img of document.images) { img.loading = "eager"; }
  await Promise.all([...document.images].map(img => img.complete ? null :
      new Promise(r => { img.addEventListener("load", r); img.addEventListener("error", r);
                         setTimeout(r, 10000); })));
  await document.fonts.ready;
  if (window.attnbookLiveReady) await window.attnbookLiveReady;  // live figures drawn
  const main = document.querySelector("main") || document.body;
  return {
    resources: (RESOURCES_FUNCTION)(),
    title: document.title,
    url: location.href,
    math: main.querySelectorAll(".math").length,
    mathjax: main.querySelectorAll("mjx-container").length,
    mathErrors: document.querySelectorAll("mjx-merror, .MathJax_Error").length,
    rawTex: [...main.querySelectorAll(".math")].filter(e => !e.querySelector("mjx-container"))
              .map(e => e.textContent.slice(0, 80)),
    images: [...document.images].map(img => ({
      src: img.currentSrc || img.src, alt: (img.getAttribute("alt") || "").trim(),
      width: img.naturalWidth, content: !!img.closest("main")})),
    links: [...document.querySelectorAll("a[href]")].map(a => a.href),
    ids: [...document.querySelectorAll("[id]")].map(e => e.id)
           .concat([...document.querySelectorAll("a[name]")].map(a => a.name)),
    // widget views not drawn by the site's loader of live figures (attnbook/live)
    widgetViews: [...document.querySelectorAll(
        'script[type="application/vnd.jupyter.widget-view+json"]')]
        .filter(s => !(s.nextElementSibling &&
                       s.nextElementSibling.matches(".attnbook-live-host[data-live-ready]")))
        .length + document.querySelectorAll(".jupyter-widgets, .widget-area").length,
    widgetScripts: [...document.querySelectorAll("script[src]")].map(s => s.src)
        .filter(s => /require(\\.min)?\\.js|jupyter-widgets|html-manager|embed-amd|ipywidgets/
                     .test(s)),
    emptyOutputs: [...main.querySelectorAll(".cell_output")].filter(o =>
        !o.textContent.trim() &&
        !o.querySelector("img, svg, table, mjx-container, iframe, video")).length,
  };
}
"""

COLLECT = COLLECT.replace("RESOURCES_FUNCTION", RESOURCES.strip())

# Draws every content image onto a small canvas and reports its least opaque pixel and the
# brightness of its corners; also the page background, to confirm the page is really dark.
FIGURE_BACKGROUNDS = """
() => {
  const lum = (r, g, b) => 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const bg = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number);
  const figures = [...document.querySelectorAll("main img")].filter(
      img => img.src.includes("/_images/")).map(img => {
    const c = document.createElement("canvas"); c.width = 64; c.height = 64;
    const ctx = c.getContext("2d");
    ctx.drawImage(img, 0, 0, 64, 64);
    const d = ctx.getImageData(0, 0, 64, 64).data;
    let minAlpha = 255;
    for (let i = 3; i < d.length; i += 4) minAlpha = Math.min(minAlpha, d[i]);
    const corner = k => lum(d[k], d[k + 1], d[k + 2]);
    const n = 64 * 4;
    const corners = [corner(0), corner(n - 4), corner(d.length - n), corner(d.length - 4)];
    return {src: img.src.split("/").pop(), minAlpha, cornerLuminance: Math.min(...corners)};
  });
  return {theme: document.documentElement.dataset.theme,
          bodyLuminance: lum(...bg.slice(0, 3)), figures};
}
"""

# Opens every collapsed solution and hidden input, then lists the code blocks and text
# outputs (every <pre> in the article) that scroll sideways, with their longest line.
SIDEWAYS = """
() => {
  for (const d of document.querySelectorAll("main details")) d.open = true;
  for (const e of document.querySelectorAll("main .toggle-hidden"))
    e.classList.remove("toggle-hidden");
  const scrolls = e => e.scrollWidth > e.clientWidth + 1 &&
                       getComputedStyle(e).overflowX !== "visible";
  const blocks = [...document.querySelectorAll("main pre")];
  return {count: blocks.length, sideways: blocks.map((pre, index) => {
    const box = [pre, pre.parentElement].find(scrolls);
    if (!box) return null;
    const lines = pre.textContent.split("\\n");
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
    const kind = pre.closest(".cell_output") ? "text output"
               : pre.closest(".cell_input") ? "code cell" : "code block";
    return {index, kind, scrollWidth: box.scrollWidth, clientWidth: box.clientWidth,
            longest: longest.length, line: longest.trim().slice(0, 70)};
  }).filter(Boolean)};
}
"""

# Every table, figure (image, <figure>, live figure) and display equation in the article:
# its width against the column's, and whether the box that holds it scrolls sideways (and,
# if so, whether it shows that it does: the scroll-shadow background of _static/attnbook.css).
# Run after SIDEWAYS, so that the solutions are open and their tables count too.
FIT = """
() => {
  const col = document.querySelector(".bd-article");
  if (!col) return {width: 0, items: []};
  const cs = getComputedStyle(col), box = col.getBoundingClientRect();
  const left = box.left + parseFloat(cs.paddingLeft);
  const right = box.right - parseFloat(cs.paddingRight);
  const scrolls = e => e.scrollWidth > e.clientWidth + 1 &&
                       ["auto", "scroll"].includes(getComputedStyle(e).overflowX);
  const items = [...col.querySelectorAll(
      "table, img, figure, mjx-container, .attnbook-live, video, iframe")]
    .filter(e => e.getClientRects().length && e.getBoundingClientRect().width > 0)
    .map(e => {
      const r = e.getBoundingClientRect();
      let scroller = null;
      for (let a = e; a && a !== col; a = a.parentElement) if (scrolls(a)) { scroller = a; break; }
      const kind = e.matches("mjx-container[display='true']") ? "equation"
                 : e.matches("mjx-container") ? "formula" : e.matches("table") ? "table"
                 : e.matches(".attnbook-live") ? "live figure" : "figure";
      return {kind, text: (e.getAttribute("alt") || e.textContent || "").replace(/\\s+/g, " ")
                            .trim().slice(0, 60),
              // (an inline formula's scrollWidth counts MathJax's hidden copy for screen
              // readers, drawn wider than the formula: its box is what the reader sees)
              width: Math.round(kind === "formula" ? r.width : Math.max(r.width, e.scrollWidth)),
              outside: Math.round(Math.max(left - r.left, r.right - right, 0)),
              scrolls: !!scroller,
              cue: !!scroller && getComputedStyle(scroller).backgroundAttachment
                                   .includes("local")};
    });
  return {width: Math.round(right - left), items};
}
"""

NUMBERS = """
() => [...document.querySelectorAll(".attnbook-live-host [data-live-number]")]
        .map((e) => e.textContent)
"""

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
  const causal = [...host.querySelectorAll("button")]
      .find((b) => b.textContent === "causal mask");
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

# core.js's pyFixed, imported from the figure's own module, on many values and digits.
PYFIXED = """
async ([esm, cases]) => {
  const src = esm + "\\nexport { pyFixed };";
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  const { pyFixed } = await import(url);
  return cases.map((x) => [0, 1, 2, 3].map((d) => pyFixed(x, d)));
}
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(html: Path) -> str:
    """The base URL of ``html`` served on 127.0.0.1, on a free port chosen the first time;
    the server runs until close_browser(). One server per folder, so that every part of the
    tour has the same origin, and the browser's cache (theme scripts, MathJax) serves them all."""
    servers = _SHARED.setdefault("servers", {})
    key = str(Path(html).resolve())
    if key not in servers:
        server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=key))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[key] = (server, f"http://127.0.0.1:{server.server_address[1]}/")
    return servers[key][1]


def _location(message) -> str:
    """Where a console error comes from, when it names a file (a 404 names no URL)."""
    url = message.location.get("url", "") if message.type == "error" else ""
    return f" ({url})" if url else ""


class Recorder:
    """A browser context that records what happens, page by page (``where``).

    Requests to other hosts cannot leave the machine: the browser is launched with a proxy
    that does not exist (LAUNCH_ARGS; 127.0.0.1 itself is never proxied), so each fails,
    and a failed request to another host is recorded as blocked. What each page loaded,
    with its HTTP status, comes from the page's own resource timing (COLLECT), not from
    an event per request: listening to every request costs as much as the page itself.
    ``stub`` is a URL pattern answered with an empty script (MathJax, on file://).
    """

    def __init__(self, browser, base_url, stub=None, **context_options):
        self.base = base_url
        self.context = browser.new_context(**context_options)
        self.context.set_default_timeout(20_000)
        self.context.add_init_script("performance.setResourceTimingBufferSize(100000)")
        if stub:
            self.context.route(stub, lambda route: route.fulfill(
                status=200, body="", content_type="text/javascript"))
        self.blocked, self.failed, self.console, self.fetched = [], [], [], []
        self.where = "?"
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.console.append(
            [self.where, m.type, m.text + _location(m)]))
        self.page.on("pageerror", lambda e: self.console.append(
            [self.where, "pageerror", str(e)]))
        self.page.on("requestfailed", self._request_failed)

    def _request_failed(self, request):  # a network error, or a request to another host
        if request.url.startswith(self.base):
            # ERR_ABORTED: cancelled by the browser, e.g. the favicon of a page the tour has
            # already left; a missing file shows as HTTP 404 (see _loaded) or ERR_FILE_NOT_FOUND
            if request.failure != "net::ERR_ABORTED":
                self.failed.append([self.where, request.url, request.failure])
        elif not request.url.startswith(("data:", "blob:", "about:")):
            self.blocked.append([self.where, request.url])

    def visit(self, path, collect=True):
        self.where = path
        self.page.goto(self.base + path, wait_until="load")
        if not collect:
            return None
        data = self.page.evaluate(COLLECT)
        self._loaded(data.pop("resources"))
        return data

    def note_resources(self):
        """Record what the page has loaded so far (for a page visited without COLLECT)."""
        self._loaded(self.page.evaluate(RESOURCES))

    def _loaded(self, resources):
        for url, status in resources:
            self.fetched.append([self.where, url])
            if status >= 400:
                self.failed.append([self.where, url, f"HTTP {status}"])

    def record(self) -> dict:
        return {"blocked": self.blocked, "failed": self.failed, "console": self.console,
                "fetched": self.fetched}

    def take_record(self) -> dict:
        """What was recorded since the last call (for a context shared by parts of the tour)."""
        record = self.record()
        self.blocked, self.failed, self.console, self.fetched = [], [], [], []
        return record

    def close(self):
        self.context.close()


def site_pages(html: Path) -> list[str]:
    """Every HTML page of the English site, relative to its root (index.html only redirects;
    the Chinese edition, zh/, has its own part of the tour: zh_pages)."""
    skip = ("_static/", "_sources/", "_images/", "zh/")
    pages = (p.relative_to(html).as_posix() for p in html.rglob("*.html"))
    return sorted(p for p in pages if not p.startswith(skip) and p != "index.html")


# --- the live figures ---

def _numbers(page):
    return page.evaluate(NUMBERS)


def _drag(page, slider, fraction):
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    value = float(slider.input_value())
    lo, hi = float(slider.get_attribute("min")), float(slider.get_attribute("max"))
    x0 = box["x"] + 8 + (box["width"] - 16) * (value - lo) / (hi - lo)  # the thumb
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * fraction, y, steps=4)
    page.mouse.up()
    return float(slider.input_value())


def _interact(page, fig, full=True) -> list:
    """Drive the figure as a reader would; returns the steps: [what, control, numbers, extra].

    A slider is dragged with the mouse to 80 % and 30 % of its track (the readout is
    recorded too), then Home and ArrowRight are pressed; a mask is clicked at (3, 1),
    (0, 0) (emptying row 0) and (3, 1) again, then cell (2, 0) is toggled with Enter and
    with Space, and finally the "causal mask" button is pressed. With full=False only the
    first step is taken.
    """
    from attnbook import live

    host = page.locator(".attnbook-live-host")
    steps = []
    if isinstance(fig, live.SliderFigure):
        slider = host.locator("input[type=range]")
        for fraction in ((0.8, 0.3) if full else (0.8,)):
            start = float(slider.input_value())
            value = _drag(page, slider, fraction)
            steps.append(["drag", value, _numbers(page),
                          {"start": start, "fraction": fraction,
                           "readout": host.locator("output").text_content()}])
        if full:
            slider.focus()
            page.keyboard.press("Home")
            steps.append(["Home", float(slider.input_value()), _numbers(page), {}])
            page.keyboard.press("ArrowRight")
            steps.append(["ArrowRight", float(slider.input_value()), _numbers(page), {}])
    else:
        for i, j in ([(3, 1), (0, 0), (3, 1)] if full else [(3, 1)]):
            host.locator(f"rect[data-row='{i}'][data-col='{j}']").click()
            steps.append(["click", [i, j], _numbers(page), {}])
        if full:
            cell = host.locator("rect[data-row='2'][data-col='0']")
            cell.focus()
            page.keyboard.press("Enter")
            steps.append(["Enter", [2, 0], _numbers(page), {}])
            page.keyboard.press(" ")
            steps.append(["Space", [2, 0], _numbers(page), {}])
            extra = {"caption": host.locator(".attnbook-live-caption").text_content(),
                     "svg": host.locator("svg").text_content()}
            host.get_by_role("button", name="causal mask").click()
            steps.append(["causal", None, _numbers(page), extra])
    return steps


def _figure_box(page, stem, size, shots: Path):
    page.set_viewport_size(size)
    figure = page.locator(".attnbook-live")
    figure.scroll_into_view_if_needed()
    box = figure.bounding_box()
    figure.screenshot(path=str(shots / f"live-{stem}-{size['width']}.png"))
    return box


ZOOM_200 = {"width": DESKTOP["width"] // 2, "height": DESKTOP["height"] // 2}

# What has the focus (in the live figure), and whether its focus can be seen: an outline of
# 2 px or more, or, on a mask cell, a border 3 units wide or more that is not white.
FOCUS = """
() => {
  const e = document.activeElement, host = document.querySelector(".attnbook-live-host");
  if (!e || !host.contains(e) || e === host) return null;
  const cs = getComputedStyle(e);
  const ring = cs.outlineStyle !== "none" && parseFloat(cs.outlineWidth) >= 2;
  const border = e instanceof SVGElement && parseFloat(cs.strokeWidth) >= 3 &&
                 !["none", "rgb(255, 255, 255)"].includes(cs.stroke);
  const all = [...host.querySelectorAll("input, button, select, [tabindex='0']")];
  return {index: all.indexOf(e), of: all.length, tag: e.tagName.toLowerCase(),
          name: e.getAttribute("aria-label") || e.textContent.trim(),
          visible: ring || border, focusVisible: e.matches(":focus-visible")};
}
"""

# Makes the figure's box focusable and focuses it, and logs FOCUS at every focus change
# inside it (window.attnbookFocusLog), so that a run of Tab presses is read back at once.
FOCUS_LOG = """
() => {
  const host = document.querySelector(".attnbook-live-host");
  const focus = FOCUS_FUNCTION;
  window.attnbookFocusLog = [];
  host.addEventListener("focusin", () => window.attnbookFocusLog.push(focus()));
  host.tabIndex = -1;
  host.focus();
}
""".replace("FOCUS_FUNCTION", FOCUS.strip())

# The smallest text in the figure, in CSS px as drawn (SVG text scaled with its picture).
SMALLEST_TEXT = """
() => {
  const fig = document.querySelector(".attnbook-live");
  let least = Infinity;
  for (const t of fig.querySelectorAll("text, span, label, output, button, th, td, p")) {
    if (!t.textContent.trim() || !t.getClientRects().length) continue;
    let size = parseFloat(getComputedStyle(t).fontSize);
    const svg = t.closest("svg");
    if (svg) size *= svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    least = Math.min(least, size);
  }
  return least;
}
"""


def _keyboard(page, fig) -> dict:
    """Tab through the figure's controls from its box (none may be skipped, and each must
    show its focus), then move the figure by keyboard alone.

    A slider, reached with Tab: Home, ArrowRight, ArrowRight, ArrowLeft, End. A mask,
    after a click on "causal mask": Tab, Tab (to cell (0, 1)), Enter, then Space (which
    puts the cell back), the focus staying on the cell as the figure redraws."""
    from attnbook import live

    host = page.locator(".attnbook-live-host")
    slider = isinstance(fig, live.SliderFigure)
    if not slider:
        host.get_by_role("button", name="causal mask").click()
    page.evaluate(FOCUS_LOG)
    controls = host.locator("input, button, select, [tabindex='0']").count()
    for _ in range(controls + 1):  # the last Tab leaves the figure
        page.keyboard.press("Tab")
    out = {"stops": [s for s in page.evaluate("window.attnbookFocusLog") if s], "keys": []}
    host.focus()
    page.keyboard.press("Tab")
    if not slider:
        page.keyboard.press("Tab")
    out["first"] = page.evaluate(FOCUS)
    for key in (("Home", "ArrowRight", "ArrowRight", "ArrowLeft", "End") if slider
                else ("Enter", " ")):
        page.keyboard.press(key)
        now = (float(host.locator("input[type=range]").input_value()) if slider
               else page.evaluate(FOCUS))
        out["keys"].append([key, now, _numbers(page)])
    host.evaluate("h => h.removeAttribute('tabindex')")
    return out


def _zoom(page, stem, shots: Path) -> dict:
    """The live figure in a window of ZOOM_200 (the page already resized to it): its box,
    its smallest text, the column's width; a screenshot."""
    figure = page.locator(".attnbook-live")
    figure.scroll_into_view_if_needed()
    figure.screenshot(path=str(shots / f"live-{stem}-zoom200.png"))
    return {"box": figure.bounding_box(), "smallest_text": page.evaluate(SMALLEST_TEXT),
            "column": page.evaluate(FIT)["width"]}


def _fit(page, live_stem=None, shots: Path = SCREENSHOTS) -> dict:
    """FIT at the desktop width, then with the same page narrowed to a phone's width (390
    px). On a page with a live figure (``live_stem``), the figure is also measured at zoom
    200 % on the way (_zoom: key "zoom"). The page is left at the desktop size."""
    out = {"widths": {str(DESKTOP["width"]): page.evaluate(FIT)}}
    try:
        if live_stem:
            page.set_viewport_size(ZOOM_200)
            out["zoom"] = _zoom(page, live_stem, shots)
        page.set_viewport_size({"width": PHONE["width"], "height": DESKTOP["height"]})
        out["widths"][str(PHONE["width"])] = page.evaluate(FIT)
    finally:
        page.set_viewport_size(DESKTOP)
    return out


def _live_probe(page, stem, shots: Path) -> dict:
    """Everything the live-figure tests check on a chapter page opened over http."""
    from attnbook import live

    fig = the_figure(stem)
    out = {"hosts": page.locator(".attnbook-live-host").count(), "initial": _numbers(page),
           "noscript": page.locator("noscript[data-attnbook-live]").count(),
           "noscript_box_visible": page.locator(
               ".output:has(> noscript[data-attnbook-live])").is_visible()}
    if out["hosts"] != 1:
        return out
    out["box"] = {str(DESKTOP["width"]): _figure_box(page, stem, DESKTOP, shots)}
    out["steps"] = _interact(page, fig)
    if isinstance(fig, live.SliderFigure):
        out["sweep"] = page.evaluate(SWEEP, fig.control_values())
    else:
        out["sweep"] = page.evaluate(MASK_SWEEP)
    out["keyboard"] = _keyboard(page, fig)
    if stem == "04_scaling":
        cases = format_cases()
        esm = live.esm_source(live.TemperatureBars.js_file)
        out["pyfixed"] = {"cases": cases, "got": page.evaluate(PYFIXED, [esm, cases])}
    return out


# --- the tour ---

PARTS = ("chapters 01-09", "chapters 10 and later", "other pages and search",
         "dark mode, file:// and no JavaScript", "Chinese edition")


def _part_pages(html: Path, part: str) -> list[str]:
    pages = site_pages(html)
    if part == PARTS[0]:
        return [p for p in pages if p.startswith("chapters/0")]
    if part == PARTS[1]:
        return [p for p in pages if p.startswith("chapters/") and not p.startswith("chapters/0")]
    if part == PARTS[2]:
        return [p for p in pages if not p.startswith("chapters/")]
    return []


# One Playwright driver, one chromium and one server per site folder per process, shared by
# the parts of the tour and the other browser tests: launching chromium and Playwright costs
# about 2 CPU-seconds each time, and a new context or origin starts with a cold cache (the
# first page of a context costs three times the next). Playwright's sync API keeps an event
# loop open in this thread until it stops, and a later test in the same worker may need
# asyncio.run(): close_browser() stops everything, and the root conftest.py calls it as
# soon as the next test of the worker is not a browser test.
_SHARED: dict = {}


def shared_browser():
    """The process's chromium, launched on first use (or again if it died)."""
    browser = _SHARED.get("browser")
    if browser is not None and browser.is_connected():
        return browser
    close_browser()
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
    except BaseException:
        playwright.stop()
        raise
    _SHARED.update(playwright=playwright, browser=browser)
    return browser


def browser_is_open() -> bool:
    return "playwright" in _SHARED


def close_browser():
    """Close the shared chromium, stop Playwright (and its event loop) and the servers."""
    browser, playwright = _SHARED.pop("browser", None), _SHARED.pop("playwright", None)
    _SHARED.pop("light", None)  # closed with the browser
    servers = _SHARED.pop("servers", {})
    try:
        if browser is not None and browser.is_connected():
            browser.close()
    finally:
        if playwright is not None:
            playwright.stop()
        for server, _ in servers.values():
            server.shutdown()
            server.server_close()


@contextlib.contextmanager
def chromium(html: Path):
    """The shared chromium (shared_browser) and the base URL of ``html`` served over http
    (serve); yields (browser, base URL). Both stay open for the next caller."""
    yield shared_browser(), serve(html)


def light_recorder(browser, base_url) -> Recorder:
    """The light-mode desktop context of step 1 of the tour, shared by its parts."""
    rec = _SHARED.get("light")
    if rec is None or rec.base != base_url or rec.context.browser is not browser:
        rec = _SHARED["light"] = Recorder(browser, base_url, color_scheme="light",
                                          viewport=DESKTOP)
    return rec


def run_part(part: str, html: Path) -> dict:
    """Take one part of the tour (see the module's docstring); returns what it saw, as JSON.

    The tour comes in four parts, each a test of its own in test_browser.py (so that no
    single test takes long): the chapter pages in two halves, the other pages with the
    search, and the visits in dark mode, from file:// and without JavaScript.
    """
    with chromium(html) as (browser, base_url):
        return _run_part(part, html, browser, base_url)


def _run_part(part, html, browser, base_url):
    if part == PARTS[4]:
        return _run_zh(html, browser, base_url)
    started = time.perf_counter()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    live_stems = set(live_chapters())
    result = {"base_url": base_url, "pages": {}}
    if part != PARTS[3]:
        # light mode, http: every page of this part
        rec = light_recorder(browser, base_url)
        for path in _part_pages(html, part):
            data = rec.visit(path)
            data["base_url"] = base_url
            backgrounds = rec.page.evaluate(FIGURE_BACKGROUNDS)
            data["figures"] = backgrounds["figures"]
            if path == CHAPTER:  # the light half of the light/dark comparison
                data["backgrounds"] = backgrounds
                rec.page.screenshot(path=str(SCREENSHOTS / f"{Path(CHAPTER).stem}-light.png"))
            stem = Path(path).stem
            if path.startswith("chapters/") and stem in live_stems:
                data["live"] = _live_probe(rec.page, stem, SCREENSHOTS)
            data["sideways"] = rec.page.evaluate(SIDEWAYS)
            live_here = data.get("live", {}).get("hosts") == 1
            fit = _fit(rec.page, stem if live_here else None, SCREENSHOTS)
            data["fit"] = fit["widths"]
            if "zoom" in fit:
                data["live"]["zoom"] = fit["zoom"]
            result["pages"][path] = data
        if part == PARTS[2]:
            # the search page: the first query from its URL, as a reader's search box sends
            # it; the others typed into the same page's search (Sphinx's
            # Search.performSearch, the function the page itself calls with the URL's query)
            result["searches"] = {}
            for k, (query, _) in enumerate(SEARCHES):
                if k == 0:
                    rec.visit("search.html?q=" + query.replace(" ", "+"), collect=False)
                else:
                    rec.page.evaluate("(q) => { document.getElementById('search-results')"
                                      ".replaceChildren(); Search.performSearch(q); }", query)
                rec.page.wait_for_selector(
                    "#search-results .search-summary:has-text('Search finished')")
                result["searches"][query] = rec.page.eval_on_selector_all(
                    "#search-results ul.search li > a",
                    "links => links.map(a => a.getAttribute('href'))")
            rec.note_resources()
        result["http"] = rec.take_record()
    else:
        # dark mode, one chapter: loaded afresh in the light-mode context of step 1, its
        # system preference set to dark first (a new context would start with a cold cache)
        dark = light_recorder(browser, base_url)
        dark.take_record()
        dark.page.emulate_media(color_scheme="dark")
        try:
            dark.visit(CHAPTER)
            result["dark"] = {"backgrounds": dark.page.evaluate(FIGURE_BACKGROUNDS)}
            dark.page.screenshot(path=str(SCREENSHOTS / f"{Path(CHAPTER).stem}-dark.png"))
        finally:
            dark.page.emulate_media(color_scheme="light")
        result["dark"].update(dark.take_record())
        # file://, the live chapters, without MathJax, in a phone-sized window
        files = Recorder(browser, html.resolve().as_uri() + "/",
                         stub="**/_static/mathjax/**", viewport=PHONE)
        result["file"] = {}
        for stem in sorted(live_stems):
            files.where = f"chapters/{stem}.html"
            files.page.goto(files.base + files.where)
            files.page.wait_for_function("window.attnbookLiveReady !== undefined",
                                         timeout=15000)
            files.page.evaluate("window.attnbookLiveReady")
            result["file"][stem] = {
                "hosts": files.page.locator(".attnbook-live-host").count(),
                "initial": _numbers(files.page),
                "box": _figure_box(files.page, stem, PHONE, SCREENSHOTS),
                "steps": _interact(files.page, the_figure(stem), full=False)}
        result["file_record"] = files.record()
        files.close()
        # JavaScript off, the live chapters: in the light-mode context again, with the page's
        # scripts disabled as a context made with java_script_enabled=False has them
        # (Playwright does it with this same DevTools command)
        page = light_recorder(browser, base_url).page
        devtools = page.context.new_cdp_session(page)
        devtools.send("Emulation.setScriptExecutionDisabled", {"value": True})
        result["nojs"] = {}
        try:
            for stem in sorted(live_stems):
                page.goto(f"{base_url}chapters/{stem}.html")
                result["nojs"][stem] = {
                    "scripts_ran": page.evaluate("() => window.attnbookLiveReady !== undefined"),
                    "note_visible": page.locator("noscript[data-attnbook-live] em",
                                                 has_text=NOSCRIPT_NOTE).is_visible()}
        finally:
            devtools.send("Emulation.setScriptExecutionDisabled", {"value": False})
            devtools.detach()
            light_recorder(browser, base_url).take_record()  # requests of no interest here
    result["seconds"] = time.perf_counter() - started
    return json.loads(json.dumps(result))  # plain JSON, as the other workers read it


# --- the Chinese edition (zh/): every page once, cheaply --------------------------------

ZH_SEARCHES = [  # (query, a page that must be among the results)
    ("注意力", "chapters/01_three_tokens.html"),
    ("掩码", "chapters/06_masking.html"),
    ("旋转位置编码", "chapters/13_rope.html"),
]

# The page's Chinese characters, drawn in a probe inside the article (so it inherits the
# article's font), waited for, then DevTools says which fonts drew them (FONT_PROBE).
FONT_PROBE = """async () => {
  const text = document.querySelector("article").innerText;
  const chars = [...new Set(text.match(/[\\u3400-\\u9fff\\uff00-\\uffef\\u3000-\\u303f]/g) || [])].join("");
  const probe = document.createElement("p");
  probe.id = "attnbook-font-probe";
  probe.textContent = chars;
  document.querySelector("article").appendChild(probe);
  await document.fonts.load("16px 'Attnbook Noto Sans SC'", chars);
  await document.fonts.ready;
  return chars.length;
}"""

ZH_COLLECT = """() => ({
  lang: document.documentElement.getAttribute("lang"),
  title: document.title,
  h1: (document.querySelector("article h1") || {}).textContent || "",
  switch: (document.querySelector("a.attnbook-lang-switch") || {}).href || null,
  sections: document.querySelectorAll("article.bd-article section[id]").length,
  live: [],
})"""


def switch_pages(html: Path) -> list[str]:
    """The English pages that carry a language switch: all but Sphinx's search and index
    pages, which are made without the page body the switch is put in."""
    return [p for p in site_pages(html) if p not in ("search.html", "genindex.html")]


def zh_pages(html: Path) -> list[str]:
    """Every page of the Chinese site, relative to zh/ (zh/index.html only redirects)."""
    skip = ("_static/", "_sources/", "_images/")
    pages = (p.relative_to(html / "zh").as_posix() for p in (html / "zh").rglob("*.html"))
    return sorted(p for p in pages if not p.startswith(skip) and p not in ("index.html",
                                                                          "search.html", "genindex.html"))


def _fonts(page, selector="#attnbook-font-probe") -> list:
    """The fonts chromium drew the font probe with: [[family, custom?, glyphs], ...]."""
    devtools = page.context.new_cdp_session(page)
    try:
        devtools.send("DOM.enable")
        devtools.send("CSS.enable")
        root = devtools.send("DOM.getDocument")["root"]["nodeId"]
        node = devtools.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        fonts = devtools.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
        return [[f["familyName"], f["isCustomFont"], f["glyphCount"]] for f in fonts]
    finally:
        devtools.detach()


# Probes of the Chinese inside a part of the page (a live figure, a deck): for each selector,
# a copy of the first element it matches (the element alone, with its classes and attributes,
# so it has the same font: a button, an SVG text, a table cell), placed beside it, holding
# every Chinese character of the part (`scope`). probe_fonts then asks DevTools which fonts
# drew each copy.
CLONE_PROBES = """async ([scope, selectors, family]) => {
  const part = document.querySelector(scope);
  if (!part) return {chars: 0, probes: []};
  const text = part.innerText + [...part.querySelectorAll("svg text")].map((t) => t.textContent).join("");
  const chars = [...new Set(text.match(/[\\u2e80-\\u9fff\\uf900-\\ufaff\\ufe30-\\ufe4f\\uff00-\\uffef]/g) || [])].join("");
  const probes = [];
  selectors.forEach((sel, k) => {
    const el = part.matches(sel) ? part : part.querySelector(sel);
    if (!el || !chars) return;
    const probe = el.cloneNode(false);
    probe.id = "attnbook-font-probe-" + k;
    probe.textContent = chars;
    el.parentNode.insertBefore(probe, el.nextSibling);
    probes.push([sel, "#" + probe.id]);
  });
  if (chars) await document.fonts.load(`16px "${family}"`, chars);
  await document.fonts.ready;
  return {chars: chars.length, probes};
}"""


def probe_fonts(page, scope: str, selectors: list[str],
                family: str = "Attnbook Noto Sans SC") -> dict:
    """{"chars": how many Chinese characters `scope` shows, "fonts": {selector: the fonts
    that drew them in a copy of that element}} (see CLONE_PROBES)."""
    made = page.evaluate(CLONE_PROBES, [scope, selectors, family])
    fonts = {sel: _fonts(page, probe) for sel, probe in made["probes"]}
    page.evaluate("() => document.querySelectorAll('[id^=attnbook-font-probe-]')"
                  ".forEach((e) => e.remove())")
    return {"chars": made["chars"], "fonts": fonts}


LIVE_PROBES = [".attnbook-live", ".attnbook-live button", ".attnbook-live-svg text"]


def _switch_round_trips(browser, base: str, pages: list[str], **options) -> dict:
    """For each page: open the English page, click its switch, then the Chinese page's
    switch; where each click landed (relative to base). Scripts off and, over http, nothing
    but the pages themselves loaded: the link alone must work (the script only adds the
    section), and a page without its style sheets loads in a fraction of the time."""
    context = browser.new_context(java_script_enabled=False, **options)
    if base.startswith("http"):
        context.route("**/*", lambda route: route.continue_()
                      if route.request.resource_type == "document" else route.abort())
    page = context.new_page()
    out = {}
    try:
        for path in pages:
            page.goto(base + path, wait_until="commit")
            landed = []
            for _ in range(2):
                # the link is near the top of the page: click it as soon as it is there
                page.wait_for_selector("a.attnbook-lang-switch", state="attached")
                with page.expect_navigation(wait_until="commit"):
                    page.dispatch_event("a.attnbook-lang-switch", "click")  # a reader's click
                landed.append(page.url[len(base):] if page.url.startswith(base) else page.url)
            out[path] = landed
    finally:
        context.close()
    return out


# Chinese pages measured like the English ones (FIT at 1280 and 390 px, MathJax typeset): the
# glossary's table, and chapters 08 and 09, whose long inline formulas a phone must wrap
ZH_FIT = ("glossary.html", "chapters/08_multihead.html", "chapters/09_vectorised_heads.html")


def _run_zh(html, browser, base_url):
    started = time.perf_counter()
    # every Chinese page once, MathJax stubbed out (the math of each Chinese page is the
    # English page's, test_site.py checks it, and the English tour checks its typesetting)
    # (the page's own scripts off: what is checked here needs none, and the live figures,
    # which do, are visited next with them on)
    zh = Recorder(browser, base_url, viewport=DESKTOP, java_script_enabled=False)
    result = {"base_url": base_url, "pages": {}, "zh": {}}
    for path in zh_pages(html):
        zh.visit("zh/" + path, collect=False)
        data = zh.page.evaluate(ZH_COLLECT)
        data["probe_chars"] = zh.page.evaluate(FONT_PROBE)
        data["fonts"] = _fonts(zh.page)
        result["zh"][path] = data
        zh.note_resources()
    zh.close()
    live = Recorder(browser, base_url, stub="**/_static/mathjax/**", viewport=DESKTOP)
    for stem in sorted(live_chapters()):
        path = f"chapters/{stem}.html"
        live.visit("zh/" + path, collect=False)
        live.page.wait_for_function("window.attnbookLiveReady !== undefined", timeout=15000)
        live.page.evaluate("window.attnbookLiveReady")
        result["zh"][path]["live"] = live.page.eval_on_selector_all(
            ".attnbook-live", "els => els.map((e) => e.innerText)")
        result["zh"][path]["live_fonts"] = probe_fonts(live.page, ".attnbook-live-host",
                                                       LIVE_PROBES)
        live.note_resources()
    result["zh_record"] = {k: zh.record()[k] + live.record()[k] for k in zh.record()}
    live.close()
    rec = light_recorder(browser, base_url)
    rec.take_record()
    result["zh_fit"], result["zh_labels"] = {}, {}
    for path in ZH_FIT:
        rec.visit("zh/" + path)  # COLLECT: MathJax typeset, images and fonts in
        result["zh_fit"][path] = _fit(rec.page)["widths"]
        # the labels as the page's scripts leave them (sphinx-togglebutton adds its buttons then)
        result["zh_labels"][path] = rec.page.eval_on_selector_all(
            "[aria-label], [title], [placeholder]", "es => es.flatMap(e => ['aria-label', 'title', "
            "'placeholder'].map(a => e.getAttribute(a)).filter(v => v))")
    # the search, in Chinese
    result["zh_searches"] = {}
    for query, _ in ZH_SEARCHES:
        rec.visit("zh/search.html?q=" + query, collect=False)
        rec.page.wait_for_selector("#search-results .search-summary")
        result["zh_searches"][query] = rec.page.eval_on_selector_all(
            "#search-results ul.search li > a", "links => links.map(a => a.getAttribute('href'))")
    # the switch keeps the section: open the English chapter's section 3, click
    rec.visit("chapters/03_softmax.html", collect=False)
    sections = rec.page.eval_on_selector_all("article.bd-article section[id]",
                                             "s => s.map(x => x.id)")
    rec.page.evaluate("(id) => document.getElementById(id).scrollIntoView()", sections[3])
    result["zh_section_docked"] = rec.page.evaluate(
        "() => !!document.querySelector('.article-header-buttons a.attnbook-lang-switch')")
    # a reader's click on the switch, in the header bar, which stays on screen (Playwright's
    # own click would first scroll the page to bring the sticky bar "into view")
    with rec.page.expect_navigation(wait_until="load"):
        rec.page.evaluate("document.querySelector('a.attnbook-lang-switch').click()")
    rec.page.wait_for_load_state("load")
    result["zh_section"] = {"from": sections[3], "url": rec.page.url[len(base_url):],
                            "zh_sections": rec.page.eval_on_selector_all(
                                "article.bd-article section[id]", "s => s.map(x => x.id)")}
    result["http"] = rec.take_record()
    # both ways on every page, over http and from file:// (no other host either way)
    english = switch_pages(html)
    result["switch_http"] = _switch_round_trips(browser, base_url, english, viewport=PHONE)
    result["switch_file"] = _switch_round_trips(browser, html.resolve().as_uri() + "/", english,
                                                viewport=PHONE)
    result["seconds"] = time.perf_counter() - started
    return result


# --- page weight: what a first visit moves -------------------------------------------

WEIGHT_BUDGET = 900_000  # bytes gzip (level 6) that any page of either edition moves on a first visit


@functools.lru_cache(maxsize=None)
def gzip_size(path: str) -> int:
    """The file as a static server sends it compressed (gzip, level 6)."""
    import gzip

    return len(gzip.compress(Path(path).read_bytes(), compresslevel=6))


def _local_files(fetched, base: str) -> dict[str, set[str]]:
    """{page: the site's files it loaded (paths relative to the site, no query)}."""
    from urllib.parse import unquote, urlsplit

    files: dict[str, set[str]] = {}
    for where, url in fetched:
        if url.startswith(base):
            files.setdefault(where, set()).add(unquote(urlsplit(url).path).lstrip("/"))
    return files


def first_visit_weights(html: Path, english, chinese, base: str) -> dict[str, dict[str, int]]:
    """Every page's first visit: {page: {file: gzip bytes}}, each file it loads counted once.

    `english`: the light-mode tour's [page, url] records: each page's own resource timing
    lists every file it loaded, from the cache or not, so the set is the page's first
    visit. `chinese`: the Chinese tour's, whose pages were visited with their scripts off
    (the HTML, style sheets, the slices of the Chinese font, images); the files a page's
    scripts load (the theme's, MathJax and its fonts, live figures) are those of the same
    English page, which has the same math and figures (test_site.py), taken from zh/.
    """
    en, zh = _local_files(english, base), _local_files(chinese, base)
    pages = {}
    for page, files in en.items():
        if page.endswith(".html") and (html / page).is_file():
            pages[page] = set(files)
    for page, files in zh.items():
        twin = en.get(page[len("zh/"):], set())
        pages[page] = set(files) | {"zh/" + f for f in twin if f.startswith(("_static/", "_images/"))
                                    and not f.startswith("_static/fonts/")}
    out = {}
    for page, files in pages.items():
        sizes = {}
        for rel in files:
            path = html / rel
            if path.is_dir():
                path = path / "index.html"
            if path.is_file():
                sizes[rel] = gzip_size(str(path))
        out[page] = sizes
    return out


def cold_visit(html: Path, page: str) -> dict[str, int]:
    """One page opened in a new browser context (an empty cache), as a first-time reader
    opens it, until its math is typeset, its images and fonts are in and the network is
    idle: {file: gzip bytes} of every file it loaded. The tour's own records are an upper
    bound (in its one context a page's resource timing can also list fonts that earlier
    pages had loaded); this is the exact first visit, for pages near the budget."""
    with chromium(html) as (browser, base):
        rec = Recorder(browser, base, viewport=DESKTOP)
        try:
            rec.page.goto(base + page, wait_until="load")
            rec.page.wait_for_function("!document.querySelector('.math') || (window.MathJax &&"
                                       " MathJax.startup && MathJax.startup.promise)")
            rec.page.evaluate(COLLECT)
            rec.page.wait_for_load_state("networkidle")
            rec.where = page
            rec.note_resources()
        finally:
            rec.close()
    return first_visit_weights(html, rec.fetched, [], base)[page]


def merge(parts: dict) -> dict:
    """The four parts' records as one tour: every page, and each record's lists joined."""
    tour = {"pages": {}, "http": {"blocked": [], "failed": [], "console": [], "fetched": []},
            "seconds": {name: part["seconds"] for name, part in parts.items()}}
    for part in parts.values():
        tour["pages"].update(part["pages"])
        for key, values in part.get("http", {}).items():
            tour["http"][key] += values
        for key in ("searches", "dark", "file", "file_record", "nojs", "zh", "zh_searches", "zh_fit",
                    "zh_labels", "zh_section", "zh_section_docked", "switch_http", "switch_file"):
            if key in part:
                tour[key] = part[key]
    return tour
