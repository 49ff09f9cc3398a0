"""The checkers of chapter 21: the answer key passes; every listed wrong
answer fails with its own hint; no two mistakes give the same result on
every case."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check import sparse as check_sparse

from checker_hints import assert_its_hint, run


def test_answer_key_passes():
    assert run(check.check_topk_mask, ref.topk_mask)[0]


def test_an_argpartition_answer_passes_too():
    """A correct answer written another way (argpartition, indices scattered
    into a mask) passes: the cases have no ties."""
    def topk_mask(scores, top_k, mask=None):
        s = scores if mask is None else np.where(mask, scores, -np.inf)
        k = min(top_k, s.shape[-1])
        idx = np.argpartition(-s, k - 1, axis=-1)[..., :k]
        keep = np.zeros(s.shape, dtype=bool)
        np.put_along_axis(keep, idx, True, axis=-1)
        return keep & np.isfinite(s)
    assert run(check.check_topk_mask, topk_mask)[0]


# The wrong answers of topk_mask, by the words of their hints.
TOPK_MISTAKES = {
    "mask applied after the top-k": "applied after the top-k",
    "mask ignored": "not applied at all",
    "hidden keys' scores set to 0, not -inf": "set to 0, which",
    "hidden keys set to 0 before the top-k, then & mask": "set to 0, not -inf, before",
    "hidden keys ranked but not dropped (no np.isfinite)": "kept hidden keys too",
    "lowest scores kept": "LOWEST",
    "top_k + 1 keys kept": "one key too many",
    "top-k over the queries (axis -2)": "down each column",
}


@pytest.mark.parametrize("index", range(len(TOPK_MISTAKES)), ids=list(TOPK_MISTAKES))
def test_topk_mask_rejects_each_mistake_with_its_hint(index):
    assert_its_hint(check.check_topk_mask, check_sparse.topk_mistakes(), TOPK_MISTAKES, index)


def test_returned_indices_get_a_hint_that_fixes_them():
    """Indices of the kept keys (not a mask): .astype(bool) would not fix
    them, so the report must not say only that (issue 33)."""
    def indices(scores, top_k, mask=None):
        s = scores if mask is None else np.where(mask, scores, -np.inf)
        return np.argsort(-s, axis=-1)[..., :top_k]
    passed, report = run(check.check_topk_mask, indices)
    flat = " ".join(report.split())
    assert not passed and "these look like indices" in flat, report
    assert "put_along_axis" in flat, report


def test_no_two_mistakes_agree_on_every_case():
    cases = check_sparse.topk_cases()
    results = [[np.asarray(m.fn(*c.args, **c.kwargs)) for c in cases]
               for m in check_sparse.topk_mistakes()]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            assert not all(np.array_equal(a, b) for a, b in zip(results[i], results[j])), (i, j)


def test_cases_have_no_ties():
    for case in check_sparse.topk_cases():
        rows = case.args[0].reshape(-1, case.args[0].shape[-1])
        assert all(len(np.unique(r)) == len(r) for r in rows), case.label


def test_a_checker_survives_a_function_that_raises():
    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    passed, report = run(check.check_topk_mask, broken)
    assert not passed and "boom" in report
