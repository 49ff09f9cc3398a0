"""Part I's checkers (attnbook.check.softmax, chapters 01-04) reject the wrong answers a
learner plausibly writes, each with the one hint that names it.

The wrong answers are written the way a learner would write them, independently of the
checkers' own list of known mistakes. Each entry gives the hint the report must print;
``None`` means no hint fits (the report then prints none). A report never prints the
hint of another mistake: the cases are chosen so that no two mistakes give the same
numbers on the case where they first fail.
"""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from attnbook import check
from attnbook.check import _wrong as H  # the shared hint texts of Parts I-III
from attnbook.check import softmax as P  # Part I's checkers and their own hints

ROOT = Path(__file__).resolve().parents[2]


from test_checkers_reject import assert_rejected as _assert_rejected  # noqa: E402
from test_checkers_reject import flat  # noqa: E402


def assert_rejected(checker, fn, hint, capsys):
    """Rejected, with exactly the hint given (or none)."""
    return _assert_rejected(checker, fn, hint, capsys, only=True)


# --- helpers a learner would write (sm ... sm_no_keepdims: shared with the Part II-III file) ---

from test_checkers_reject import sm, sm_global, sm_naive, sm_no_keepdims  # noqa: E402



def sm_min(x):
    e = np.exp(x - x.min(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sm_like_scipy(x):  # scipy.special.softmax(x) with its default axis=None
    e = np.exp(x - x.max())
    return e / e.sum()


SOFTMAX_WRONG = {
    "no maximum subtracted": (sm_naive, H.HINT_NAIVE),
    "one maximum for the whole array": (sm_global, H.HINT_GLOBAL),
    "axis 0": (lambda x: sm(x, axis=0), H.HINT_AXIS),
    "axis 1 (right for 2-D only)": (lambda x: sm(x, axis=1) if x.ndim > 1 else sm(x), H.HINT_AXIS),
    "max without keepdims": (sm_no_keepdims, H.HINT_KEEPDIMS),
    "sum without keepdims": (lambda x: np.exp(x - x.max(-1, keepdims=True))
                             / np.exp(x - x.max(-1, keepdims=True)).sum(-1), H.HINT_KEEPDIMS),
    "sum of the whole array": (lambda x: np.exp(x - x.max(-1, keepdims=True))
                               / np.exp(x - x.max(-1, keepdims=True)).sum(), H.HINT_SUM_ALL),
    "scipy.special.softmax without axis": (sm_like_scipy, "scipy.special.softmax"),
    "the minimum subtracted": (sm_min, P.HINT_MIN),
    "-inf replaced by 0": (lambda x: sm(np.nan_to_num(x, neginf=0.0)), P.HINT_NEGINF),
    "-inf replaced by 0 with np.where": (lambda x: sm(np.where(np.isinf(x), 0.0, x)),
                                        P.HINT_NEGINF),
}


@pytest.mark.parametrize("name", SOFTMAX_WRONG)
def test_softmax_rejects(name, capsys):
    fn, hint = SOFTMAX_WRONG[name]
    assert_rejected(check.check_softmax, fn, hint, capsys)


# --- check_scores --------------------------------------------------------------------

SCORES_WRONG = {
    "no scale": (lambda q, k: q @ k.T, H.HINT_NO_SCALE),
    "divided by dk": (lambda q, k: q @ k.T / k.shape[-1], H.HINT_DK),
    "times sqrt(dk)": (lambda q, k: q @ k.T * np.sqrt(k.shape[-1]), H.HINT_TIMES),
    "sqrt(Nk)": (lambda q, k: q @ k.T / np.sqrt(k.shape[0]), H.HINT_TOKENS),
    "sqrt(Nq)": (lambda q, k: q @ k.T / np.sqrt(q.shape[0]), H.HINT_TOKENS),
    "sqrt(len(k))": (lambda q, k: q @ k.T / np.sqrt(len(k)), H.HINT_TOKENS),
    "K @ Q.T": (lambda q, k: k @ q.T / np.sqrt(k.shape[-1]), H.HINT_TRANSPOSED),
    "Q @ K, no transpose": (lambda q, k: q @ k / np.sqrt(k.shape[-1]), P.HINT_NO_T),
    "np.dot(Q, K)": (lambda q, k: np.dot(q, k) / np.sqrt(k.shape[-1]), P.HINT_NO_T),
    "Q * K": (lambda q, k: q * k / np.sqrt(k.shape[-1]), P.HINT_ELEMENTWISE),
}


@pytest.mark.parametrize("name", SCORES_WRONG)
def test_scores_rejects(name, capsys):
    fn, hint = SCORES_WRONG[name]
    assert_rejected(check.check_scores, fn, hint, capsys)


# --- check_attention -----------------------------------------------------------------

def attention(Q, K, V, scale=None, softmax=sm, transpose=False):
    S = (K @ Q.T) if transpose else Q @ K.T
    S = S / (np.sqrt(K.shape[-1]) if scale is None else scale(Q, K, V))
    W = softmax(S)
    return W @ V, W


def sum_all(s):
    e = np.exp(s - s.max())
    return e / e.sum()


ATTENTION_WRONG = {
    "no scale": (lambda Q, K, V: attention(Q, K, V, lambda q, k, v: 1)[0], H.HINT_NO_SCALE),
    "divided by dk": (lambda Q, K, V: attention(Q, K, V, lambda q, k, v: k.shape[1])[0], H.HINT_DK),
    "times sqrt(dk)": (lambda Q, K, V: attention(
        Q, K, V, lambda q, k, v: 1 / np.sqrt(k.shape[1]))[0], H.HINT_TIMES),
    "sqrt(dv)": (lambda Q, K, V: attention(Q, K, V, lambda q, k, v: np.sqrt(v.shape[1]))[0],
                 H.HINT_DV),
    "sqrt(Nk)": (lambda Q, K, V: attention(Q, K, V, lambda q, k, v: np.sqrt(len(k)))[0],
                 H.HINT_TOKENS),
    "sqrt(Nq)": (lambda Q, K, V: attention(Q, K, V, lambda q, k, v: np.sqrt(q.shape[0]))[0],
                 H.HINT_TOKENS),
    "softmax over axis 0": (lambda Q, K, V: attention(
        Q, K, V, softmax=lambda s: sm(s, axis=0))[0], H.HINT_AXIS),
    "naive softmax": (lambda Q, K, V: attention(Q, K, V, softmax=sm_naive)[0], H.HINT_NAIVE),
    "global maximum": (lambda Q, K, V: attention(Q, K, V, softmax=sm_global)[0], H.HINT_GLOBAL),
    "max without keepdims": (lambda Q, K, V: attention(Q, K, V, softmax=sm_no_keepdims)[0],
                             H.HINT_KEEPDIMS),
    "weights divided by the sum of the whole matrix": (
        lambda Q, K, V: attention(Q, K, V, softmax=sum_all)[0], H.HINT_SUM_ALL),
    "K @ Q.T": (lambda Q, K, V: attention(Q, K, V, transpose=True)[0], H.HINT_TRANSPOSED),
    "Q @ K, no transpose": (lambda Q, K, V: sm(Q @ K / np.sqrt(K.shape[1])) @ V, P.HINT_NO_T),
    "returns the weights": (lambda Q, K, V: attention(Q, K, V)[1], H.HINT_WEIGHTS),
    "returns (weights, output)": (lambda Q, K, V: attention(Q, K, V)[::-1], H.HINT_WEIGHTS),
    "right output, weights before the softmax": (
        lambda Q, K, V: (attention(Q, K, V)[0], Q @ K.T / np.sqrt(K.shape[1])),
        P.HINT_SCORES_AS_WEIGHTS),
    "scores @ V without the softmax": (lambda Q, K, V: (Q @ K.T / np.sqrt(K.shape[1])) @ V,
                                       P.HINT_NO_SOFTMAX),
}


@pytest.mark.parametrize("name", ATTENTION_WRONG)
def test_attention_rejects(name, capsys):
    fn, hint = ATTENTION_WRONG[name]
    assert_rejected(check.check_attention, fn, hint, capsys)


def test_attention_labels_compute_the_largest_score(capsys):
    first = P.attention_cases()[0]
    q, k, _ = first.args
    top = (q @ k.T / np.sqrt(k.shape[-1])).max()
    assert f"{top:.2f}" in first.label and f"{top:.2f}" == "504.87"
    assert "290" not in " ".join(c.label for c in P.attention_cases())
    # the overflow case really overflows a naive exp, the offsets case really underflows a global one
    with np.errstate(all="ignore"):
        for case in P.attention_cases()[4:]:
            q, k, v = case.args
            s = q @ k.T / np.sqrt(k.shape[-1])
            assert np.isnan(sm_naive(s)).any() or np.isnan(sm_global(s)).any()


# --- check_soft_lookup ---------------------------------------------------------------

def lookup(query, keys, values, softmax=sm, scale=1.0):
    return softmax(keys @ query / scale) @ values


def ratio(query, keys, values):  # the scores divided by their sum
    s = keys @ query
    return (s / s.sum()) @ values


SOFT_LOOKUP_WRONG = {
    "naive softmax": (lambda q, k, v: lookup(q, k, v, sm_naive), H.HINT_NAIVE),
    "scaled by sqrt(d)": (lambda q, k, v: lookup(q, k, v, scale=np.sqrt(len(q))), "no scale"),
    "argmax one-hot": (lambda q, k, v: np.eye(len(k))[np.argmax(k @ q)] @ v, P.HINT_ARGMAX),
    "value of the best key": (lambda q, k, v: v[np.argmax(k @ q)], P.HINT_ARGMAX),
    "s / s.sum()": (ratio, P.HINT_RATIO),
    "s / np.sum(s) with np.dot": (lambda q, k, v: np.dot(np.dot(k, q) / np.sum(np.dot(k, q)), v),
                                  P.HINT_RATIO),
    "not normalised": (lambda q, k, v: np.exp(k @ q - (k @ q).max()) @ v, "without dividing"),
    "ignores the query": (lambda q, k, v: v.mean(axis=0), "the query is ignored"),
    "returns the weights": (lambda q, k, v: sm(k @ q), "this is the weights"),
    "weights * values, not summed": (lambda q, k, v: sm(k @ q) * v, P.HINT_PRODUCTS),
    "query @ keys": (lambda q, k, v: sm(q @ k) @ v, P.HINT_QUERY_KEYS),
}


@pytest.mark.parametrize("name", SOFT_LOOKUP_WRONG)
def test_soft_lookup_rejects(name, capsys):
    fn, hint = SOFT_LOOKUP_WRONG[name]
    assert_rejected(check.check_soft_lookup, fn, hint, capsys)


def test_soft_lookup_s_over_sum_is_not_taken_for_an_argmax(capsys):
    # issue 21: on 'the girls' (scores 0, 0, 10, 10) s / s.sum() and the argmax give
    # the same 168 cm; the first case must tell them apart
    first = P.soft_lookup_cases()[0]
    q, k, v = first.args
    assert not np.isclose(ratio(q, k, v), v[np.argmax(k @ q)])
    out = assert_rejected(check.check_soft_lookup, ratio, P.HINT_RATIO, capsys)
    assert "case 1/" in out and "argmax" not in out


# --- check_temperature_softmax -------------------------------------------------------

def softmax_t(x, t, *, zero_max="row", times=False, softmax=sm, ties="split", axis=-1):
    x = np.asarray(x, dtype=float)
    if t == 0:
        m = x.max() if zero_max == "global" else x.max(axis=axis, keepdims=True)
        hot = (x == m).astype(float)
        if ties == "first":
            return np.eye(x.shape[-1])[np.argmax(x, axis=-1)]
        if ties == "none":
            return hot
        return hot / hot.sum(axis=axis, keepdims=True)
    return softmax(x * t if times else x / t)


def shift_by_max_of_x(x, t):
    x = np.asarray(x, dtype=float)
    if t == 0:
        return softmax_t(x, 0)
    e = np.exp(x / t - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def t_after_exp(x, t):
    x = np.asarray(x, dtype=float)
    if t == 0:
        return softmax_t(x, 0)
    e = np.exp(x - x.max(axis=-1, keepdims=True)) / t
    return e / e.sum(axis=-1, keepdims=True)


TEMPERATURE_WRONG = {
    "x * t": (lambda x, t: softmax_t(x, t, times=True), P.HINT_T_TIMES),
    "t divides the exponentials": (t_after_exp, P.HINT_T_IGNORED),
    "x / t - max(x)": (shift_by_max_of_x, P.HINT_T_SHIFT),
    "naive": (lambda x, t: softmax_t(x, t, softmax=sm_naive), H.HINT_NAIVE),
    "global maximum, t > 0": (lambda x, t: softmax_t(x, t, softmax=sm_global), H.HINT_GLOBAL),
    "global maximum in the t = 0 branch": (lambda x, t: softmax_t(x, t, zero_max="global"),
                                           "(in the t = 0 branch)"),
    "wrong axis": (lambda x, t: softmax_t(x, t, softmax=lambda s: sm(s, axis=0), axis=0),
                   H.HINT_AXIS),
    "argmax at t = 0 (ties not split)": (lambda x, t: softmax_t(x, t, ties="first"),
                                         "argmax picks only the first maximum"),
    "one-hot not normalised": (lambda x, t: softmax_t(x, t, ties="none"),
                               "divided by the number of maxima"),
    "t = 0 divides by zero": (lambda x, t: sm(np.asarray(x, float) / t), P.HINT_T_ZERO_DIV),
    "t = 0 returns uniform weights": (lambda x, t: sm(x / t) if t else np.full(
        np.shape(x), 1 / np.shape(x)[-1]), P.HINT_T_UNIFORM),
}


@pytest.mark.parametrize("name", TEMPERATURE_WRONG)
def test_temperature_softmax_rejects(name, capsys):
    fn, hint = TEMPERATURE_WRONG[name]
    assert_rejected(check.check_temperature_softmax, fn, hint, capsys)


def test_temperature_cases_tell_the_two_overflow_mistakes_apart():
    # the naive softmax fails first on the t = 1/8 case, x / t - max(x) on the t = 4 case;
    # each is right on the other's case, so neither report shows the other's hint
    cases = P.temperature_softmax_cases()
    with np.errstate(all="ignore"):
        on = {c.label.split(":")[0]: c for c in cases}
        c8 = on["the scores [100, 99, 90] at t = 1/8"]
        c4 = on["the scores [1000, 1001, 1002] at t = 4"]
        assert np.isnan(softmax_t(*c8.args, softmax=sm_naive)).all()
        assert np.allclose(shift_by_max_of_x(*c8.args), c8.expected)
        assert np.isnan(shift_by_max_of_x(*c4.args)).all()
        assert np.allclose(softmax_t(*c4.args, softmax=sm_naive), c4.expected)


# --- every exercise says how many cases its checker runs ------------------------------

EXERCISES = {  # chapter -> checker, the cases it runs
    "01_three_tokens": ("check_attention", P.attention_cases),
    "02_soft_lookup": ("check_soft_lookup", P.soft_lookup_cases),
    "03_softmax": ("check_softmax", P.softmax_cases),
    "04_scaling": ("check_temperature_softmax", P.temperature_softmax_cases),
}
NUMBERS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine",
           10: "ten", 11: "eleven", 12: "twelve"}


@pytest.mark.parametrize("chapter", EXERCISES)
def test_exercise_lists_every_case_its_checker_runs(chapter):
    checker, cases = EXERCISES[chapter]
    nb = json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    (text,) = [src[src.index("```{exercise}"):] for c in nb["cells"]
               if c["cell_type"] == "markdown"
               for src in ["".join(c["source"])]
               if "```{exercise}" in src and f"check.{checker}" in src]
    text = text[:text.index("\n```", 3)]  # the exercise's own text
    n = len(cases())
    assert re.search(rf"\b{NUMBERS[n]} cases\b", flat(text)), (
        f"{chapter}: the exercise should say that {checker} runs {NUMBERS[n]} cases")
    # one item per case: the list after the colon has n items separated by ';'
    items = flat(text).split(f"{NUMBERS[n]} cases:")[1].split(";")
    assert len(items) == n, (chapter, items)
