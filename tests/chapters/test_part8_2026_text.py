"""Part VIII's pages on 2026's models (19b Gemma 4, 21b DeepSeek-V4): each within the
30-minute rule, in the table of contents under its chapter, named with its checkers by the
instructor guide and the sources, its terms in the glossary; the caption says 2025-2026."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = {"19b_gemma4_kv_sharing": "19_local_global_sinks",
         "21b_compressed_attention": "21_sparse_attention"}
CHECKERS = {"19b_gemma4_kv_sharing": ["check.check_kv_source_layers",
                                      "check.check_k_eq_v_key_value"],
            "21b_compressed_attention": ["check.check_compress_kv",
                                         "check.check_compressed_causal_mask"]}


def _cells(stem, kind):
    nb = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == kind]


@pytest.mark.parametrize("stem", PAGES)
def test_page_fits_in_30_minutes(stem):
    words = sum(len(re.findall(r"\w+", s)) for s in _cells(stem, "markdown"))
    lines = sum(len(s.splitlines()) for s in _cells(stem, "code"))
    assert words / 200 + lines / 25 <= 30, (stem, words, lines)


@pytest.mark.parametrize("stem", PAGES)
def test_page_is_a_section_of_its_chapter(stem):
    toc = (ROOT / "_toc.yml").read_text(encoding="utf-8")
    parent = toc.index(f"file: chapters/{PAGES[stem]}")
    after = toc[parent:].split("\n      - file:", 1)[0]
    assert f"file: chapters/{stem}" in after
    assert "Part VIII: attention in 2025-2026's open models" in toc


@pytest.mark.parametrize("stem", PAGES)
def test_guide_and_sources_name_the_page_and_its_checkers(stem):
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    sources = (ROOT / "sources.md").read_text(encoding="utf-8")
    assert f"chapters/{stem}.ipynb" in guide and f"chapters/{stem}.ipynb" in sources
    for name in CHECKERS[stem]:
        assert name in guide and name in "\n".join(_cells(stem, "markdown")), name


def test_glossary_names_the_new_terms():
    glossary = (ROOT / "glossary.md").read_text(encoding="utf-8")
    for english, chinese in [("Heavily Compressed Attention (HCA)", "重度压缩注意力 (HCA)"),
                             ("Compressed Sparse Attention (CSA)", "压缩稀疏注意力 (CSA)"),
                             ("compression rate", "压缩率"), ("compressed entry", "压缩条目"),
                             ("key-value sharing (across layers)", "跨层键值共享"),
                             ("partial RoPE", "部分旋转位置编码 (部分RoPE)")]:
        assert f"| {english} | {chinese} |" in glossary, english
