"""The checkers of the Triton exercises (pages 17d, 17e), run in Triton's interpreter:
a right answer passes, and each plausible wrong one (tests/triton_learner.py) fails
with its own hint and no other's."""

import pytest

from attnbook import check
from checker_hints import run
from optional import needs

pytestmark = needs("torch", "triton")


@pytest.fixture(scope="module")
def learner():
    from attnbook.kernels import load_triton

    load_triton()
    import triton_learner

    return triton_learner


CHECKERS = {
    "load": (check.check_load_tile, "load_right", {
        "load_no_mask": "no mask: rows past the end",
        "load_drops_tail": "the mask drops the tail",
        "load_le": "one row too many",
        "load_minus_one": "one row too few",
        "load_offset_mask": "the offset inside the block",
        "load_column_major": "column-major",
        "load_flat_mask": "broadcasts along the columns",
        "load_stride_n_rows": "the columns step by n_rows",
        "load_block_number": "start was taken as a block number",
        "load_no_start": "start is left out",
        "load_stride_block": "the rows step by BLOCK",
    }),
    "update": (check.check_online_update, "update_right", {
        "update_l_only": "the accumulator is not rescaled",
        "update_acc_only": "l is not rescaled",
        "update_flipped": "the exponent is flipped",
        "update_keeps_max": "the maximum is not updated",
        "update_wrong_axis": "taken down the columns (axis 0)",
        "update_normalises": "divided by l at every tile",
        "update_p_old_max": "against the OLD maximum",
        "update_alpha_columns": "alpha rescaled the columns of acc",
        "update_l_axis0": "l summed p down the columns",
        "update_v_transposed": "p times v transposed",
        "update_tile_max": "this tile's maximum alone",
        "update_swapped": "in this order",
    }),
    "causal": (check.check_causal_key_end, "end_right", {
        "end_skips_diagonal": "the diagonal tile is skipped",
        "end_first_row": "first row plus one",
        "end_one_too_many": "one tile too many",
        "end_no_skip": "no skip",
        "end_uncapped": "not capped at N",
        "end_key_blocks": "whatever BLOCK_K is",
        "end_tile_count": "a number of tiles (i + 1)",
        "end_one_key_too_many": "a key too many, even capped",
        "end_capped_n_minus_one": "capped at N - 1",
    }),
    "dots": (check.check_row_dots, "dots_right", {
        "dots_do_alone": "D_i from dO alone",
        "dots_o_alone": "D_i from O alone",
        "dots_product_of_sums": "the two row sums multiplied",
        "dots_whole_tile": "summed over the whole tile",
        "dots_scaled": "scaled by 1 / sqrt(d)",
        "dots_axis0": "summed over axis 0",
        "dots_negated": "the sign is flipped",
        "dots_do_squared": "the tile of dO multiplied by itself",
        "dots_o_squared": "the tile of O multiplied by itself",
        "dots_mean": "averaged over the D columns",
    }),
}

WRONG = [(piece, name) for piece, (_, _, hints) in CHECKERS.items() for name in hints]


@pytest.mark.parametrize("piece", sorted(CHECKERS))
def test_the_right_answer_passes(piece, learner):
    checker, right, _ = CHECKERS[piece]
    passed, report = run(checker, getattr(learner, right))
    assert passed, report


@pytest.mark.parametrize("piece, name", WRONG, ids=[n for _, n in WRONG])
def test_each_mistake_gets_its_own_hint(piece, name, learner):
    checker, _, hints = CHECKERS[piece]
    passed, report = run(checker, getattr(learner, name))
    assert not passed
    flat = " ".join(report.split())
    assert "hint: " + hints[name] in flat or hints[name] in flat, report
    others = [w for n, w in hints.items() if n != name]
    assert not any(w in flat for w in others), report


def test_nothing_rescaled_gets_both_rescale_hints(learner):
    """Rescaling neither l nor acc is the two mistakes at once: both hints, and no other."""
    passed, report = run(check.check_online_update, learner.update_none)
    flat = " ".join(report.split())
    assert not passed and "the accumulator is not rescaled" in flat, report
    assert "l is not rescaled" in flat and "flipped" not in flat, report


def test_a_stub_is_not_done_yet_and_a_plain_function_is_told_to_use_jit():
    def stub(ptr, start, n_rows, D, BLOCK):
        raise NotImplementedError

    def plain(ptr, start, n_rows, D, BLOCK):
        return None

    assert "not done yet" in run(check.check_load_tile, stub)[1]
    assert "put @triton.jit on the line above" in run(check.check_load_tile, plain)[1]
