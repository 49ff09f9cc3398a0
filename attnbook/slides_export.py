"""`make slides`: every chapter as a reveal.js deck that works with no internet.

nbconvert's slides exporter writes decks that load reveal.js, require.js, jQuery,
MathJax 2 and mermaid from CDNs; offline, a projector shows a blank page. Here each
deck loads them from ``assets/`` beside it, copied from ``node_modules/`` (installed
by ``npm ci`` from the book's package.json / package-lock.json: reveal.js 4.0.2, the
version nbconvert's template is written for, MathJax 2.7.9, require.js, jQuery).
Only the files a deck uses are copied. The live figures come alive with the site's
own loader (``_static/live-figures.js``): no kernel, no widget manager from a CDN.

The notebooks' markdown is MyST; nbconvert renders plain Markdown. Before export,
each directive (exercise, admonition, figure, math, ...) becomes HTML that shows
what it is (a titled box, a dropdown, a figure with its caption), numbered as on
the site; an exercise also shows its number within the chapter, the one JupyterLab
shows in the student kit ("Exercise 16 (chapter exercise 2)"). A figure a code cell
draws carries the cell's alt text (its ``mystnb`` metadata, translated in a Chinese
notebook), not nbconvert's English placeholder. Solutions are left out of a deck (as RISE leaves them out: the chapters'
slide metadata skips them) unless ``--solutions`` is given: then each comes right
after its exercise, on a sub-slide of its own (reached with the down arrow).

    python -m attnbook.slides_export OUTDIR NOTEBOOK... [--solutions] [--assets node_modules]
"""
from __future__ import annotations

import argparse
import base64
import copy
import html
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# What a deck loads, relative to the deck (and where it comes from, under node_modules/).
ASSETS = "assets"
ASSET_FILES = {
    "reveal.js": ["LICENSE", "dist/reveal.css", "dist/reveal.js", "dist/theme/white.css",
                  "dist/theme/fonts/source-sans-pro", "plugin/notes/notes.js"],
    "mathjax": ["LICENSE", "MathJax.js", "config/TeX-AMS_CHTML-full.js", "config/Safe.js",
                "extensions/TeX", "extensions/Safe.js", "extensions/MathEvents.js",
                "extensions/MathMenu.js", "extensions/MathZoom.js", "extensions/AssistiveMML.js",
                "extensions/a11y", "extensions/CHTML-preview.js", "extensions/fast-preview.js",
                "extensions/toMathML.js", "jax/input/TeX", "jax/output/CommonHTML",
                "jax/element/mml", "fonts/HTML-CSS/TeX/woff"],
    "requirejs": ["require.js"],
    "jquery": ["LICENSE.txt", "dist/jquery.min.js"],
}
URLS = {
    "reveal_url_prefix": f"{ASSETS}/reveal.js",
    "mathjax_url": f"{ASSETS}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
    "require_js_url": f"{ASSETS}/requirejs/require.js",
    "jquery_url": f"{ASSETS}/jquery/dist/jquery.min.js",
}
TEMPLATE_DIR = Path(__file__).resolve().parent / "slides_template"

__all__ = ["myst_to_html", "prepare_deck", "copy_assets", "export", "main"]


# --- MyST directives as HTML that nbconvert's Markdown renderer passes through ---

_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|:{3,})\s*\{(?P<name>[\w-]+)\}[ \t]*(?P<arg>.*)$")
_OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*)$")
_ADMONITIONS = {"note", "tip", "hint", "important", "warning", "caution", "attention", "danger",
                "error", "seealso"}


def _inline(text: str) -> str:
    """A title's Markdown (code spans, emphasis) as HTML; math is left for MathJax."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
        else:
            part = html.escape(part, quote=False)
            part = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)
            part = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", part)
            out.append(part)
    return "".join(out)


def _closing(lines, start, fence):
    """Index of the line closing a directive opened with `fence` (nested directives skipped)."""
    i = start
    while i < len(lines):
        opener = _OPEN.match(lines[i])
        if opener:
            i = _closing(lines, i + 1, opener["fence"]) + 1
            continue
        stripped = lines[i].strip()
        if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
            return i
        i += 1
    return len(lines)  # unclosed: to the end, as MyST does


class _Numbers:
    """Exercise numbers: the site's (book-wide, as sphinx-exercise counts) and the chapter's own
    (1, 2, 3: what JupyterLab shows in a notebook of the student kit)."""

    def __init__(self, first_exercise: int = 1, lang: str = "en"):
        self.exercise = first_exercise - 1
        self.in_chapter = 0
        self.labels: dict[str, int] = {}
        self.lang = lang if lang in LABELS else "en"

    def label(self, key: str, **kw) -> str:
        return LABELS[self.lang][key].format(**kw)


# The words a deck adds itself, in the deck's language (a notebook of the Chinese edition,
# zh/, says "zh" in its metadata: attnbook.language).
LABELS = {
    "en": {"exercise": "Exercise {n} (chapter exercise {k})", "solution_to": "Solution to Exercise {n}",
           "solution": "Solution", "note": "Note", "warning": "Warning", "tip": "Tip",
           "hint": "Hint", "important": "Important", "caution": "Caution", "seealso": "See also",
           "attention": "Attention", "danger": "Danger", "error": "Error"},
    "zh": {"exercise": "练习 {n}（本章第 {k} 题）", "solution_to": "练习 {n} 的解答", "solution": "解答",
           "note": "注意", "warning": "警告", "tip": "提示", "hint": "提示", "important": "重要",
           "caution": "小心", "seealso": "另请参阅", "attention": "注意", "danger": "危险",
           "error": "错误"},
}


def _box(kind, classes, title, body, dropdown=False):
    """A titled box around Markdown. nbconvert balances the tags of each HTML block it
    renders, so a box cannot open in one block and close in another: it is marked by two
    comments here, and ``_open_boxes`` turns them into tags in the finished deck."""
    cls = " ".join(["attnbook-directive", kind, *classes])
    tag = "details" if dropdown else "div"
    title = title.replace("--", "&#45;&#45;")
    return f"<!--attnbook-open {tag} {cls}|{title}-->\n\n{body}\n\n<!--attnbook-close {tag}-->"


_MARK = re.compile(r"<!--attnbook-(?:open (\w+) ([^|]*)\|(.*?)|close (\w+))-->", re.S)


def _open_boxes(page: str) -> str:
    def tags(m):
        if m[4]:
            return f"</{m[4]}>"
        head = "summary" if m[1] == "details" else "p"
        return f'<{m[1]} class="{m[2]}"><{head} class="title">{m[3]}</{head}>'
    return _MARK.sub(tags, page)


def _directive(name, arg, options, body, numbers: _Numbers):
    classes = options.get("class", "").split()
    dropdown = "dropdown" in classes
    classes = [c for c in classes if c != "dropdown"]
    if name == "exercise":
        numbers.exercise += 1
        numbers.in_chapter += 1
        if "label" in options:
            numbers.labels[options["label"]] = numbers.exercise
        title = (numbers.label("exercise", n=numbers.exercise, k=numbers.in_chapter)
                 + (f": {_inline(arg)}" if arg else ""))
        return _box("exercise", classes, title, body)
    if name in ("solution", "solution-start"):
        target = numbers.labels.get(arg.strip())
        title = numbers.label("solution_to", n=target) if target else numbers.label("solution")
        if name == "solution-start":  # its body runs on over the next cells: no box
            return f'<p class="attnbook-directive solution title">{title}</p>\n\n{body}'
        return _box("solution", classes, title, body, dropdown)
    if name == "solution-end":
        return body
    if name == "admonition":
        return _box("admonition", classes, _inline(arg) or numbers.label("note"), body, dropdown)
    if name in _ADMONITIONS:
        title = _inline(arg) or LABELS[numbers.lang].get(name, name.capitalize())
        return _box("admonition", [name, *classes], title, body, dropdown)
    if name in ("figure", "image"):
        alt = options.get("alt", "")
        image = f"![{alt}]({arg.strip()})"
        caption = f"<figcaption>\n\n{body}\n\n</figcaption>\n" if body.strip() else ""
        return f'<figure class="attnbook-directive">\n\n{image}\n\n{caption}</figure>'
    if name == "math":
        return f"$$\n{body.strip()}\n$$"
    if name in ("code-block", "code", "code-cell"):
        return f"```{arg.strip()}\n{body}\n```"
    if name in ("glue", "glue:figure", "toctree", "bibliography"):
        return ""
    return _box(name, classes, _inline(arg) or name.capitalize(), body, dropdown)


def myst_to_html(text: str, numbers: _Numbers | None = None) -> str:
    """Markdown with MyST directives, labels and roles -> Markdown + HTML nbconvert renders."""
    numbers = numbers or _Numbers()
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        end = _closing(lines, i + 1, m["fence"])
        j, options = i + 1, {}
        while j < end and _OPTION.match(lines[j]):
            o = _OPTION.match(lines[j])
            options[o["key"]] = o["value"].strip()
            j += 1
        body = "\n".join(lines[j:end])
        if m["name"] not in ("code-block", "code", "code-cell", "math"):
            body = myst_to_html(body, numbers)
        out.append(_directive(m["name"], m["arg"].strip(), options, body, numbers))
        i = end + 1
    text = "\n".join(out)
    text = re.sub(r"^\([\w.:-]+\)=\s*$", "", text, flags=re.M)        # (label)= targets
    text = re.sub(r"\{math\}`([^`]*)`", r"$\1$", text)                 # {math}`x`
    text = re.sub(r"\{(?:term|ref|numref|doc|eq|abbr)\}`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)
    # Links: another chapter's deck is beside this one; the site's other pages are not here.
    text = re.sub(r"\]\(([\w.-]+)\.ipynb((?:#[^)]*)?)\)", r"](\1.slides.html\2)", text)
    text = re.sub(r"(?<!!)\[([^\]]+)\]\((?!https?:|#)[^)]*\.md(?:#[^)]*)?\)", r"\1", text)
    return text


_SOLUTION = re.compile(r"^ {0,3}(`{3,}|:{3,})\s*\{solution-(start|end)\}", re.M)


def _exercises_before(notebook: Path) -> int:
    """How many exercises the site numbers before this chapter (sphinx-exercise counts book-wide)."""
    order = []
    toc = ROOT / "_toc.yml"
    if toc.exists():
        order = re.findall(r"file:\s*(\S+)", toc.read_text())
    try:
        key = notebook.resolve().relative_to(ROOT).with_suffix("").as_posix()
    except ValueError:
        return 0
    if key.startswith("zh/"):  # the Chinese edition numbers its exercises as the English
        key = key[len("zh/"):]
    if key not in order:
        return 0
    count = 0
    for name in order[: order.index(key)]:
        for suffix in (".ipynb", ".md"):
            path = ROOT / (name + suffix)
            if path.exists():
                text = path.read_text(encoding="utf-8")
                if suffix == ".ipynb":
                    text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                                     if c["cell_type"] == "markdown")
                count += len(re.findall(r"^ {0,3}(?:`{3,}|:{3,})\s*\{exercise\}", text, re.M))
    return count


_IMAGE = re.compile(r"(!\[(?:[^\[\]]|\[[^\[\]]*\])*\]\()([^)\s]+)(\))")  # alt may hold [a, b]
_MIME = {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
         ".gif": "image/gif"}


def _embed_images(text: str, folder: Path | None) -> str:
    """Markdown images of local files as data: URLs (the deck is not beside figures/;
    nbconvert's own embedding leaves SVG files out)."""
    if folder is None:
        return text

    def embed(m):
        path = (folder / m[2]).resolve()
        mime = _MIME.get(path.suffix.lower())
        if re.match(r"[a-z]+:", m[2]) or mime is None or not path.is_file():
            return m[0]
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{m[1]}data:{mime};base64,{data}{m[3]}"
    return _IMAGE.sub(embed, text)


def language(nb) -> str:
    """"zh" for a notebook of the Chinese edition (generated into zh/), else "en"."""
    return (nb.get("metadata", {}).get("attnbook", {}) or {}).get("language", "en")


# Every deck draws its Chinese (a Chinese deck's text, a live figure's labels and buttons, a
# table, a source's Chinese title in an English deck) in the book's own web font: Noto Sans SC
# cut to the site's characters, in unicode-range slices (_static/fonts/, attnbook/i18n/font.py),
# copied to assets/fonts/: a classroom machine may have no Chinese font. The family has Chinese
# characters only, so Latin text keeps the deck's fonts.
FONT_HEAD = """<link rel="stylesheet" href="assets/fonts/noto-sans-sc.css">
<style>
.reveal, .reveal h1, .reveal h2, .reveal h3, .reveal h4, .reveal p, .reveal li, .reveal td,
.reveal th, .reveal caption, .reveal summary, .reveal figcaption, .reveal button,
.reveal .attnbook-live, .reveal .attnbook-live button, .reveal .attnbook-live-svg text {
  font-family: "Attnbook Noto Sans SC", "Source Sans Pro", Helvetica, sans-serif; }
.reveal pre, .reveal code { font-family: monospace, "Attnbook Noto Sans SC"; }
</style>
"""

# Chinese has no italics (Noto Sans SC has none): a slanted Chinese glyph is the browser's
# fake. As on the Chinese site (_static/attnbook.css), emphasis is upright and a little bolder
# (a Latin word in it keeps an italic face where the font has one).
ZH_HEAD = """<style>
html[lang="zh-CN"] .reveal em { font-synthesis-style: none; font-weight: 600; }
</style>
"""

# A figure drawn by a code cell with no alt text in its metadata (a gap to fill in the chapter):
# say so in the deck's language rather than nbconvert's English sentence.
NO_ALT = {"en": "A figure drawn by the code above (no description yet).",
          "zh": "上面的代码画出的图（尚无文字描述）。"}


def _image_alt(cell) -> str | None:
    """The alt text the site gives a code cell's figure: myst-nb's ``mystnb.image.alt`` (or
    ``mystnb.figure.alt``) in the cell's metadata."""
    meta = cell.get("metadata", {}).get("mystnb", {}) or {}
    for key in ("image", "figure"):
        alt = (meta.get(key) or {}).get("alt")
        if alt:
            return alt
    return None


def _alt_texts(nb, lang: str) -> None:
    """Give every PNG or JPEG output its cell's alt text, in output.metadata[mime]["alt"] (the
    deck's template writes it into the <img>). Other outputs (an inline SVG in text/html with
    its own aria-label) are left as they are."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        alt = _image_alt(cell) or NO_ALT.get(lang, NO_ALT["en"])
        for output in cell.get("outputs", []):
            for mime in ("image/png", "image/jpeg"):
                if mime in output.get("data", {}):
                    output.setdefault("metadata", {}).setdefault(mime, {})["alt"] = alt


def _localise(page: str, lang: str) -> str:
    head = FONT_HEAD
    if lang == "zh":
        page = re.sub(r"<html lang=\"[^\"]*\"", '<html lang="zh-CN"', page, count=1)
        head += ZH_HEAD
    return page.replace("</head>", head + "</head>", 1)


def prepare_deck(nb, first_exercise: int = 1, solutions: bool = False, folder=None):
    """A copy of the notebook ready for nbconvert: MyST as HTML, solutions out (or on sub-slides);
    ``folder``: the notebook's folder, to embed its images."""
    nb = copy.deepcopy(nb)
    numbers = _Numbers(first_exercise, language(nb))
    _alt_texts(nb, language(nb))
    cells, inside = [], False
    for cell in nb.cells:
        text = cell.source if cell.cell_type == "markdown" else ""
        marks = [m.group(2) for m in _SOLUTION.finditer(text)]
        starts, ends = "start" in marks, "end" in marks
        in_solution = inside or starts
        show = cell.metadata.setdefault("slideshow", {})
        if cell.cell_type == "markdown":
            cell.source = _embed_images(myst_to_html(cell.source, numbers), folder)
        if in_solution:
            if not solutions:
                show["slide_type"] = "skip"
            elif starts:
                show["slide_type"] = "subslide"
            else:
                show["slide_type"] = "-" if cell.source.strip() else "skip"
        if starts:
            inside = True
        if ends:
            inside = False
        cells.append(cell)
    nb.cells = cells
    return nb


# --- assets ---

def copy_assets(outdir: Path, node_modules: Path) -> int:
    """Copy the files a deck loads into outdir/assets; returns their total size in bytes."""
    target = Path(outdir) / ASSETS
    missing = [f"{pkg}/{rel}" for pkg, rels in ASSET_FILES.items() for rel in rels
               if not (Path(node_modules) / pkg / rel).exists()]
    if missing:
        raise SystemExit(f"slides: {node_modules} lacks {', '.join(missing)}: run `npm ci` "
                         "(make slides does) to install the files package.json names")
    if target.exists():
        shutil.rmtree(target)
    for pkg, rels in ASSET_FILES.items():
        for rel in rels:
            src, dst = Path(node_modules) / pkg / rel, target / pkg / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir():
                shutil.copytree(src, dst)
            else:
                shutil.copy2(src, dst)
    live = ROOT / "_static" / "live-figures.js"
    shutil.copy2(live, target / "live-figures.js")
    (target / "fonts").mkdir(exist_ok=True)
    for font in sorted((ROOT / "_static" / "fonts").glob("noto-sans-sc*")):
        shutil.copy2(font, target / "fonts" / font.name)
    return sum(p.stat().st_size for p in target.rglob("*") if p.is_file())


def _exporter():
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    config = Config()
    config.SlidesExporter.reveal_url_prefix = URLS["reveal_url_prefix"]
    config.SlidesExporter.reveal_theme = "white"      # its fonts ship with reveal.js (others use web fonts)
    config.SlidesExporter.reveal_scroll = True         # long slides scroll instead of being cut
    config.SlidesExporter.reveal_number = "c/t"
    config.SlidesExporter.mathjax_url = URLS["mathjax_url"]
    config.SlidesExporter.require_js_url = URLS["require_js_url"]
    config.SlidesExporter.jquery_url = URLS["jquery_url"]
    config.SlidesExporter.embed_images = True           # figures/ is not beside the deck
    config.SlidesExporter.exclude_input_prompt = True
    config.SlidesExporter.exclude_output_prompt = True
    config.SlidesExporter.extra_template_basedirs = [str(TEMPLATE_DIR.parent)]
    config.SlidesExporter.template_name = TEMPLATE_DIR.name
    return SlidesExporter(config=config)


def export(outdir, notebooks, node_modules=ROOT / "node_modules", solutions=False) -> list[Path]:
    import nbformat

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    size = copy_assets(outdir, Path(node_modules))
    exporter = _exporter()
    written = []
    for path in map(Path, notebooks):
        nb = nbformat.read(path, as_version=4)
        deck = prepare_deck(nb, _exercises_before(path) + 1, solutions, path.parent)
        body, _ = exporter.from_notebook_node(
            deck, resources={"metadata": {"path": str(path.parent), "name": path.stem}})
        target = outdir / f"{path.stem}.slides.html"
        target.write_text(_localise(_open_boxes(body), language(nb)), encoding="utf-8")
        written.append(target)
    print(f"{len(written)} decks in {outdir}/ (assets: {size / 1e6:.1f} MB in {outdir}/{ASSETS}/)")
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--solutions", action="store_true",
                        help="put each solution on a sub-slide below its exercise")
    parser.add_argument("--assets", default=str(ROOT / "node_modules"),
                        help="the node_modules folder npm ci installed")
    args = parser.parse_args(argv)
    export(args.outdir, args.notebooks, args.assets, args.solutions)
    return 0


if __name__ == "__main__":
    sys.exit(main())
