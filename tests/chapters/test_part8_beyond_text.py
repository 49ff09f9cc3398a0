"""Part VIII's chapters 21-22 (sparse and linear attention): each page within
the 30-minute rule, in the table of contents, its answer key and checkers named
where the book says they are."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["21_sparse_attention", "22_linear_attention", "22b_hybrid_models"]


def _cells(stem, kind):
    nb = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind]


@pytest.mark.parametrize("stem", PAGES)
def test_page_fits_in_30_minutes(stem):
    words = sum(len(re.findall(r"\w+", s)) for s in _cells(stem, "markdown"))
    lines = sum(len(s.splitlines()) for s in _cells(stem, "code"))
    assert words / 200 + lines / 25 <= 30, (stem, words, lines)


def test_pages_are_in_the_table_of_contents_in_order():
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    at = [toc.index(f"chapters/{stem}") for stem in ["20_qk_norm_gates"] + PAGES]
    assert at == sorted(at)


def test_guide_and_sources_name_the_pages():
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    sources = (ROOT / "sources.md").read_text(encoding="utf-8")
    for stem in PAGES:
        assert f"chapters/{stem}.ipynb" in guide and f"chapters/{stem}.ipynb" in sources, stem
    for name in ("check.check_topk_mask", "check.check_delta_rule_step"):
        assert name in guide


def test_glossary_names_the_new_terms_without_spaces_around_latin():
    glossary = (ROOT / "glossary.md").read_text(encoding="utf-8")
    for english, chinese in [("sparse attention", "稀疏注意力"), ("linear attention", "线性注意力"),
                             ("Gated DeltaNet", "门控DeltaNet"),
                             ("indexer (lightning indexer)", "闪电索引器 (lightning indexer), 索引器")]:
        assert f"| {english} | {chinese} |" in glossary, english
