"""Numbers a teacher reads in the README, the instructor guide (both languages) and the student
kit's README are computed, not typed (issue 32: "six live figures, 24 decks 12 MB, 59 PDFs
73 MB" had gone stale).

- A count the site states is a MyST substitution set when the book is built
  (attnbook/book_numbers.py): the built guide says the computed number, in both languages.
- A size or count of what a command writes (decks, PDFs, a wheelhouse) is never typed: `make
  slides` and `make pdf` print theirs at the end, and the texts say to read them there.
- The few sizes that stay typed are facts of something else (a wheel on PyPI, a budget a test
  enforces) and are listed here with their reason; a file of the book's whose size is typed is
  checked against the file.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIZE = re.compile(r"\b\d+(?:\.\d+)?\s?(?:KB|MB|GB)\b")
COUNT = re.compile(r"\b\d+ (?:PDFs|decks|files|pages|wheels|live figures)\b")
# typed sizes that are not the build's output, and why each may stay typed
ALLOWED = {
    "286 MB": "the torch wheel on PyPI (README, installing PyTorch)",
    "1 GB": "torch installed (README, installing PyTorch)",
    "0.9 MB": "the first-visit budget tests/site/test_browser.py enforces",
    "6.7 MB": "the standard widget front end the book does not use (measured, README)",
    "4 KB": "_static/live-figures.js: checked against the file below",
}


def _texts():
    yield "README.md", (ROOT / "README.md").read_text(encoding="utf-8")
    yield "instructor_guide.md", (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    po = (ROOT / "locale" / "zh" / "instructor_guide.po").read_text(encoding="utf-8")
    yield "locale/zh/instructor_guide.po (msgstr)", "\n".join(
        re.findall(r'^msgstr (".*"(?:\n".*")*)', po, flags=re.M))
    from attnbook.nbtools import kit

    yield "the student kit's README (attnbook/nbtools/kit.py)", kit.README


@pytest.mark.parametrize("name, text", list(_texts()), ids=lambda v: v if len(v) < 60 else "")
def test_no_typed_size_or_count_of_what_the_build_writes(name, text):
    sizes = [m for m in SIZE.findall(text) if re.sub(r"\s", " ", m) not in ALLOWED]
    counts = COUNT.findall(text)
    assert not sizes and not counts, (
        f"{name} types {sizes + counts}: a size or count of what the build writes goes stale; "
        "say where the command prints it (make slides, make pdf), or compute it "
        "(attnbook/book_numbers.py)")


def test_typed_file_size_matches_the_file():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    said = re.search(r"`_static/live-figures\.js`[^|]*\|[^|]*?about (\d+) KB", readme)
    assert said, "the README no longer sizes _static/live-figures.js: drop it from ALLOWED"
    size = (ROOT / "_static" / "live-figures.js").stat().st_size / 1024
    assert abs(size - int(said[1])) < 1, \
        f"_static/live-figures.js is {size:.1f} KB, the README says {said[1]}"


def test_guide_states_the_lesson_plans_it_has():
    """A count of lesson plans in the guide's words is the number of plans it has."""
    words = dict(zip("one two three four five six seven eight nine ten eleven twelve".split(),
                     range(1, 13)))
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    plans = len(re.findall(r"^##+ Lesson plan \d+\b", guide, flags=re.M))
    for word in re.findall(r"\b(\w+) (?:ready )?(?:\d+-minute )?lesson plans\b", guide):
        if word.lower() in words:
            assert words[word.lower()] == plans, f"the guide says {word} lesson plans; it has {plans}"


def test_built_guide_says_the_computed_count(built_site):
    """The built guide, in both languages, states the number of live figures the chapters
    hold, and no substitution is left unrendered."""
    from attnbook import book_numbers

    numbers = book_numbers.substitutions(ROOT)
    en = (built_site["html"] / "instructor_guide.html").read_text(encoding="utf-8")
    zh = (built_site["html"] / "zh" / "instructor_guide.html").read_text(encoding="utf-8")
    assert f"{numbers['Live_figures']} figures on the site are live" in en
    assert f"The {numbers['live_figures']} live figures" in en
    assert f"网站上有{numbers['live_figures_n']}个图是交互的" in zh
    assert "{{" not in re.sub(r"<(script|style)\b.*?</\1>", "", en + zh, flags=re.S)
