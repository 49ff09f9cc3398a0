"""Part IX's pages (24, 24b, 25: serving scale and attention across devices): each page
within the 30-minute rule, in the table of contents after Part VIII, named in the guide,
the sources, the intro and the glossary; the Ulysses and ring claims of the prose hold."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["24_paged_kv_cache", "24b_continuous_batching", "25_ring_attention"]


def _cells(stem, kind):
    nb = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind]


def minutes(stem):
    words = sum(len(re.findall(r"\w+", s)) for s in _cells(stem, "markdown"))
    lines = sum(len(s.splitlines()) for s in _cells(stem, "code"))
    return words / 200 + lines / 25


@pytest.mark.parametrize("stem", PAGES)
def test_page_fits_in_30_minutes(stem):
    assert minutes(stem) <= 30, (stem, minutes(stem))


def test_pages_are_in_the_table_of_contents_after_part_8():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    at = [toc.index(s) for s in ["chapters/22b_hybrid_models", "Part IX"]
          + [f"chapters/{stem}" for stem in PAGES] + ["For teachers"]]
    assert at == sorted(at)


def test_front_matter_names_the_pages():
    for page in ("instructor_guide.md", "sources.md", "intro.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        for stem in PAGES:
            assert f"chapters/{stem}.ipynb" in text, (page, stem)
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    for name in ("check.check_paged_attention", "check.check_varlen_attention",
                 "check.check_ring_attention", "check.check_zigzag_positions"):
        assert name in guide
    glossary = (ROOT / "glossary.md").read_text(encoding="utf-8")
    for term in ("block table", "ring attention", "zigzag split", "continuous batching",
                 "copy-on-write", "all-to-all"):
        assert f"| {term}" in glossary, term
