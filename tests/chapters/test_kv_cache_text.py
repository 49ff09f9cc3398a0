"""The text of chapters 14 (both pages), 15 and 16: claims found untrue in
issue 21 stay retired, and the facts that replaced them stay in the pages.
The numbers themselves are asserted by the pages' own cells (nbval runs
them); this file checks what only the text shows."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = {stem: ROOT / "chapters" / f"{stem}.ipynb" for stem in (
    "14_kv_cache", "14b_cost_and_windows", "15_grouped_query", "16_latent_attention")}


def text(stem, kind="markdown"):
    nb = json.loads(PAGES[stem].read_text(encoding="utf-8"))
    return " ".join(" ".join("".join(c["source"]) for c in nb["cells"]
                             if c["cell_type"] == kind).split())


RETIRED = {
    "14_kv_cache": ["nothing could be kept", "the cached curve stays flat"],
    "14b_cost_and_windows": ["the cached curve stays flat", "stays flat",
                             "(it is memory-bound)"],
    "16_latent_attention": ["a latent of rank", "rank-512 latent", "latent of rank $r",
                            "would not fit on any accelerator"],
}


@pytest.mark.parametrize("stem", sorted(RETIRED))
def test_retired_claims_stay_retired(stem):
    page = text(stem)
    for claim in RETIRED[stem]:
        assert claim not in page, f"{stem}: {claim!r} is back"


def test_the_pages_say_what_replaced_them():
    assert "only the first layer's keys and values could be kept" in text("14_kv_cache")
    p2 = text("14b_cost_and_windows")
    assert "memory-bound" in p2 and "FLOPs per byte" in text("14b_cost_and_windows", "code")
    assert "`context_len`" in p2 and "max_position_embeddings" in p2
    assert re.search(r"context_len = 8192\s+# Mistral 7B paper, Table 1",
                     text("14b_cost_and_windows", "code"))
    assert "threadpool_info" in text("14b_cost_and_windows", "code")
    assert "layout of the checkpoints" in text("15_grouped_query")
    mla = text("16_latent_attention")
    for phrase in ('"nope"', "*down*-projection", "*up*-projection", "folds into",
                   "one absorbed matrix per offset"):
        assert phrase in mla, phrase


def test_no_page_sets_blas_threads_through_the_environment():
    # BLAS reads OMP_NUM_THREADS and friends once, when NumPy is imported
    for stem in PAGES:
        code = text(stem, "code")
        assert "NUM_THREADS" not in code, stem


def test_every_page_fits_in_30_minutes():
    for stem, path in PAGES.items():
        nb = json.loads(path.read_text(encoding="utf-8"))
        words = sum(len(re.findall(r"\w+", "".join(c["source"])))
                    for c in nb["cells"] if c["cell_type"] == "markdown")
        lines = sum(len("".join(c["source"]).splitlines())
                    for c in nb["cells"] if c["cell_type"] == "code")
        assert words / 200 + lines / 25 <= 30, (stem, words, lines)
