"""`make pdf`: the built site printed to A4 PDFs by Debian's chromium, for teachers to print.

Both editions of the site, English (``_build/html``) and Chinese (``_build/html/zh``), into
``pdf/`` and ``pdf/zh/``. For each page of the book (in the order of _toc.yml; the Chinese
book has the same pages) and for each of two editions:

- ``pdf/student/<page>.pdf``: no solutions (the site's print style sheet,
  ``_static/print.css``, leaves them out of any printout by default);
- ``pdf/teacher/<page>.pdf``: every solution printed open (``<html class="attnbook-teacher">``);

and the whole book for each edition, ``pdf/book-student.pdf`` and ``pdf/book-teacher.pdf``:
a title page with a table of contents (each page's first page number, and a link to it),
then every page, numbered through at the top right; the PDF's bookmarks list the pages.
Each page's own PDF says "page N of M" at the foot. The Chinese PDFs (``pdf/zh/student/``,
``pdf/zh/teacher/``, ``pdf/zh/book-student.pdf``, ``pdf/zh/book-teacher.pdf``) are the same
in Chinese: every string this module adds (title page, contents, the foot of each page,
"第N页，共M页") is Chinese (``STRINGS``), set in the site's Chinese font.

The pages are served from the built site on 127.0.0.1 and every request to another host is
blocked: a page that asked for one would fail the run (so would a failed request, or math
that MathJax did not typeset). Chinese is set in the site's own web font (Noto Sans SC cut to
the site's characters, in unicode-range slices: _static/fonts/, attnbook/i18n/font.py), as on
screen, so no CJK font needs to be installed; before printing, every slice the page's text
needs is loaded and the page laid out again with it (a table laid out before its font arrived
would otherwise print its Chinese as nothing), and the PDF embeds the characters it uses.
Chromium draws its own header and footer without the page's web fonts (Chinese there would
print as nothing), so a Chinese page's foot is printed as a page of its own, in the site's
font, and laid over it (``Printer._stamp_feet``). Each page is loaded once and printed in
both editions (MathJax typesets it once). No LaTeX, no browser download: Playwright drives the
chromium binary (CHROMIUM=/path/to/chromium). At the end it prints what it wrote: how many
PDFs, their size, each book's pages, the time (the README and the instructor guide send the
reader there instead of typing numbers that change).

    python -m attnbook.handouts SITE_HTML OUTDIR [--pages chapters/06_masking ...]
                        [--editions student teacher] [--languages en zh] [--no-book]
"""
from __future__ import annotations

import argparse
import functools
import html
import http.server
import logging
import os
import re
import shutil
import sys
import threading
import time
from pathlib import Path

# pypdf warns "Object count N exceeds defined trailer size M" on chromium's PDFs, which it
# reads correctly: a lecturer took the lines for errors (the tests read every PDF back)
logging.getLogger("pypdf").setLevel(logging.ERROR)

ROOT = Path(__file__).resolve().parent.parent
FONT_FAMILY = "Attnbook Noto Sans SC"  # the site's Chinese font (_static/fonts/noto-sans-sc.css)
EDITIONS = ("student", "teacher")
TEACHERS_ONLY = {"instructor_guide"}  # pages left out of the student edition
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Every other host is unreachable: requests go to a proxy that does not exist.
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1;localhost"]
A4_MARGIN = {"top": "16mm", "bottom": "18mm", "left": "14mm", "right": "14mm"}
TITLE = "Attention, computed"
LANGUAGES = ("en", "zh")
# The contents' links, as chromium prints them (it drops links to anchors that do not exist);
# _link_contents turns each into a link to a page of the book. Nothing is ever fetched.
PAGE_LINK = "http://attnbook-page.invalid/"

__all__ = ["pages_in_order", "STRINGS", "Printer", "make_pdfs", "main"]


def _config_title(config: Path, default: str) -> str:
    """The book's title in its _config.yml (the Chinese one is generated from locale/zh)."""
    try:
        text = Path(config).read_text(encoding="utf-8")
    except OSError:
        return default
    m = re.search(r"^title:\s*(.+?)\s*$", text, re.M)
    return m[1].strip("'\"") if m else default


# Every string the handouts add to the printed pages, in each language ("page" is the foot of
# each page's own PDF; "book" the books' document title; "edition" names the two sets).
# The Chinese ones use only characters the site's font holds (tests/classroom/test_pdf.py).
STRINGS = {
    "en": {
        "title": TITLE,
        "contents": "Contents",
        "student": "Student handout: the exercises without their solutions.",
        "teacher": "Teacher's edition: every exercise with its solution.",
        "page": "page {n} of {m}",
        "book": "{title} ({edition})",
        "edition": {"student": "student", "teacher": "teacher"},
        "folder": "",  # pdf/
        "site": "",  # _build/html/
        "lang": "en",
    },
    "zh": {
        "title": _config_title(ROOT / "zh" / "_config.yml", "动手算注意力"),
        "contents": "目录",
        "student": "学生讲义：只有练习，没有解答。",
        "teacher": "教师版：每道练习都附解答。",
        "page": "第{n}页，共{m}页",
        "book": "{title}（{edition}）",
        "edition": {"student": "学生版", "teacher": "教师版"},
        "folder": "zh",  # pdf/zh/
        "site": "zh/",  # _build/html/zh/
        "lang": "zh-CN",
    },
}


def pages_in_order(toc=ROOT / "_toc.yml") -> list[str]:
    """The book's pages, as in its table of contents: 'intro', 'glossary', 'chapters/01_...'."""
    text = Path(toc).read_text(encoding="utf-8")
    root = re.search(r"^root:\s*(\S+)", text, re.M)
    return ([root[1]] if root else []) + re.findall(r"file:\s*(\S+)", text)


class _Handler(http.server.SimpleHTTPRequestHandler):
    """The built site."""

    def log_message(self, *args):
        pass


# The Chinese slices a page's text needs, loaded, and the page laid out again with them
# (in PREPARE, and alone in FONTS).
_LOAD_FONTS = r"""  const cjk = (document.body.textContent || "").match(/[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]+/g) || [];
  if (cjk.length) {
    const loaded = await document.fonts.load(`16px "${family}"`, cjk.join(""));
    if (!loaded.length) throw new Error(`the font ${family} did not load for ${cjk.join("").slice(0, 20)}`);
  }
  await document.fonts.ready;
  document.body.style.display = "none";
  void document.body.offsetHeight;
  document.body.style.display = "";
  void document.body.offsetHeight;
"""

# Runs in the page before printing: the edition, the web font, every image and the math ready.
PREPARE = r"""
async ([teacher, family]) => {
  document.documentElement.classList.toggle("attnbook-teacher", teacher);
  // Open every collapsed box ("In the source", and in the teacher's edition the solutions).
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  if (window.attnbookLiveReady) await window.attnbookLiveReady;
  await Promise.all(Array.from(document.images).map((img) => img.complete ? null :
    new Promise((ok) => { img.onload = ok; img.onerror = ok; })));
  // The glyphs of Chinese text are fetched (the font's unicode-range slices) before printing,
  // every slice the page's text needs (also text the screen hid: the solutions, the printed
  // title); then the page is laid out again, so that a table measured before its font
  // arrived is drawn with it.
  /* LOAD_FONTS */
  const article = document.querySelector("article") || document.body;
  // The page's title as plain text (math as its TeX, lightly simplified), for the footer and
  // the contents; and typeset in the theme's printed title, which shows the raw TeX.
  const tex = new Map();
  if (window.MathJax && MathJax.startup && MathJax.startup.document)
    for (const item of MathJax.startup.document.math) tex.set(item.typesetRoot, item.math);
  const plain = (t) => t.replace(/\\sqrt\{([^}]*)\}/g, "\u221a$1").replace(/\\(left|right)/g, "")
    .replace(/\\([a-zA-Z]+)/g, "$1").replace(/[{}]/g, "");
  const text = (node) => {
    if (node.nodeType === Node.TEXT_NODE) return node.textContent;
    if (node.nodeType !== Node.ELEMENT_NODE || node.classList.contains("headerlink")) return "";
    if (node.tagName.toLowerCase() === "mjx-container") return plain(tex.get(node) || "");
    return Array.from(node.childNodes).map(text).join("");
  };
  const h1 = article.querySelector("h1");
  const printed = document.querySelector("#jb-print-docs-body h1");
  if (h1 && printed) {
    const copy = h1.cloneNode(true);
    copy.querySelectorAll(".headerlink").forEach((a) => a.remove());
    printed.innerHTML = copy.innerHTML;
  }
  const raw = (article.innerText.match(/\$[^$\n]{1,60}\$|\\\(|\\\[/g) || []).length;
  // Anything wider than the paper's text column would be cut at the right margin.
  const column = article.getBoundingClientRect().right;
  const overflow = [];
  article.querySelectorAll("pre, table, img, .cell_output, div.highlight, mjx-container, svg")
    .forEach((el) => {
      if (!el.offsetParent && el.tagName.toLowerCase() !== "svg") return;   // not printed
      const r = el.getBoundingClientRect();
      if (r.width === 0) return;
      const scrolls = el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible";
      if (r.right > column + 1 || scrolls)
        overflow.push(el.tagName.toLowerCase() + ": " + (el.textContent || "").trim().slice(0, 60));
    });
  const shown = (sel) => Array.from(document.querySelectorAll(sel)).filter((el) => el.offsetParent).length;
  return {
    overflow: overflow,
    showSource: (article.innerText.match(/Show code cell (source|content|output)/g) || []).length,
    solutionsShown: shown(".solution"),
    title: (h1 ? text(h1) : document.title).trim(),
    math: document.querySelectorAll("mjx-container").length,
    mathErrors: document.querySelectorAll("mjx-merror").length,
    rawMath: raw,
    solutions: document.querySelectorAll(".solution").length,
  };
}
"""

# Runs in a small document of this module's (title page, page numbers, a Chinese foot) before
# printing: the site's Chinese font loaded for its text, then the document laid out again.
FONTS = r"""
async (family) => {
  /* LOAD_FONTS */
  return true;
}
"""
PREPARE = PREPARE.replace("  /* LOAD_FONTS */\n", _LOAD_FONTS)
FONTS = FONTS.replace("  /* LOAD_FONTS */\n", _LOAD_FONTS)

# The foot of each page of an English page's PDF, drawn by chromium (its header and footer
# cannot use the page's web fonts: a Chinese page's foot is stamped instead, see _feet).
FOOTER = """<div style="font-size:8px; width:100%; margin:0 14mm; display:flex;
 justify-content:space-between; color:#555; font-family:sans-serif;">
<span>{title} &middot; {page}</span>
<span>page <span class="pageNumber"></span> of <span class="totalPages"></span></span></div>"""


class Printer:
    """One chromium, one local server for the site; ``print_page`` writes one PDF."""

    def __init__(self, site: Path, browser=None):
        """``browser``: a Playwright chromium already launched with LAUNCH_ARGS (the tests'
        shared one); by default one is launched here and closed with the printer."""

        self.site = Path(site).resolve()
        handler = functools.partial(_Handler, directory=str(self.site))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self._playwright = None
        if browser is None:
            if not Path(CHROMIUM).exists():
                self.close_server()
                raise SystemExit(f"make pdf needs chromium ({CHROMIUM} not found): apt-get "
                                 "install chromium, or set CHROMIUM=/path/to/chromium")
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            browser = self._playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        self.browser = browser
        # The viewport is as wide as the A4 text column (210 - 2 x 14 mm = 688 CSS px), so
        # what is measured before printing (see PREPARE) is laid out as on paper.
        self.context = self.browser.new_context(viewport={"width": 688, "height": 1000})
        self.context.set_default_timeout(60_000)
        self.problems: list[str] = []   # failed requests, requests to other hosts
        self.requests: list[str] = []   # every URL the pages asked for

    def close_server(self):
        self.server.shutdown()
        self.server.server_close()

    def close(self):
        try:
            self.context.close()
            if self._playwright is not None:
                self.browser.close()
        finally:
            if self._playwright is not None:
                self._playwright.stop()
            self.close_server()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _watch(self, page, where):
        def failed(request):
            if request.url.startswith(("data:", "blob:", "about:")):
                return
            if not request.url.startswith(self.base):
                self.problems.append(f"{where}: request to another host: {request.url}")
            elif request.failure != "net::ERR_ABORTED":
                self.problems.append(f"{where}: {request.url} failed ({request.failure})")

        def response(resp):
            if resp.status >= 400 and not resp.url.endswith("favicon.ico"):
                self.problems.append(f"{where}: {resp.url} answered {resp.status}")

        page.on("request", lambda r: self.requests.append(r.url))
        page.on("requestfailed", failed)
        page.on("response", response)

    def print_page(self, name: str, target: Path, edition: str = "student",
                   lang: str = "en") -> dict:
        """Print the site's page `name` (e.g. 'chapters/06_masking') to `target`; `lang` 'zh':
        the Chinese edition's page (zh/chapters/06_masking.html), with a Chinese foot."""
        return self.print_editions(name, {edition: target}, lang)[edition]

    def print_editions(self, name: str, targets: dict, lang: str = "en") -> dict:
        """Load the page `name` once and print it once per edition: {edition: target}.
        Returns {edition: what PREPARE measured}."""
        strings = STRINGS[lang]
        where = strings["site"] + name
        page = self.context.new_page()
        self._watch(page, where)
        infos = {}
        try:
            page.goto(self.base + where + ".html", wait_until="load")
            page.emulate_media(media="print")
            for edition, target in targets.items():
                info = infos[edition] = page.evaluate(PREPARE, [edition == "teacher", FONT_FAMILY])
                self._check(where, edition, info)
                label = html.escape(info["title"])
                target = Path(target)
                target.parent.mkdir(parents=True, exist_ok=True)
                if lang == "en":
                    foot = dict(display_header_footer=True, header_template="<span></span>",
                                footer_template=FOOTER.format(title=TITLE, page=label))
                else:  # chromium's footer has no web font: the foot is stamped on (_feet)
                    foot = dict(display_header_footer=False)
                page.pdf(path=str(target), format="A4", margin=A4_MARGIN, print_background=True,
                         outline=True, tagged=True, **foot)
        finally:
            page.close()
        if lang != "en":
            for edition, target in targets.items():
                self._stamp_feet(Path(target), infos[edition]["title"], lang)
        return infos

    def _check(self, where, edition, info):
        for what in info["overflow"]:
            self.problems.append(f"{where}: wider than the paper, cut at the margin: {what}")
        if info["showSource"]:
            self.problems.append(f"{where}: {info['showSource']} 'Show code cell' bars printed")
        wanted = info["solutions"] if edition == "teacher" else 0
        if info["solutionsShown"] != wanted:
            self.problems.append(f"{where} ({edition}): {info['solutionsShown']} of "
                                 f"{info['solutions']} solutions printed")
        if info["mathErrors"] or info["rawMath"]:
            self.problems.append(f"{where}: math not typeset ({info['mathErrors']} errors, "
                                 f"{info['rawMath']} raw TeX delimiters)")

    def _stamp_feet(self, target: Path, title: str, lang: str):
        """Lay each page's foot (the book, the page's title, page N of M, in `lang`) over the
        pages of `target`: printed by chromium as a document of its own, in the site's font."""
        from pypdf import PdfReader, PdfWriter

        reader = PdfReader(str(target))
        feet_pdf = target.with_name(target.stem + ".feet.pdf")
        self.html_to_pdf(_feet(title, len(reader.pages), lang), feet_pdf)
        feet = PdfReader(str(feet_pdf))
        writer = PdfWriter(clone_from=reader)
        for page, foot in zip(writer.pages, feet.pages):
            page.merge_page(foot)
            page.compress_content_streams()  # merging decompressed them
        writer.compress_identical_objects()
        stamped = target.with_name(target.stem + ".stamped.pdf")
        with open(stamped, "wb") as out:
            writer.write(out)
        os.replace(stamped, target)
        feet_pdf.unlink()

    def html_to_pdf(self, document: str, target: Path, **options):
        """A small HTML document (the title page, the page-number overlay) printed to PDF."""
        page = self.context.new_page()
        self._watch(page, target.name)
        try:
            page.route(self.base + "_attnbook_print_doc.html", lambda route: route.fulfill(
                status=200, body=document, content_type="text/html; charset=utf-8"))
            page.goto(self.base + "_attnbook_print_doc.html")
            page.evaluate(FONTS, FONT_FAMILY)
            page.pdf(path=str(target), format="A4", print_background=True, **options)
        finally:
            page.close()


# The small documents below are served from the site's root: they name its Chinese font.
_HEAD = """<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8">
<link rel="stylesheet" href="_static/fonts/noto-sans-sc.css"><style>{style}</style></head>"""
_FONT = f'"{FONT_FAMILY}", system-ui, sans-serif'


def _title_page(entries, edition: str, lang: str = "en") -> str:
    strings = STRINGS[lang]
    rows = "\n".join(
        f'<tr><td><a href="{PAGE_LINK}{start}">{html.escape(title)}</a></td><td class="n">{start}</td></tr>'
        for title, start in entries)
    style = f"""
    @page {{ size: A4; margin: 20mm 18mm; }}
    body {{ font-family: {_FONT}; color: #222; }}
    h1 {{ font-size: 28pt; margin: 0 0 4pt 0; }} p.what {{ color: #555; margin: 0 0 16pt 0; }}
    h2 {{ font-size: 14pt; border-bottom: 1px solid #999; padding-bottom: 3pt; }}
    table {{ width: 100%; border-collapse: collapse; font-size: 10.5pt; }}
    td {{ padding: 2.5pt 0; border-bottom: 1px dotted #bbb; }} td.n {{ text-align: right; width: 3em; }}
    a {{ color: inherit; text-decoration: none; }}"""
    return (_HEAD.format(lang=strings["lang"], style=style)
            + f"""<body><h1>{html.escape(strings["title"])}</h1>
    <p class="what">{html.escape(strings[edition])}</p>
    <h2>{html.escape(strings["contents"])}</h2><table>{rows}</table></body></html>""")


def _numbers_overlay(first: int, count: int) -> str:
    """`count` A4 pages, each with its book page number (from `first`) at the top right."""
    pages = "".join(f'<div class="p"><span>{first + i}</span></div>' for i in range(count))
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><style>
    @page {{ size: A4; margin: 0; }} body {{ margin: 0; }}
    .p {{ width: 210mm; height: 297mm; position: relative; break-after: page; }}
    .p span {{ position: absolute; top: 7mm; right: 14mm; font: 9px sans-serif; color: #555; }}
    </style></head><body>{pages}</body></html>"""


def _feet(title: str, count: int, lang: str) -> str:
    """`count` A4 pages, each with the foot of a page's own PDF (as FOOTER draws it in English):
    the book and the page's title at the left, page N of M at the right, in the site's font."""
    strings = STRINGS[lang]
    left = html.escape(f"{strings['title']} · {title}")
    pages = "".join(
        f'<div class="p"><div class="f"><span>{left}</span>'
        f'<span>{html.escape(strings["page"].format(n=k, m=count))}</span></div></div>'
        for k in range(1, count + 1))
    style = f"""
    @page {{ size: A4; margin: 0; }} body {{ margin: 0; }}
    .p {{ width: 210mm; height: 297mm; position: relative; break-after: page; }}
    .f {{ position: absolute; left: 14mm; right: 14mm; bottom: 4.6mm; display: flex; gap: 4mm;
          justify-content: space-between; font: 8px {_FONT}; color: #555; white-space: nowrap; }}
    .f span:first-child {{ overflow: hidden; text-overflow: ellipsis; }}"""
    return _HEAD.format(lang=strings["lang"], style=style) + f"<body>{pages}</body></html>"


def _book(printer: Printer, parts, edition: str, target: Path, workdir: Path, lang: str = "en"):
    """Title page + contents, then every page's PDF, numbered through, with bookmarks."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import Fit

    readers = [(title, PdfReader(str(path))) for title, path in parts]
    # The title page is one page as long as the contents fit (about 45 entries); measure it.
    contents_pages = 1
    for _ in range(3):
        entries, start = [], contents_pages + 1
        for title, reader in readers:
            entries.append((title, start))
            start += len(reader.pages)
        title_pdf = workdir / f"title-{edition}.pdf"
        printer.html_to_pdf(_title_page(entries, edition, lang), title_pdf)
        measured = len(PdfReader(str(title_pdf)).pages)
        if measured == contents_pages:
            break
        contents_pages = measured
    body_pages = start - 1 - contents_pages
    overlay_pdf = workdir / f"numbers-{edition}.pdf"
    printer.html_to_pdf(_numbers_overlay(contents_pages + 1, body_pages), overlay_pdf)
    overlay = PdfReader(str(overlay_pdf))

    writer = PdfWriter()
    for page in PdfReader(str(title_pdf)).pages:
        writer.add_page(page)
    k = 0
    for title, reader in readers:
        for page in reader.pages:
            added = writer.add_page(page)
            added.merge_page(overlay.pages[k])
            added.compress_content_streams()  # merging decompressed them
            k += 1
    for title, first in entries:  # bookmarks, once their pages are in
        writer.add_outline_item(title=title, page_number=first - 1, fit=Fit.fit())
    # Links from the contents to each page's first page.
    _link_contents(writer, title_pdf, entries)
    strings = STRINGS[lang]
    writer.add_metadata({"/Title": strings["book"].format(title=strings["title"],
                                                          edition=strings["edition"][edition])})
    writer.compress_identical_objects()  # the fonts and images each page repeats
    with open(target, "wb") as out:
        writer.write(out)
    return start - 1


def _link_contents(writer, title_pdf, entries):
    """Turn each line of the contents into a link to its page (see PAGE_LINK)."""
    from pypdf.annotations import Link
    from pypdf.generic import NameObject, ArrayObject

    starts = {start for _, start in entries}
    for index, page in enumerate(writer.pages):
        annots = page.get("/Annots")
        if not annots:
            if index > 5:  # past the contents
                break
            continue
        keep = ArrayObject()
        for ref in annots:
            annot = ref.get_object()
            uri = annot.get("/A", {}).get("/URI", "") if annot.get("/A") else ""
            m = re.fullmatch(re.escape(PAGE_LINK) + r"(\d+)", str(uri))
            if m and int(m[1]) in starts:
                rect = [float(x) for x in annot["/Rect"]]
                writer.add_annotation(index, Link(rect=rect, target_page_index=int(m[1]) - 1))
            else:
                keep.append(ref)
        page[NameObject("/Annots")] = keep


def make_pdfs(site, outdir, pages=None, editions=EDITIONS, book=True, log=print,
              languages=LANGUAGES) -> dict:
    """Write the PDFs (English into `outdir`, Chinese into `outdir`/zh); returns {path: number
    of pages}. Raises SystemExit on any problem."""
    from pypdf import PdfReader

    site, outdir = Path(site), Path(outdir)
    for lang in languages:
        if not (site / STRINGS[lang]["site"] / "index.html").exists():
            raise SystemExit(f"No built site in {site / STRINGS[lang]['site']}: "
                             "run `make book` first")
    pages = pages or pages_in_order()
    written: dict[Path, int] = {}
    books: dict[Path, int] = {}
    started = time.time()
    with Printer(site) as printer:
        for lang in languages:
            root = outdir / STRINGS[lang]["folder"]
            parts = {edition: [] for edition in editions}
            for name in pages:
                stem = name.replace("/", "-").replace("chapters-", "")
                targets = {edition: root / edition / f"{stem}.pdf" for edition in editions
                           if not (edition == "student" and name in TEACHERS_ONLY)}
                if not targets:
                    continue
                infos = printer.print_editions(name, targets, lang)
                for edition, target in targets.items():
                    n = written[target] = len(PdfReader(str(target)).pages)
                    parts[edition].append((infos[edition]["title"], target))
                    log(f"  {target} ({n} pages, {infos[edition]['math']} formulas)")
            if book:
                work = root / ".work"
                work.mkdir(parents=True, exist_ok=True)
                for edition in editions:
                    target = root / f"book-{edition}.pdf"
                    written[target] = books[target] = _book(printer, parts[edition], edition,
                                                            target, work, lang)
                    log(f"  {target} ({written[target]} pages)")
                shutil.rmtree(work)
        if printer.problems:
            raise SystemExit("make pdf: " + "\n  ".join(["problems:"] + printer.problems))
    for line in summary(outdir, written, books, time.time() - started):
        log(line)
    return {str(p): n for p, n in written.items()}


def summary(outdir: Path, written: dict, books: dict, seconds: float) -> list[str]:
    """What `make pdf` wrote, counted: the README and the instructor guide point here instead
    of typing numbers that change with every chapter."""
    mb = lambda paths: sum(Path(p).stat().st_size for p in paths) / 1e6  # noqa: E731
    lines = [f"make pdf wrote {len(written)} PDFs into {outdir}/, {mb(written):.1f} MB, "
             f"in {seconds / 60:.1f} min:"]
    folders = sorted({Path(p).parent for p in written if Path(p) not in books})
    for folder in folders:
        files = [p for p in written if Path(p).parent == folder and Path(p) not in books]
        printed = sum(written[p] for p in files)
        lines.append(f"  {folder}/: {len(files)} pages of the book, {printed} printed pages, "
                     f"{mb(files):.1f} MB")
    for path, n in books.items():
        lines.append(f"  {path}: {n} pages, {mb([path]):.1f} MB")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", help="the built site, e.g. _build/html (Chinese: its zh/)")
    parser.add_argument("outdir")
    parser.add_argument("--pages", nargs="+", help="pages to print (default: the whole book)")
    parser.add_argument("--editions", nargs="+", choices=EDITIONS, default=list(EDITIONS))
    parser.add_argument("--languages", nargs="+", choices=LANGUAGES, default=list(LANGUAGES),
                        help="en: pdf/, zh: pdf/zh/ (default: both)")
    parser.add_argument("--no-book", action="store_true", help="only one PDF per page")
    args = parser.parse_args(argv)
    make_pdfs(args.site, args.outdir, args.pages, args.editions, not args.no_book,
              languages=args.languages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
