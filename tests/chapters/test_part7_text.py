"""The text of Part VII (pages 17, 17b, 17c and chapter 18): claims that were
once wrong (issue 21) stay retired, and the pages keep the book's shape.

The numbers behind each fix are asserted in the pages themselves (nbval runs
them); this file checks what only the text or the code's shape shows.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["17_flash_attention", "17b_tiled_attention", "17c_flash_attention_backward",
         "18_attention_cost"]


def cells(stem):
    nb = json.loads((ROOT / "chapters" / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return [(c["cell_type"], "".join(c["source"])) for c in nb["cells"]]


def text(stem, kind=None):
    return "\n".join(s for t, s in cells(stem) if kind in (None, t))


RETIRED = {
    # "exact" said without "up to rounding"
    "17_flash_attention": ["Its output is exactly the same, not an approximation",
                           "e^(m_j-1 - m_j)", "The difference printed is of the size"],
    "17b_tiled_attention": ["The log-sum-exp is all the backward pass needs",
                            "e^(m_j-1 - m_j)",
                            # issue 30: digits that another machine's BLAS changes
                            "In float32 the same differences are about $10^{-7}$",
                            "about $10^{-16}$ in float64, $10^{-7}$ in float32"],
    "18_attention_cost": ["measures the machine's ceiling", "What is the most this machine can do?",
                          "Each tile of scores is", "the largest block is usually fastest",
                          "NumPy matmul ceiling\")"],
}


@pytest.mark.parametrize("stem", sorted(RETIRED))
def test_retired_sentences_stay_retired(stem):
    page = text(stem)
    for sentence in RETIRED[stem]:
        assert sentence not in page, f"{stem}: {sentence!r} is back"


@pytest.mark.parametrize("stem", PAGES)
def test_every_page_has_an_opening_summary_and_exercises(stem):
    md = text(stem, "markdown")
    assert md.lstrip().startswith("# ")
    assert "**You will learn**" in md and "```{admonition} Source" in md
    assert "## Summary" in md and "## Exercises" in md


def test_one_name_for_the_running_output():
    # the unnormalised running output is o on every page (issue 21: O, o and acc)
    for stem in PAGES[:3]:
        code = text(stem, "code")
        assert not re.search(r"\bacc\b", code), f"{stem} names the running output acc"
    assert "running output" in text("17_flash_attention", "markdown")


def test_the_tile_count_states_its_condition():
    md = text("17b_tiled_attention", "markdown")
    for sentence in re.findall(r"[^.]*T\(T\+1\)/2[^.]*\.", md):
        if "computes" in sentence or "computed" in sentence:
            assert "N_q = N_k" in sentence, sentence


def test_the_causal_figure_names_the_query_positions():
    code = text("17b_tiled_attention", "code")
    assert "queries at positions {first}-{n_k - 1}" in code


def test_the_speed_figure_is_linear_and_the_threads_are_limited_by_threadpoolctl():
    code = text("18_attention_cost", "code")
    assert 'set_yscale("log")' not in code
    assert "threadpool_limits(limits=1" in code and "threadpool_info()" in code
    assert "os.environ" not in code  # setting variables after numpy's import does nothing


def test_rounding_level_differences_are_printed_as_bounds():
    # issue 30: a difference at rounding level is asserted below a bound and the bound is
    # printed, never its digits (1e-16 here, 2e-16 or 0 on another machine's BLAS)
    raw = re.compile(r"\{[^{}]*(gap|\.max\(\))[^{}]*:\.\de\}")
    for stem in PAGES[:3]:
        code = text(stem, "code")
        assert not raw.search(code), f"{stem} prints a rounding-level difference's digits"
    code = text("17b_tiled_attention", "code")
    assert "g < b * eps[name]" in code and 'f"< {b:g} eps"' in code
    assert "< 1e-14, name" in text("17c_flash_attention_backward", "code")
