"""`make pdf`: the built site printed to A4 by chromium (attnbook/handouts.py).

Prints two pages of each edition of the built site, not the whole book (that takes minutes):
chapter 03 (math, solutions, a hidden code cell) in the student and the teacher edition, and
the glossary (Chinese in the English book); then joins them as `make pdf` joins the book.
The same for the Chinese edition (_build/html/zh, printed into pdf/zh/): every string the
handouts add is Chinese, and every Chinese character of every Chinese PDF is drawn by a font
embedded in it (the machine that runs the tests may have no CJK font, as a classroom's may
not: the Chinese must come from the site's own web font). A browser's own Print (as chromium's
--print-to-pdf prints, with none of the handouts' preparation) of a Chinese page is checked too.
Every other host is blocked while printing; the PDFs are read back with pypdf.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pypdf = pytest.importorskip("pypdf")

from attnbook import handouts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "chapters/03_softmax"
CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")
HAN = re.compile(r"[\u4e00-\u9fff]")


def _fonts(reader) -> set[str]:
    names = set()
    for page in reader.pages:
        fonts = page.get("/Resources", {}).get("/Font", {})
        for ref in fonts.values():
            names.add(str(ref.get_object().get("/BaseFont", "")))
    return names


def _type3(reader) -> bool:
    return any(str(ref.get_object().get("/Subtype")) == "/Type3"
               for page in reader.pages
               for ref in page.get("/Resources", {}).get("/Font", {}).values())


def _unicode_map(font) -> set[str]:
    """The characters a PDF font's ToUnicode map names (bfchar and bfrange entries)."""
    tu = font.get("/ToUnicode")
    if tu is None:
        return set()
    cmap = tu.get_object().get_data().decode("latin-1")
    chars = set()
    for block in re.findall(r"beginbfchar(.*?)endbfchar", cmap, re.S):
        chars |= {chr(int(dst[:4], 16)) for _, dst in re.findall(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block)}
    for block in re.findall(r"beginbfrange(.*?)endbfrange", cmap, re.S):
        for lo, hi, dst in re.findall(r"<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>", block):
            start = int(dst[:4], 16)
            chars |= {chr(start + k) for k in range(int(hi, 16) - int(lo, 16) + 1)}
    return chars


def _embedded_characters(reader) -> set[str]:
    """Every character drawn by a font whose glyphs are in the PDF: a font file in its
    descriptor, or a Type 3 font (glyphs as drawing procedures: how chromium embeds the
    site's web font, as it does MathJax's)."""
    chars = set()
    for page in reader.pages:
        for ref in page.get("/Resources", {}).get("/Font", {}).values():
            font = ref.get_object()
            parts = [font] + [d.get_object() for d in font.get("/DescendantFonts", [])]
            files = any(k in p["/FontDescriptor"].get_object() for p in parts
                        if "/FontDescriptor" in p for k in ("/FontFile", "/FontFile2", "/FontFile3"))
            procs = font.get("/CharProcs")
            # every glyph drawn (paths), but for the empty .notdef
            sizes = [len(v.get_object().get_data()) for v in procs.get_object().values()] if procs else []
            glyphs = bool(sizes) and sum(n > 20 for n in sizes) >= len(sizes) - 1
            if files or (str(font.get("/Subtype")) == "/Type3" and glyphs):
                chars |= _unicode_map(font)
    return chars


_TEXTS: dict = {}


def _text(reader) -> list[str]:
    """Each page's text (kept with its reader: extracting it takes a while)."""
    if id(reader) not in _TEXTS:
        _TEXTS[id(reader)] = (reader, [page.extract_text() or "" for page in reader.pages])
    return _TEXTS[id(reader)][1]


_READERS: dict = {}


def _reader(path):
    if str(path) not in _READERS:
        _READERS[str(path)] = pypdf.PdfReader(str(path))
    return _READERS[str(path)]


@pytest.fixture(scope="module")
def printed(built_site, tmp_path_factory):
    site_tour = pytest.importorskip("site_tour")
    if not Path(site_tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: apt-get install chromium (or set CHROMIUM=...)")
    out = tmp_path_factory.mktemp("pdf")
    result = {"site": built_site["html"]}
    with handouts.Printer(built_site["html"], browser=site_tour.shared_browser()) as printer:
        for name, edition in [(CHAPTER, "student"), (CHAPTER, "teacher"), ("glossary", "student")]:
            target = out / edition / f"{name.split('/')[-1]}.pdf"
            result[name, edition] = (printer.print_page(name, target, edition), target)
        parts = [(result[n, "student"][0]["title"], result[n, "student"][1])
                 for n in ("glossary", CHAPTER)]
        book = out / "book-student.pdf"
        result["book_pages"] = handouts._book(printer, parts, "student", book, out)
        result["book"] = book
        # The Chinese edition, as `make pdf` prints it: a page loaded once, both editions
        zh = out / "zh"
        targets = {e: zh / e / "03_softmax.pdf" for e in ("student", "teacher")}
        infos = printer.print_editions(CHAPTER, targets, "zh")
        for edition in targets:
            result["zh", CHAPTER, edition] = (infos[edition], targets[edition])
        target = zh / "student" / "glossary.pdf"
        result["zh", "glossary", "student"] = (printer.print_page("glossary", target, "student", "zh"),
                                               target)
        parts = [(result["zh", n, "student"][0]["title"], result["zh", n, "student"][1])
                 for n in ("glossary", CHAPTER)]
        result["zh", "book_pages"] = handouts._book(printer, parts, "student", zh / "book-student.pdf",
                                                    zh, "zh")
        result["zh", "book"] = zh / "book-student.pdf"
        result["problems"] = list(printer.problems)
        result["requests"] = list(printer.requests)
        result["base"] = printer.base
    return result


def test_no_request_to_another_host_and_nothing_failed(printed):
    assert not printed["problems"], printed["problems"]
    others = [u for u in printed["requests"]
              if not u.startswith((printed["base"], "data:", "blob:", "about:"))]
    assert not others, others
    # The Chinese came from the site's own web font (its slices in _static/fonts/).
    assert any("/_static/fonts/noto-sans-sc-" in u and u.endswith(".woff2")
               for u in printed["requests"])


@pytest.mark.parametrize("edition", ["student", "teacher"])
def test_chapter_a4_numbered_math_typeset_nothing_cut(printed, edition):
    info, path = printed[CHAPTER, edition]
    reader = _reader(path)
    box = reader.pages[0].mediabox
    # A4 is 210 x 297 mm = 595.3 x 841.9 points (chromium rounds to whole CSS pixels)
    assert abs(float(box.width) - 595.3) < 1.5 and abs(float(box.height) - 841.9) < 1.5, box
    pages = _text(reader)
    for k, text in enumerate(pages, 1):
        assert f"page {k} of {len(pages)}" in text
    assert info["math"] > 20 and not info["mathErrors"] and not info["rawMath"]
    # MathJax's own fonts print as Type 3 fonts (the text fonts are TrueType); no TeX is left
    assert _type3(reader), _fonts(reader)
    assert not info["overflow"] and not info["showSource"]
    joined = "\n".join(pages)
    assert "Show code cell" not in joined and "Contents" in pages[0]
    assert not re.search(r"\\(sqrt|frac|operatorname|mathsf|\(|\[)", joined)


def test_student_handout_has_no_solution_and_teacher_has_all(printed, built_site):
    page = (built_site["html"] / f"{CHAPTER}.html").read_text()
    on_site = len(re.findall(r'class="solution[ "]', page))
    assert on_site >= 2
    student = "\n".join(_text(_reader(printed[CHAPTER, "student"][1])))
    teacher = "\n".join(_text(_reader(printed[CHAPTER, "teacher"][1])))
    assert "Solution to" not in student
    assert teacher.count("Solution to") == on_site
    assert printed[CHAPTER, "student"][0]["solutionsShown"] == 0
    assert printed[CHAPTER, "teacher"][0]["solutionsShown"] == on_site


def _squeezed(text: str) -> str:
    """Text without white space: pypdf puts spaces between some Chinese characters."""
    return re.sub(r"\s+", "", text)


def _article_chinese(page_html: str, solutions: bool) -> set[str]:
    """The Chinese characters a page's article prints: not the navigation, nor the labels of
    the site's show/hide buttons, nor (for students) the solutions."""
    body = page_html[page_html.index("<article"):page_html.rindex("</article>")]
    body = re.sub(r"<(script|style|summary)\b.*?</\1>", "", body, flags=re.S)
    if not solutions:
        body = re.sub(r'<div class="solution.*?</section>\s*</div>', "", body, flags=re.S)
    return set(HAN.findall(html_text(body)))


def html_text(fragment: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _assert_chinese_embedded(reader, wanted: set[str], where: str):
    """Every Chinese character the page should print is in the PDF's text, and every Chinese
    character of the PDF (the handouts' own strings included) is drawn by an embedded font."""
    text = "\n".join(_text(reader))
    missing = wanted - set(text)
    assert not missing, f"{where}: not printed: " + "".join(sorted(missing))[:60]
    drawn = _embedded_characters(reader)
    printed = set(CJK.findall(text))
    assert printed and not printed - drawn, \
        f"{where}: not drawn by an embedded font: " + "".join(sorted(printed - drawn))[:60]


def test_glossary_chinese_is_embedded(printed, built_site):
    """Every Chinese character of the glossary's table is in the PDF, drawn by the site's own
    font (embedded): on a machine with no Chinese font, as the tests' machine may be."""
    reader = _reader(printed["glossary", "student"][1])
    text = "\n".join(_text(reader))
    page = (built_site["html"] / "glossary.html").read_text(encoding="utf-8")
    table = re.sub(r"<[^>]+>", "", page[page.index("<table"):page.rindex("</table>")])
    wanted = set(re.findall(r"[\u4e00-\u9fff]", table))
    assert len(wanted) > 100 and "注意力" in text
    _assert_chinese_embedded(reader, wanted, "glossary")


@pytest.mark.parametrize("name, edition", [(CHAPTER, "student"), (CHAPTER, "teacher"),
                                           ("glossary", "student")])
def test_chinese_pdf_every_character_embedded(printed, built_site, name, edition):
    """A Chinese page's PDF prints every Chinese character of its article (the solutions in
    the teacher's edition), each drawn by a font embedded in the PDF: the site's own."""
    reader = _reader(printed["zh", name, edition][1])
    page = (built_site["html"] / "zh" / f"{name}.html").read_text(encoding="utf-8")
    wanted = _article_chinese(page, solutions=edition == "teacher")
    assert len(wanted) > 200, len(wanted)
    _assert_chinese_embedded(reader, wanted, f"zh/{name} ({edition})")
    # the Chinese is the site's font (Noto Sans SC, cut to the site), and no other CJK font
    cjk_fonts = {f for f in _fonts(reader) if re.search(r"CJK|SC|Hei|Song|Ming|Kai|Han", f)}
    assert cjk_fonts and all("NotoSansCJKsc" in f for f in cjk_fonts), cjk_fonts


def test_chinese_book_every_character_embedded(printed):
    """The Chinese book: title page, contents, the pages, the feet stamped on them."""
    reader = _reader(printed["zh", "book"])
    _assert_chinese_embedded(reader, set(HAN.findall(handouts.STRINGS["zh"]["student"])), "zh book")


def test_chinese_student_handout_has_no_solution(printed, built_site):
    """The Chinese student PDF leaves out every solution; the teacher's prints them all."""
    page = (built_site["html"] / "zh" / f"{CHAPTER}.html").read_text(encoding="utf-8")
    solutions = re.findall(r'<div class="solution.*?</section>\s*</div>', page, flags=re.S)
    assert len(solutions) >= 2
    student = _squeezed("".join(_text(_reader(printed["zh", CHAPTER, "student"][1]))))
    teacher = _squeezed("".join(_text(_reader(printed["zh", CHAPTER, "teacher"][1]))))
    for solution in solutions:
        # the first Chinese sentence of the solution's text (after its title, 解答)
        body = _squeezed(html_text(solution.split("</p>", 1)[1]))
        sentence = max(re.findall(r"[\u4e00-\u9fff，、（）]{6,}", body), key=len)
        assert sentence not in student, sentence
        assert sentence in teacher, sentence
    assert printed["zh", CHAPTER, "student"][0]["solutionsShown"] == 0
    assert printed["zh", CHAPTER, "teacher"][0]["solutionsShown"] == len(solutions)


def test_chinese_handouts_strings_are_chinese(printed):
    """Everything the handouts add to a Chinese PDF is Chinese: the foot of every page
    (the book, the page, 第N页，共M页), the title page and its contents, the bookmarks, the
    document's title; none of the English edition's strings."""
    zh, en = handouts.STRINGS["zh"], handouts.STRINGS["en"]
    english = [en["title"], en["contents"], en["student"], en["teacher"], "page 1 of"]
    for key in [(CHAPTER, "student"), (CHAPTER, "teacher"), ("glossary", "student")]:
        info, path = printed[("zh",) + key]
        pages = [_squeezed(t) for t in _text(_reader(path))]
        for k, text in enumerate(pages, 1):
            assert _squeezed(zh["page"].format(n=k, m=len(pages))) in text, (key, k, text[-80:])
            assert _squeezed(f"{zh['title']}·{info['title']}") in text, (key, k, text[-80:])
        assert not any(_squeezed(e) in "".join(pages) for e in english), key
        assert CJK.search(info["title"]), info["title"]
    reader = _reader(printed["zh", "book"])
    contents = _squeezed(_text(reader)[0])
    for s in (zh["title"], zh["contents"], zh["student"]):
        assert _squeezed(s) in contents, (s, contents)
    assert not any(_squeezed(e) in contents for e in english), contents
    assert reader.metadata.title == zh["book"].format(title=zh["title"],
                                                      edition=zh["edition"]["student"])
    outline = [item.title for item in reader.outline]
    assert outline == [printed["zh", n, "student"][0]["title"] for n in ("glossary", CHAPTER)]
    assert all(CJK.search(t) for t in outline), outline
    # the book's pages are numbered through, as in English
    pages = _text(reader)
    for k in range(1, len(pages)):
        assert str(k + 1) in pages[k]


def test_chinese_strings_are_in_the_sites_font():
    """The handouts' Chinese strings use only characters the served font holds (else they
    would print as nothing: `make font` cuts the font to the built site's characters)."""
    from attnbook.i18n import font

    zh = handouts.STRINGS["zh"]
    strings = [zh[k] for k in ("title", "contents", "student", "teacher", "page", "book")]
    strings += list(zh["edition"].values())
    used = set(CJK.findall("".join(strings)))
    missing = used - font.served_characters()
    assert used and not missing, "not in the site's font: " + "".join(sorted(missing))


@pytest.mark.parametrize("page", [f"zh/{CHAPTER}", "glossary"])
def test_browser_print_of_a_chinese_page_uses_the_sites_font(built_site, tmp_path, page):
    """A browser's own Print (Ctrl+P) of a Chinese page, and of the English glossary's Chinese
    column, prints the Chinese in the site's font, embedded (_static/print.css keeps it), with
    no CJK font installed. Printed as chromium's --print-to-pdf prints (DevTools' printToPDF once
    the page has loaded, in a fresh profile: no font cached), without anything
    attnbook.handouts does before printing."""
    site_tour = pytest.importorskip("site_tour")
    if not Path(site_tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: apt-get install chromium (or set CHROMIUM=...)")
    out = tmp_path / "print.pdf"
    requests = []
    with handouts.Printer(built_site["html"], browser=site_tour.shared_browser()) as printer:
        context = printer.browser.new_context()  # its own cache: the fixture's fonts are not in it
        try:
            tab = context.new_page()
            tab.on("request", lambda r: requests.append(r.url))
            tab.goto(f"{printer.base}{page}.html", wait_until="load")
            tab.pdf(path=str(out))
        finally:
            context.close()
    assert any("/_static/fonts/noto-sans-sc-" in u for u in requests), requests
    reader = pypdf.PdfReader(str(out))
    source = (built_site["html"] / f"{page}.html").read_text(encoding="utf-8")
    text = "\n".join(p.extract_text() or "" for p in reader.pages)
    if page.startswith("zh/"):
        assert "解答" not in _squeezed(text)  # the student's version, as print.css says
    _assert_chinese_embedded(reader, _article_chinese(source, solutions=False), f"Ctrl+P of {page}")


def test_book_contents_bookmarks_and_page_numbers(printed):
    reader = _reader(printed["book"])
    pages = _text(reader)
    assert len(pages) == printed["book_pages"]
    contents = pages[0]
    assert "Contents" in contents and "Student handout" in contents
    outline = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline]
    assert [t for t, _ in outline] == ["Glossary", printed[CHAPTER, "student"][0]["title"]]
    for title, index in outline:
        # the contents line gives the page the bookmark opens, and that page is stamped with it
        assert re.search(re.escape(title) + r"\s*" + str(index + 1) + r"\b", contents), contents
        assert re.search(rf"(^|\n){index + 1}\s*(\n|$)", pages[index]) or \
            pages[index].lstrip().startswith(str(index + 1)), pages[index][:80]
    for k in range(1, len(pages)):
        assert str(k + 1) in pages[k]
    links = [a.get_object() for a in reader.pages[0].get("/Annots", [])]
    assert len(links) == 2 and not any("/URI" in str(a.get("/A")) for a in links), links
