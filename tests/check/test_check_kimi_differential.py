"""The checkers of chapters 20b and 22c: the answer key passes; every listed
wrong answer fails with its own hint and no other's; no two mistakes give
the same result on every case; an update in place is caught."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check import differential as check_diff
from attnbook.check import kimi as check_kimi

from checker_hints import assert_its_hint, run


def _kimi_step(state, q, k, v, g, beta):
    o, s = ref.kimi_delta_rule(q[..., None, :], k[..., None, :], v[..., None, :],
                               g[..., None, :], beta[..., None], initial_state=state)
    return o[..., 0, :], s


def test_kimi_answer_key_passes():
    assert run(check.check_kimi_delta_step, _kimi_step)[0]


# The wrong answers of kimi_delta_step, by the words of their hints.
KIMI_MISTAKES = {
    "one decay per token (per token instead of per channel)": "ONE number per token",
    "chapter 22's scalar gate broadcast (d_k, d_k, d_v)": "as chapter 22's gate",
    "one decay per token, the sum of g": "SUM of g",
    "decay on the value axis": "along the VALUE axis",
    "gate after the update": "decayed AFTER the update",
    "no gate": "was not decayed at all",
    "g instead of exp(g)": "multiplied by g itself",
    "prediction from the undecayed state": "before its decay",
    "no correction (plain linear attention)": "nothing was subtracted",
    "output from the decayed, not updated state": "before this token's write",
    "query not scaled": "the query was not scaled",
    "(state, output) returned in the wrong order": "the output first",
    "output scaled by 1/sqrt(d_v)": "divided by sqrt(d_v): the scale",
    "S read as S x (transposed read)": "S was read the wrong way round",
    "the write v k^T (transposed outer product)": "the write was v k^T",
    "beta left out": "beta was left out",
    "decay exp(-g)": "the decay was exp(-g)",
    "decay sigmoid(g)": "the decay was sigmoid(g)",
}


@pytest.mark.parametrize("index", range(len(KIMI_MISTAKES)), ids=list(KIMI_MISTAKES))
def test_kimi_step_rejects_each_mistake_with_its_hint(index):
    assert_its_hint(check.check_kimi_delta_step, check_kimi.kimi_step_mistakes(),
                    KIMI_MISTAKES, index)


def _distinct(cases, mistakes, parts):
    results = []
    for m in mistakes:
        row = []
        for c in cases:
            try:
                row.append(parts(m.fn(*c.args)))
            except ValueError:
                row.append(None)
        results.append(row)
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            same = all((a is None and b is None) or (
                a is not None and b is not None
                and all(np.allclose(x, y) for x, y in zip(a, b)))
                for a, b in zip(results[i], results[j]))
            assert not same, (i, j)


def test_no_two_kimi_mistakes_agree_on_every_case():
    _distinct(check_kimi.kimi_step_cases(), check_kimi.kimi_step_mistakes(),
              lambda r: r)


def test_kimi_update_in_place_is_named():
    def in_place(state, q, k, v, g, beta):
        state *= np.exp(g)[..., :, None]
        return _kimi_step(state, q, k, v, np.zeros_like(g), beta)
    passed, report = run(check.check_kimi_delta_step, in_place)
    assert not passed and "in place" in report


def test_gated_delta_rule_reused_is_named():
    """Reusing chapter 22's step with a vector g raises or mis-shapes; the
    report says what went wrong rather than crashing."""
    passed, report = run(check.check_kimi_delta_step, ref.delta_rule_step)
    assert not passed and "check_kimi_delta_step" in report


def test_differential_answer_key_passes():
    def answer(q1, k1, q2, k2, v, lam, lam_init):
        return ref.differential_attention(q1, k1, q2, k2, v, lam, lambda_init=lam_init)
    assert run(check.check_differential_attention, answer)[0]
    assert run(check.check_differential_attention, lambda *a: answer(*a)[0])[0]


DIFF_MISTAKES = {
    "lambda sign (maps added)": "were ADDED",
    "one softmax of the score difference": "SCORES were subtracted",
    "no head-wise norm": "no head-wise norm",
    "norm before the subtraction (its placement)": "BEFORE the subtraction",
    "missing (1 - lambda_init)": "(1 - lambda_init) is missing",
    "times lambda_init instead of 1 - lambda_init": "multiplied by lambda_init itself",
    "LayerNorm instead of RMSNorm": "subtracted the mean",
    "norm over the queries axis": "ran over the queries",
    "scaled by sqrt(d_v)": "divided by sqrt(d_v)",
    "not scaled": "were not scaled",
    "softmax over the queries axis": "softmax was taken down the queries",
    "pairs crossed (q1 k2, q2 k1)": "the pairs were crossed",
    "lambda on both maps": "lambda multiplied both maps",
    "RMSNorm epsilon 1e-6": "epsilon is not 1e-5",
    "(weights, output) returned in the wrong order": "(weights, output): return",
}


@pytest.mark.parametrize("index", range(len(DIFF_MISTAKES)), ids=list(DIFF_MISTAKES))
def test_differential_rejects_each_mistake_with_its_hint(index):
    assert_its_hint(check.check_differential_attention, check_diff.differential_mistakes(),
                    DIFF_MISTAKES, index)


def test_no_two_differential_mistakes_agree_on_every_case():
    _distinct(check_diff.differential_cases(), check_diff.differential_mistakes(),
              lambda r: r)


def test_a_checker_survives_a_function_that_raises():
    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    for checker in (check.check_kimi_delta_step, check.check_differential_attention):
        passed, report = run(checker, broken)
        assert not passed and "boom" in report


@pytest.mark.parametrize("bad, words", [
    (dict(g="per token"), "one log-decay"),
    (dict(beta="wrong"), "beta must have shape"),
    (dict(state="wrong"), "initial_state must have shape"),
])
def test_kimi_answer_key_errors_are_clear(bad, words):
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(2, 2, 5, 3))
    v = rng.normal(size=(2, 5, 4))
    g = -rng.uniform(size=(2, 5, 3))
    beta = rng.uniform(size=(2, 5))
    state = None
    if "g" in bad:
        g = g[..., 0]
    if "beta" in bad:
        beta = beta[..., None]
    if "state" in bad:
        state = np.zeros((2, 4, 3))
    for fn in (ref.kimi_delta_rule, ref.chunked_kimi_delta_rule):
        with pytest.raises(ValueError, match=words):
            fn(q, k, v, g, beta, initial_state=state)


def test_kimi_with_equal_channels_is_gated_delta_rule():
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=(2, 3, 8, 4))
    v, g, beta = rng.normal(size=(3, 8, 2)), -rng.uniform(size=(3, 8)), rng.uniform(size=(3, 8))
    o, s = ref.kimi_delta_rule(q, k, v, np.repeat(g[..., None], 4, -1), beta)
    o2, s2 = ref.gated_delta_rule(q, k, v, g, beta)
    np.testing.assert_allclose(o, o2, atol=1e-13)
    np.testing.assert_allclose(s, s2, atol=1e-13)


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64])
def test_kimi_chunked_equals_recurrent(chunk):
    rng = np.random.default_rng(2)
    q, k = rng.normal(size=(2, 2, 3, 9, 4))
    v, g = rng.normal(size=(2, 3, 9, 5)), -rng.uniform(0, 2, size=(2, 3, 9, 4))
    beta, s0 = rng.uniform(size=(2, 3, 9)), rng.normal(size=(2, 3, 4, 5))
    o, s = ref.kimi_delta_rule(q, k, v, g, beta, initial_state=s0)
    o2, s2 = ref.chunked_kimi_delta_rule(q, k, v, g, beta, chunk_size=chunk, initial_state=s0)
    np.testing.assert_allclose(o2, o, atol=1e-12)
    np.testing.assert_allclose(s2, s, atol=1e-12)


def test_differential_answer_key_basics():
    rng = np.random.default_rng(3)
    q1, k1, q2, k2 = rng.normal(size=(4, 2, 5, 3))
    v = rng.normal(size=(2, 5, 6))
    _, w = ref.differential_attention(q1, k1, q2, k2, v, 0.3)
    np.testing.assert_allclose(w.sum(-1), 0.7, atol=1e-14)      # rows sum to 1 - lambda
    o, w = ref.differential_attention(q1, k1, q1, k1, v, 1.0)
    assert np.abs(w).max() < 1e-15 and np.abs(o).max() < 1e-15  # equal maps cancel
    assert ref.differential_lambda_init(0) == pytest.approx(0.2)
    assert ref.differential_lambda(np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3),
                                   0.2) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="one shape"):
        ref.differential_attention(q1, k1, q2[..., :2], k2, v, 0.3)
    with pytest.raises(ValueError, match="broadcast"):
        ref.differential_attention(q1, k1, q2, k2, v, np.ones(3))
    with pytest.raises(ValueError, match="from 0"):
        ref.differential_lambda_init(-1)


def test_differential_rule_names_what_no_mistake_computes():
    """Scores subtracted and no norm at all (two mistakes at once): the rule
    points at the norm; the right norm around a wrong map: at the map."""
    def sm(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def two_at_once(q1, k1, q2, k2, v, lam, lam_init):
        d = q1.shape[-1]
        return sm((q1 @ np.swapaxes(k1, -1, -2) - lam * q2 @ np.swapaxes(k2, -1, -2))
                  / np.sqrt(d)) @ v

    def maps_swapped(q1, k1, q2, k2, v, lam, lam_init):
        # softmax_2 - lam softmax_1: the norm right around a wrong map
        return ref.differential_attention(q2, k2, q1, k1, v, lam,
                                          lambda_init=lam_init)

    passed, report = run(check.check_differential_attention, two_at_once)
    assert not passed and "root mean square 1 - lambda_init once" in " ".join(report.split())
    passed, report = run(check.check_differential_attention, maps_swapped)
    assert not passed and "so the map is wrong" in " ".join(report.split())
