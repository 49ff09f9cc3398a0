"""`make pdf`: the built site printed to A4 by chromium (attnbook/handouts.py).

Prints two pages of the built site, not the whole book (that takes minutes): chapter 03
(math, solutions, a hidden code cell) in the student and the teacher edition, and the
glossary (Chinese); then joins them as `make pdf` joins the book. Every other host is
blocked while printing; the PDFs are read back with pypdf.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

pypdf = pytest.importorskip("pypdf")

from attnbook import handouts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "chapters/03_softmax"


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


def test_glossary_chinese_is_embedded(printed, built_site):
    """Every Chinese character of the glossary's table is in the PDF, drawn by the site's own
    font (embedded): on a machine with no Chinese font, as the tests' machine may be."""
    reader = _reader(printed["glossary", "student"][1])
    text = "\n".join(_text(reader))
    page = (built_site["html"] / "glossary.html").read_text(encoding="utf-8")
    table = re.sub(r"<[^>]+>", "", page[page.index("<table"):page.rindex("</table>")])
    wanted = set(re.findall(r"[\u4e00-\u9fff]", table))
    assert len(wanted) > 100 and "注意力" in text
    assert not wanted - set(text), "".join(sorted(wanted - set(text)))[:60]
    drawn = _embedded_characters(reader)
    assert not wanted - drawn, "not drawn by an embedded font: " + "".join(sorted(wanted - drawn))[:60]


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
