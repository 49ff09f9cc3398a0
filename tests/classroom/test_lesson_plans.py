"""The instructor guide's lesson plans fit their 90 minutes by the guide's own rule (issue 32).

The rule, as the guide's "Lesson plans" section states it: a chapter has the time that
"The chapters at a glance" gives it (a chapter of several pages with one time shares it among
its pages); a part of a chapter gets its share of that time, in proportion to its length by
the style's reading measure (words / 200 + code lines / 25), the opening and the Summary counting
as sections and the Exercises not; exercises done in class take 10 to 25 minutes; each plan opens
with 5 minutes to open the notebooks and ends with a quick check of 3 to 5; a recap of a chapter
read before class takes at most 10. Nothing here trusts a typed total: the blocks are parsed,
added up and compared with shares computed from the notebooks themselves."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "instructor_guide.md"
UNIT = r"(?:opening|§\d+(?:-\d+)?|Summary)"
# "06 §4, §6 and §7", "09b opening, §1", "11 §7, §9, Summary"
REF = re.compile(rf"\b(\d\d[a-z]?) ({UNIT}(?:(?:, | and ){UNIT})*)")


def stem_of(prefix):
    (path,) = (ROOT / "chapters").glob(f"{prefix}_*.ipynb")
    return path.stem


def units(stem):
    """{unit: reading measure in minutes}, in page order; Exercises left out."""
    nb = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    out = {"opening": 0.0}
    current = "opening"
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "markdown":
            out[current] = out.get(current, 0.0) + len(source.splitlines()) / 25
            continue
        parts = re.split(r"^## (.*)$", source, flags=re.M)
        texts = [parts[0]] + parts[2::2]
        for heading, text in zip([None] + parts[1::2], texts):
            if heading is not None:
                number = re.match(r"(\d+)\.", heading)
                if number:
                    current = "§" + number.group(1)
                elif heading.strip() in ("Summary", "Exercises"):
                    current = heading.strip()
                # any other heading (a recap of the first page) stays in its unit
                text = heading + "\n" + text
            out[current] = out.get(current, 0.0) + len(re.findall(r"\w+", text)) / 200
    out.pop("Exercises", None)
    return out


def glance():
    """{stem: (the stems sharing its time, minutes)} from "The chapters at a glance"."""
    text = GUIDE.read_text(encoding="utf-8")
    table = text.split("## The chapters at a glance", 1)[1].split("\n## ", 1)[0]
    out = {}
    for row in table.splitlines():
        if not row.startswith("| ") or " min |" not in row:
            continue
        first, *_, last = [c.strip() for c in row.strip().strip("|").split("|")]
        stems = list(dict.fromkeys(re.findall(r"\(chapters/(\w+)\.ipynb\)", first)))
        times = [int(t) for t in re.findall(r"\d+", last)]
        if len(times) == 1:
            for stem in stems:
                out[stem] = (tuple(stems), times[0])
        else:
            assert len(times) == len(stems), row
            for stem, minutes in zip(stems, times):
                out[stem] = ((stem,), minutes)
    return out


def expand(units_text):
    """"opening, §1-3" -> ["opening", "§1", "§2", "§3"]."""
    out = []
    for item in re.split(r", | and ", units_text):
        span = re.fullmatch(r"§(\d+)-(\d+)", item)
        if span:
            out += [f"§{i}" for i in range(int(span[1]), int(span[2]) + 1)]
        else:
            out.append(item)
    return out


def share(stem, names, times=None):
    """The minutes the rule gives these units of a page."""
    group, minutes = (times or glance())[stem]
    whole = sum(sum(units(s).values()) for s in group)
    mine = units(stem)
    missing = [n for n in names if n not in mine]
    assert not missing, f"{stem} has no {missing}"
    return minutes * sum(mine[n] for n in names) / whole


def plans(text=None):
    """[(title, body, blocks)], blocks = [(start, end, tag, row)]."""
    text = text or GUIDE.read_text(encoding="utf-8")
    out = []
    for match in re.finditer(r"^## (Lesson plan \d+[a-z]?: .*)$", text, flags=re.M):
        body = text[match.end():].split("\n## ", 1)[0]
        blocks = [(int(a), int(b), tag, row) for row, a, b, tag in re.findall(
            r"^(\| (\d+)-(\d+) \| \*\*([^*]+)\*\*.*)$", body, flags=re.M)]
        out.append((match.group(1), body, blocks))
    return out


PLANS = plans()


def paragraph(body, label):
    end = r"(?=\n\n|\n\*\*|\n\||\s*\Z)"
    found = re.search(rf"^\*\*{label}:\*\*(.*?){end}", body, flags=re.M | re.S)
    assert found, f"no **{label}:**"
    return found.group(1)


def test_the_guide_has_a_plan_per_two_chapters_and_masking_with_multihead():
    assert len(PLANS) >= 12, [t for t, _, _ in PLANS]
    taught = set()
    for title, body, blocks in PLANS:
        taught |= {stem_of(m.group(1)) for _, _, tag, _ in blocks
                   for m in [REF.match(tag)] if m}
    # every page of the book is taught in class by some plan, or read for one
    before = " ".join(paragraph(b, "Before class") + paragraph(b, "Homework")
                      for _, b, _ in PLANS)
    named = taught | {stem_of(p) for p in re.findall(r"\b(\d\d[a-z]?)\b(?= |\)|,|\.)", before)
                      if list((ROOT / "chapters").glob(f"{p}_*.ipynb"))}
    pages = {p.stem for p in (ROOT / "chapters").glob("*.ipynb")}
    assert pages <= named, sorted(pages - named)
    both = [t for t, _, blocks in PLANS
            if {"06", "08"} <= {tag[:2] for _, _, tag, _ in blocks if REF.match(tag)}]
    assert both, "no plan teaches masking (06) and multi-head attention (08) in one lesson"


@pytest.mark.parametrize("title,body,blocks", PLANS, ids=[p[0][:14] for p in PLANS])
def test_a_plan_fits_its_90_minutes_by_the_guides_rule(title, body, blocks):
    times = glance()
    assert blocks, f"{title}: no minute-by-minute table"
    starts = [a for a, _, _, _ in blocks]
    ends = [b for _, b, _, _ in blocks]
    assert starts[0] == 0 and ends[-1] == 90 and starts[1:] == ends[:-1], \
        f"{title}: the blocks do not run 0-90 without a gap: {list(zip(starts, ends))}"
    length = {tag: 0 for _, _, tag, _ in blocks}
    exercises = 0
    taught = {}
    for a, b, tag, row in blocks:
        minutes = b - a
        assert minutes > 0, row
        ref = REF.fullmatch(tag)
        if tag == "Open":
            assert (a, minutes) == (0, 5), f"{title}: five minutes to open the notebooks first"
        elif tag == "Quick check":
            assert b == 90 and 3 <= minutes <= 5, f"{title}: a quick check of 3-5 minutes ends it"
        elif tag == "Exercises":
            exercises += minutes
        elif tag.startswith("Recap of "):
            assert minutes <= 10, row
            for prefix in re.findall(r"\d\d[a-z]?", tag):
                assert prefix in paragraph(body, "Before class"), \
                    f"{title}: a recap of {prefix}, which Before class does not set"
        elif ref:
            stem, names = stem_of(ref.group(1)), expand(ref.group(2))
            rule = share(stem, names, times)
            assert abs(minutes - rule) <= 1, \
                f"{title}: {tag} takes {minutes} min; the rule gives {rule:.1f}"
            for name in names:
                assert name not in taught.get(stem, {}), f"{title}: {stem} {name} twice"
                taught.setdefault(stem, {})[name] = minutes
        else:
            raise AssertionError(f"{title}: a block the rule does not know: {tag!r}")
        length[tag] += minutes
    assert 10 <= exercises <= 25, f"{title}: {exercises} min of exercises in class, not 10-25"
    assert sum(b - a for a, b, _, _ in blocks) == 90
    # what does not fit moves out of class, and the plan says where
    outside = paragraph(body, "Before class") + paragraph(body, "Homework")
    moved = {(stem_of(m.group(1)), n) for m in REF.finditer(outside) for n in expand(m.group(2))}
    for stem, names in taught.items():
        rest = [n for n in units(stem) if n not in names and (stem, n) not in moved]
        assert not rest, f"{title}: {stem} {rest} neither in class nor set before or after"
        in_class = sum(share(stem, [n], times) for n in names)
        minutes = sum(b - a for a, b, tag, _ in blocks
                      if REF.fullmatch(tag) and stem_of(REF.fullmatch(tag).group(1)) == stem)
        assert abs(minutes - in_class) <= 1, (title, stem, minutes, in_class)
    # each plan names its prerequisites, its decks (both languages) and its exercises
    paragraph(body, "Prerequisites")
    decks = paragraph(body, "Decks")
    for stem in taught:
        assert f"`{stem}`" in decks, f"{title}: the deck of {stem} is not named"
    assert "in class" in body.lower() or any(t == "Exercises" for _, _, t, _ in blocks)


def test_the_chinese_plans_keep_the_english_minutes():
    zh = (ROOT / "zh" / "instructor_guide.md").read_text(encoding="utf-8")
    en = GUIDE.read_text(encoding="utf-8")
    pattern = r"^\| (\d+-\d+) \|"
    assert re.findall(pattern, zh, flags=re.M) == re.findall(pattern, en, flags=re.M)
    assert len(re.findall(r"^## 教案\d+[a-z]?：", zh, flags=re.M)) == len(PLANS)


def test_the_rule_reproduces_the_guides_own_example():
    # plan 2 of the guide as it was: Masking §7 is 13 of its 75 minutes
    assert round(share("06_masking", ["§7"])) == 13
    assert round(share("06_masking", [n for n in units("06_masking") if n != "§7"])) == 62


def test_the_guide_points_to_every_chinese_material():
    en = GUIDE.read_text(encoding="utf-8")
    for needle in ("slides/zh/", "student/zh/", "pdf/zh/", "_build/html/zh/"):
        assert needle in en, needle


def test_the_course_table_agrees_with_the_plans():
    text = GUIDE.read_text(encoding="utf-8")
    table = text.split("**The course at a glance.**", 1)[1].split("\n\n**", 1)[0]
    rows = re.findall(r"^\| (\d+)[^|]* \|(.*)\|(.*)\|(.*)\|$", table, flags=re.M)
    assert [int(r[0]) for r in rows] == list(range(1, len(PLANS) + 1))
    chapter = re.compile(r"\b\d\d[a-z]?\b")
    for (number, before, during, after), (title, body, blocks) in zip(rows, PLANS):
        assert title.startswith(f"Lesson plan {number}:"), (number, title)
        taught = {m.group(1) for _, _, tag, _ in blocks for m in [REF.fullmatch(tag)] if m}
        assert set(chapter.findall(during)) == taught, (title, during, taught)
        for cell, label in ((before, "Before class"), (after, "Homework")):
            named = set(chapter.findall(paragraph(body, label)))
            assert set(chapter.findall(cell)) <= named, (title, label, cell)
