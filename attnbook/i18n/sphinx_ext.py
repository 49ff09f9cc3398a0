"""Sphinx extension: the language switch of both editions (in `extra_extensions` of _config.yml).

Every page gets, before its content, a link to the same page in the other language, written in
that language (中文 on the English site, English on the Chinese one), and `<link rel="alternate"
hreflang>` in its head. The English site is `_build/html/`, the Chinese `_build/html/zh/`; the
links are relative, so they work over http and from `file://`. `_static/lang-switch.js` carries
the reader's section across (the page's n-th section opens the other page's n-th section: the
two editions have the same sections, cell for cell).
"""

from __future__ import annotations

from html import escape

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


def setup(app):
    app.add_config_value("attnbook_language", "en", "html")
    app.connect("config-inited", _search_words)
    app.connect("html-page-context", _page_context)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
