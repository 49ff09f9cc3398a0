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
    if lang not in LABELS or pagename in ("search", "genindex"):
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


def setup(app):
    app.add_config_value("attnbook_language", "en", "html")
    app.connect("html-page-context", _page_context)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
