"""Sphinx extension: the language switch of both editions (in `extra_extensions` of _config.yml).

Every page gets, before its content, a link to the same page in the other language, written in
that language (中文 on the English site, English on the Chinese one), and `<link rel="alternate"
hreflang>` in its head. The English site is `_build/html/`, the Chinese `_build/html/zh/`; the
links are relative, so they work over http and from `file://`. `_static/lang-switch.js` carries
the reader's section across (the page's n-th section opens the other page's n-th section: the
two editions have the same sections, cell for cell).

It also keeps a first visit light (every page of both editions at most 0.9 MB gzip; the
browser tests measure it, tests/site/test_browser.py::test_first_visit_weight), with one icon
system instead of the theme's two:

- the theme's ``fontawesome.js`` (1.5 MB: every Font Awesome icon as JavaScript that swaps each
  ``<i class="fa-...">`` for an SVG) is not loaded; the theme's CSS draws the same icons from
  its Font Awesome web font, which the page loaded anyway;
- that web font is cut, in the built site, to the icons the site uses (the ``fa-*`` classes of
  its pages and scripts, and the icons the theme's CSS names itself): a few KB instead of 150;
  and the theme's style sheet keeps the rules of those icons only (16 of its 66 KB gzip are
  the rules of 2,000 icons);
- Sphinx's search index (and its tools) loads on the search page only, where the search runs
  (the theme loads it on every page for its search-as-you-type, which is off);
- MathJax (served by sphinx-mathjax-offline) loads as its components, TeX input, HTML output
  and the hidden MathML that screen readers read, without the right-click menu that its
  combined ``tex-chtml.js`` bundles (108 of its 264 KB): the math is typeset as before.

And it speaks Simplified Chinese on the Chinese site where the theme and Sphinx do not (their
zh_CN catalogues lack some strings, use Taiwan terms for others, and some templates write
English outright): :data:`THEME_ZH` is put in front of the catalogues the templates and Sphinx
translate through (Sphinx's own and the theme's, "sphinx" and "booktheme"), the theme's
hard-coded labels go through the same translation (:data:`TEMPLATE_EDITS`), and so do
myst-nb's label of a hidden cell and the live figures' no-JavaScript note (the notebooks store
both editions' outputs in English). tests/site/test_site.py lists the English strings a built
Chinese page must not have, and the Chinese it must.
"""

from __future__ import annotations

import gettext
import re
from html import escape
from pathlib import Path

from sphinx.util import logging

logger = logging.getLogger(__name__)

LABELS = {"en": ("中文", "zh-CN", "阅读本页的中文版"), "zh": ("English", "en", "Read this page in English")}


def other_url(pagename: str, lang: str) -> str:
    """The other edition's page, relative to this page."""
    up = "../" * pagename.count("/")
    return f"{up}zh/{pagename}.html" if lang == "en" else f"{up}../{pagename}.html"


def _page_context(app, pagename, templatename, context, doctree):
    lang = app.config.attnbook_language
    if lang not in LABELS:
        return
    text, hreflang, title = LABELS[lang]
    href = other_url(pagename, lang)
    link = (f'<nav class="attnbook-lang" aria-label="{escape(title)}">'
            f'<a class="attnbook-lang-switch" href="{escape(href)}" hreflang="{hreflang}" '
            f'lang="{hreflang}" title="{escape(title)}">{escape(text)}</a></nav>\n')
    if "body" in context:
        context["body"] = link + context["body"]
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{hreflang}" href="{escape(href)}" />')


def _search_words(app, config):
    """Chinese search: Sphinx splits Chinese text into words with jieba, which does not know
    the book's terms (旋转位置编码 would be indexed as 旋转, 位置, 编码 only, and a search for
    the whole term would find nothing). The glossary's Chinese names go into jieba's user
    dictionary, so each is indexed whole as well as in parts."""
    if config.attnbook_language != "zh":
        return
    from pathlib import Path

    from .rules import glossary_terms

    book = Path(app.srcdir).resolve().parent
    words = sorted({name for term in glossary_terms(book) for name in term.chinese})
    path = Path(app.doctreedir) / "attnbook-search-words.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{w.replace(' ', '')} 100000 n\n" for w in words), encoding="utf-8")
    config.html_search_options = {**(config.html_search_options or {}), "dict": str(path)}


# Template edits (template name -> [(regex, replacement)]): each must match once, or the
# build warns (and -W fails it): a new theme version is then noticed, not silently heavier.
TEMPLATE_EDITS = {
    # the theme's labels it writes in English whatever the language: through gettext, so
    # that THEME_ZH translates them (on the English site they stay as they are)
    "toggle-primary-sidebar.html": [(r'title="Toggle primary sidebar"',
                                     'title="{{ _(\'Toggle primary sidebar\') }}"')],
    "toggle-secondary-sidebar.html": [(r'title="Toggle secondary sidebar"',
                                       'title="{{ _(\'Toggle secondary sidebar\') }}"')],
    "sbt-sidebar-nav.html": [(r'aria-label="Main"', 'aria-label="{{ _(\'Main\') }}"')],
    # "By AUTHOR" as one string, so that Chinese can write 作者：AUTHOR (no space after the colon)
    "author.html": [(r"\{\{ translate\('By'\) \}\} \{\{ author \}\}",
                     "{{ _('By %(author)s') % {'author': author} }}")],
    "sphinx_book_theme/layout.html": [(r'<nav aria-label="Page">', '<nav aria-label="{{ _(\'Page\') }}">')],
    "static/webpack-macros.html": [
        (r'\s*<script defer src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>', ""),
    ],
    "pydata_sphinx_theme/layout.html": [
        (r"\s*<script src=\"\{\{ pathto\('_static/searchtools\.js', 1\) \| e \}\}\"></script>"
         r"\s*<script src=\"\{\{ pathto\('_static/language_data\.js', 1\) \| e \}\}\"></script>"
         r"\s*<script src=\"\{\{ pathto\('searchindex\.js', 1\) \| e \}\}\"></script>", ""),
    ],
}


def _edit_templates(app):
    templates = getattr(app.builder, "templates", None)
    if templates is None or not hasattr(templates, "get_source"):
        return
    original = templates.get_source

    def get_source(environment, template):
        source, filename, uptodate = original(environment, template)
        name = template.lstrip("!")
        if filename and name == "layout.html":
            for theme in ("pydata_sphinx_theme", "sphinx_book_theme"):
                if theme in Path(filename).parts:
                    name = f"{theme}/layout.html"
        for pattern, replacement in TEMPLATE_EDITS.get(name, []):
            source, n = re.subn(pattern, replacement, source)
            if n != 1:
                logger.warning(f"attnbook: the theme's {name} changed: {pattern[:60]!r} matched "
                               f"{n} times (attnbook/i18n/sphinx_ext.py, TEMPLATE_EDITS)")
        return source, filename, uptodate

    templates.get_source = get_source


# --- the Chinese site's theme strings ---------------------------------------------------

#: Sphinx's, the themes' and myst-nb's English (or Taiwan-Chinese) interface strings, in
#: Simplified Chinese; msgid -> msgstr, looked up before the catalogues' own.
THEME_ZH = {
    # Sphinx (the ¶ beside every heading) and pydata-sphinx-theme
    "Link to this heading": "链接到此标题",
    "Color mode": "颜色模式",
    "System Settings": "跟随系统",
    "Light": "浅色",
    "Dark": "深色",
    "© Copyright %(copyright)s.": "© %(copyright)s 版权所有。",
    # sphinx-book-theme (its zh_CN catalogue says 列印成 PDF, a Taiwan term)
    "Print to PDF": "打印为PDF",
    "By %(author)s": "作者：%(author)s",
    # hard-coded in the themes' templates (TEMPLATE_EDITS puts them through gettext)
    "Toggle primary sidebar": "显示/隐藏目录",
    "Toggle secondary sidebar": "显示/隐藏本页导航",
    "Main": "全书目录",
    "Page": "本页目录",
}
SEARCH_ZH = "搜索本书……"  # the search box's placeholder (Jupyter Book: "Search this book...")
#: myst-nb's button over a hidden code cell (its HTML visitor writes the English label)
HIDDEN_CELL = ('aria-label="Toggle hidden content"', 'aria-label="显示/隐藏代码"')
CATALOGS = ("sphinx", "booktheme")  # the gettext catalogues the templates translate through


class ThemeStrings(gettext.NullTranslations):
    """A catalogue that answers from `table` first, then from the catalogue it is put in
    front of."""

    def __init__(self, table: dict[str, str], fallback=None):
        super().__init__()
        self.table = table
        if fallback is not None:
            self.add_fallback(fallback)

    def gettext(self, message):
        if message in self.table:
            return self.table[message]
        return super().gettext(message)

    def ngettext(self, msgid1, msgid2, n):
        if n == 1 and msgid1 in self.table:
            return self.table[msgid1]
        return super().ngettext(msgid1, msgid2, n)


def _theme_strings(app, config):
    """On the Chinese site: THEME_ZH before Sphinx's and the theme's catalogues (the HTML
    templates are given app.translator when the builder starts, after this), the search
    box's text, and myst-nb's hidden-cell label."""
    if config.attnbook_language != "zh":
        return
    from sphinx import locale

    for catalog in CATALOGS:
        key = ("general", catalog)
        locale.translators[key] = ThemeStrings(THEME_ZH, locale.translators.get(key))
    app.translator = locale.translators[("general", "sphinx")]
    config.html_theme_options = {**(config.html_theme_options or {}), "search_bar_text": SEARCH_ZH}
    _hidden_cell_label(app)


def _hidden_cell_label(app):
    from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput, visit_HideCellInput

    def visit(self, node):
        start = len(self.body)
        visit_HideCellInput(self, node)
        for i in range(start, len(self.body)):
            if HIDDEN_CELL[0] in self.body[i]:
                self.body[i] = self.body[i].replace(*HIDDEN_CELL)
                return
        logger.warning("attnbook: myst-nb's hidden-cell button changed: no "
                       f"{HIDDEN_CELL[0]} (attnbook/i18n/sphinx_ext.py, HIDDEN_CELL)")

    app.add_node(HideCodeCellNode, override=True, html=(visit, depart_HideCellInput))


def _noscript_note(app, doctree, docname):
    """The live figures' no-JavaScript note in the page's language (the Chinese notebooks'
    outputs are the English ones)."""
    if app.config.attnbook_language != "zh":
        return
    from docutils import nodes

    from ..live.base import NOSCRIPT

    for node in list(doctree.findall(nodes.raw)):
        text = node.astext()
        if NOSCRIPT["en"] in text:
            node.replace_self(nodes.raw("", text.replace(NOSCRIPT["en"], NOSCRIPT["zh"]),
                                        format=node.get("format", "html")))


ICON_FONTS = "_static/vendor/fontawesome/webfonts"
_CLASS_RULE = re.compile(r"([^{}]+)\{([^{}]*)\}")
_CODEPOINT = re.compile(r'"\\(f[0-9a-f]{3})"')
_ICON_CLASS = re.compile(r"^\.(fa-[a-z0-9-]+)(?::before)?$")


def icon_codepoints(css: str, used: set[str]) -> set[int]:
    """The Font Awesome code points a site needs: those of the icon classes it uses
    (``.fa-bars:before{content:"\\f0c9"}``) and every one the CSS names in another rule (a
    theme's own ``::before`` icons, its --pst-icon-* variables)."""
    points = set()
    for selectors, body in _CLASS_RULE.findall(css):
        codes = {int(c, 16) for c in _CODEPOINT.findall(body)}
        if not codes:
            continue
        names = [_ICON_CLASS.match(s.strip()) for s in selectors.split(",")]
        if all(names):
            if any(m[1] in used for m in names):
                points |= codes
        else:
            points |= codes
    return points


def cut_icon_rules(css: str, used: set[str]) -> str:
    """The style sheet without the rules of icon classes (``.fa-NAME:before``) none of `used`."""
    def keep(m):
        names = [_ICON_CLASS.match(s.strip()) for s in m[1].split(",")]
        if all(names) and _CODEPOINT.search(m[2]) and not any(n[1] in used for n in names):
            return ""
        return m[0]
    return _CLASS_RULE.sub(keep, css)


def cut_icon_fonts(html: Path) -> dict[str, int]:
    """Cut the built site's Font Awesome web fonts to the icons it uses, and the theme's style
    sheet to their rules; {file: glyphs kept}."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    fonts = html / ICON_FONTS
    if not fonts.is_dir():
        return {}
    used, css = set(), ""
    for path in html.rglob("*"):
        if path.suffix in (".html", ".js") and path.is_file() and path.name != "fontawesome.js":
            used |= set(re.findall(r"\bfa-[a-z0-9-]+", path.read_text(encoding="utf-8", errors="ignore")))
        elif path.suffix == ".css" and path.is_file():
            css += path.read_text(encoding="utf-8", errors="ignore") + "\n"
    points = icon_codepoints(css, used)
    sheet = html / "_static" / "styles" / "pydata-sphinx-theme.css"
    if sheet.is_file():
        sheet.write_text(cut_icon_rules(sheet.read_text(encoding="utf-8"), used), encoding="utf-8")
    kept = {}
    for path in sorted(fonts.glob("*.woff2")):
        font = TTFont(str(path))
        have = set(font.getBestCmap()) & points
        options = subset.Options()
        options.flavor = "woff2"
        options.layout_features = ["*"]
        options.name_IDs = ["*"]
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=sorted(have))
        subsetter.subset(font)
        font.flavor = "woff2"
        font.save(str(path))
        kept[path.name] = len(have)
    return kept


def _build_finished(app, exception):
    if exception is None and app.builder.format == "html":
        cut_icon_fonts(Path(app.outdir))


# MathJax 3 from its components (startup.js is the loader; the rest load from beside it).
MATHJAX_PATH = "mathjax/startup.js"
MATHJAX_LOAD = ["input/tex", "output/chtml", "a11y/assistive-mml"]


def _mathjax_components(app, config):
    if str(config.mathjax_path or "").endswith("mathjax/tex-chtml.js"):
        config.mathjax_path = MATHJAX_PATH
        mj = dict(config.mathjax3_config or {})
        mj["loader"] = {**mj.get("loader", {}), "load": MATHJAX_LOAD}
        config.mathjax3_config = mj


def setup(app):
    app.add_config_value("attnbook_language", "en", "html")
    app.connect("config-inited", _search_words)
    app.connect("config-inited", _theme_strings)
    app.connect("doctree-resolved", _noscript_note)
    app.connect("html-page-context", _page_context)
    app.connect("builder-inited", _edit_templates)
    app.connect("config-inited", _mathjax_components, priority=900)
    app.connect("build-finished", _build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
