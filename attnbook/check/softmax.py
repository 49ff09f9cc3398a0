"""Checkers of Part I (chapters 02-04): softmax, scores, attention, the soft
lookup and the temperature."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases
from ._wrong import *  # noqa: F401,F403
from ._wrong import _attn, _scale_mistakes, _sm

__all__ = ['check_softmax', 'check_scores', 'check_attention', 'check_soft_lookup', 'check_temperature_softmax']

# Hints of Part I's own mistakes (the shared ones are in ._wrong)
HINT_MIN = ("subtract each row's maximum, not its minimum: after x - min the "
            "largest entry can still overflow, and a -inf entry gives "
            "-inf - (-inf) = nan")
HINT_NEGINF = ("a -inf score (a masked key) must get weight exactly 0, and "
               "exp(-inf) = 0 already gives it: keep -inf as it is (do not "
               "replace it by 0 or by a finite number)")
HINT_SUM_ALL_SCIPY = (HINT_SUM_ALL + " (scipy.special.softmax does that unless "
                      "given axis=-1)")
HINT_NO_T = ("Q @ K pairs each query with a column of K, not with a key: "
             "transpose the keys, Q @ K.T (one row per query, one column per "
             "key)")
HINT_ELEMENTWISE = ("Q * K multiplies entry by entry; a score is a dot product "
                    "of a query and a key: the matrix product Q @ K.T")
HINT_NO_SOFTMAX = ("no softmax: the weights are softmax(scores), positive and "
                   "summing to 1 in each row; scores @ V is not attention")
HINT_SCORES_AS_WEIGHTS = ("the second element is the scores; return the "
                          "weights, softmax(scores), whose rows sum to 1")
HINT_RATIO = ("the weights are the scores divided by their sum; but scores can "
              "be 0 (0/0 for a query that matches nobody) or negative "
              "(negative weights). Use the softmax: exp(scores) divided by "
              "the sum of exp(scores)")
HINT_ARGMAX = ("a hard lookup: all the weight on the best key (an argmax); the "
               "soft lookup averages all the values, weighted by the softmax "
               "of the scores")
HINT_PRODUCTS = ("weights * values gives one product per key; add them up: "
                 "weights @ values")
HINT_QUERY_KEYS = ("query @ keys: the keys are the rows of keys, so the scores "
                   "are keys @ query (or query @ keys.T)")
HINT_T_TIMES = "x * t instead of x / t: a small t must sharpen the weights"
HINT_T_IGNORED = ("the temperature has no effect: divide the scores by t before "
                  "exp (dividing the exponentials or the weights by t cancels "
                  "when they are normalised)")
HINT_T_SHIFT = ("x / t - max(x): subtract the maximum of x / t (or subtract "
                "max(x) before dividing by t); with max(x) the exponents are "
                "still far from 0 and exp overflows or underflows")
HINT_T_ZERO_DIV = ("t = 0 gives nan: x / 0 divides by zero. Treat t == 0 on its own, "
                   "as the limit t -> 0+ (all the weight on the maximum); if you do, "
                   "check that branch (its max and sum need keepdims=True)")
HINT_T_UNIFORM = ("at t = 0 the weights are one-hot on the maximum (the limit "
                  "t -> 0+); uniform weights are the limit of a large t")


def softmax_cases() -> list[Case]:
    rng = np.random.default_rng(1)
    batch = rng.normal(size=(2, 3, 4))
    big = np.array([1000.0, 1001.0, 1002.0])
    with_inf = np.array([0.5, -np.inf, 1.5, -np.inf])
    three_tokens = np.array([10.0, 58.0, 106.0]) / np.sqrt(2)
    square = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0], [2.0, -1.0, 0.0]])
    apart = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    gap = apart.max() - apart[1].max()
    cases = [
        ("a small row [1, 2, 3]", np.array([1.0, 2.0, 3.0])),
        ("large values [1000, 1001, 1002] (naive exp overflows)", big),
        ("a row with -inf entries (masked positions must get weight 0)", with_inf),
        ("a row of length one", np.array([7.0])),
        ("a batch of shape (2, 3, 4), softmax over the last axis", batch),
        ("the three-token chapter's first scaled row", three_tokens),
        ("a 3 x 3 matrix, not symmetric: each row on its own", square),
        (f"two rows {gap:g} apart: each row needs its own maximum", apart),
    ]
    return [Case(label, (x,), ref.softmax(x)) for label, x in cases]


def _softmax_mistakes():
    return [
        Mistake(HINT_NAIVE, lambda x: _sm(x, shift="none")),
        Mistake(HINT_GLOBAL, lambda x: _sm(x, shift="global")),
        Mistake(HINT_AXIS, lambda x: _sm(x, axis=0)),
        Mistake(HINT_AXIS, lambda x: _sm(x, axis=-2)),
        Mistake(HINT_KEEPDIMS, lambda x: _sm(x, keepdims=False)),
        Mistake(HINT_KEEPDIMS, lambda x: _sm(x, keepdims="max")),
        Mistake(HINT_KEEPDIMS, lambda x: _sm(x, keepdims="sum")),
        Mistake(HINT_SUM_ALL_SCIPY, lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(
            x - x.max(-1, keepdims=True)).sum()),
        Mistake(HINT_SUM_ALL_SCIPY, lambda x: np.exp(x - x.max()) / np.exp(x - x.max()).sum()),
        Mistake(HINT_MIN, lambda x: _sm(x - x.min(axis=-1, keepdims=True), shift="none")),
        Mistake(HINT_NEGINF, lambda x: _sm(np.where(np.isneginf(x), 0.0, x))),
    ]


def check_softmax(fn: Callable) -> Verdict:
    """Check a learner's ``softmax(x)`` over the last axis."""
    return run_cases(fn, softmax_cases(), "check_softmax", mistakes=_softmax_mistakes())


# --- scores ------------------------------------------------------------------

def scores_cases() -> list[Case]:
    rng = np.random.default_rng(2)
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=float)
    q, k = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    q3, k3 = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    return [
        Case("the three tokens of chapter 1 as both queries and keys", (x, x), x @ x.T / 2.0),
        Case("4 queries against 6 keys, dk = 3 (the result is 4 x 6)", (q, k),
             q @ k.T / np.sqrt(3)),
        Case("3 queries against 3 other keys, dk = 5 (not symmetric)", (q3, k3),
             q3 @ k3.T / np.sqrt(5)),
    ]


def _scores_mistakes():
    def by(scale):
        return lambda q, k: q @ k.T / scale(q, k, None)
    out = _scale_mistakes(by, dv=False, batched=False)
    out.append(Mistake(HINT_TRANSPOSED, lambda q, k: k @ q.T / np.sqrt(q.shape[-1])))
    out.append(Mistake(HINT_NO_T, lambda q, k: q @ k / np.sqrt(k.shape[-1])))
    out.append(Mistake(HINT_NO_T, lambda q, k: np.dot(q, k) / np.sqrt(k.shape[-1])))
    out.append(Mistake(HINT_ELEMENTWISE, lambda q, k: q * k / np.sqrt(k.shape[-1])))
    return out


def check_scores(fn: Callable) -> Verdict:
    """Check a learner's ``scores(Q, K)`` = Q K^T / sqrt(dk) for one sequence."""
    return run_cases(fn, scores_cases(), "check_scores", mistakes=_scores_mistakes())


# --- attention, one sequence -------------------------------------------------

def attention_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=float)
    wq = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    wk = np.array([[0, 1], [0, 1], [1, 0], [1, 0]], dtype=float)
    wv = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=float)
    small, double = x / 10, x * 2
    q, k, v = rng.normal(size=(2, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 3))
    q_apart = np.array([[1200.0, 0.0], [0.0, 1.0]])
    k_apart = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1.0]])
    v_apart = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0]])

    def top(qq, kk):
        return (qq @ kk.T / np.sqrt(kk.shape[-1])).max()

    s_apart = q_apart @ k_apart.T / np.sqrt(2)
    gap = s_apart.max() - s_apart[1].max()
    out = []
    for label, args in [
        (f"the three-token example (scaled scores up to "
         f"{top(x @ wq, x @ wk):.2f})", (x @ wq, x @ wk, x @ wv)),
        ("the three-token example with X / 10 (soft weights)",
         (small @ wq, small @ wk, small @ wv)),
        ("2 queries, 4 keys, dk = 5, dv = 3", (q, k, v)),
        ("one key: every query must return that key's value", (q, k[:1], v[:1])),
        (f"the three-token example with 2 X: scaled scores up to "
         f"{top(double @ wq, double @ wk):.2f}, so exp overflows unless you "
         f"subtract each row's maximum", (double @ wq, double @ wk, double @ wv)),
        (f"two queries whose best scores are {gap:.1f} apart: each row needs "
         f"its own maximum", (q_apart, k_apart, v_apart)),
    ]:
        o, w = ref.scaled_dot_product_attention(*args)
        out.append(Case(label, args, o, weights=w))
    return out


def _attention_mistakes():
    def by(scale):
        return lambda q, k, v: _attn(q, k, v, scale=scale)
    return _scale_mistakes(by, batched=False) + [
        Mistake(HINT_AXIS, lambda q, k, v: _attn(q, k, v, axis=0)),
        Mistake(HINT_NAIVE, lambda q, k, v: _attn(q, k, v, shift="none")),
        Mistake(HINT_GLOBAL, lambda q, k, v: _attn(q, k, v, shift="global")),
        Mistake(HINT_KEEPDIMS, lambda q, k, v: _attn(q, k, v, keepdims=False)),
        Mistake(HINT_KEEPDIMS, lambda q, k, v: _attn(q, k, v, keepdims="max")),
        Mistake(HINT_KEEPDIMS, lambda q, k, v: _attn(q, k, v, keepdims="sum")),
        Mistake(HINT_TRANSPOSED, lambda q, k, v: _attn(q, k, v, swap=True)),
        Mistake(HINT_WEIGHTS, lambda q, k, v: _attn(q, k, v)[1]),
        Mistake(HINT_WEIGHTS, lambda q, k, v: _attn(q, k, v)[::-1]),
        Mistake(HINT_SUM_ALL, lambda q, k, v: _sum_all_attention(q, k, v)),
        Mistake(HINT_NO_SOFTMAX, lambda q, k, v: q @ k.T / np.sqrt(k.shape[-1]) @ v),
        Mistake(HINT_SCORES_AS_WEIGHTS, lambda q, k, v: (
            _attn(q, k, v)[0], q @ k.T / np.sqrt(k.shape[-1]))),
        Mistake(HINT_NO_T, lambda q, k, v: _sm(q @ k / np.sqrt(k.shape[-1])) @ v),
    ]


def _sum_all_attention(q, k, v):
    """Attention whose weights are divided by the sum of the whole matrix."""
    s = q @ k.T / np.sqrt(k.shape[-1])
    e = np.exp(s - s.max())
    return (e / e.sum()) @ v


def check_attention(fn: Callable) -> Verdict:
    """Check a learner's ``attention(Q, K, V)`` for one sequence (returns the output,
    or an ``(output, weights)`` tuple or list; the weights are checked too)."""
    return run_cases(fn, attention_cases(), "check_attention", mistakes=_attention_mistakes())


# --- Part I: soft lookup and temperature ---

def soft_lookup_cases() -> list[Case]:
    heights = np.array([175.0, 180.0, 166.0, 170.0])
    keys = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    rng = np.random.default_rng(4)
    k, v, q = rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), rng.normal(size=3)
    big_q = np.array([0.0, 800.0, 0.0])
    cases = [
        ("the query [3, 2, 0], between 'Xiaoming' and 'the girls' (scores "
         "3, 0, 2, 2), over the four students' heights",
         (np.array([3.0, 2.0, 0.0]), keys, heights)),
        ("the query 'girls' = [0, 10, 0] over the four students' heights",
         (np.array([0.0, 10.0, 0.0]), keys, heights)),
        ("a query that matches nobody ([0, 0, 0]): the plain average",
         (np.zeros(3), keys, heights)),
        ("5 keys of width 3, values of width 2 (the result has shape (2,))", (q, k, v)),
        ("one key: the result is that key's value", (q, k[:1], v[:1])),
        ("large scores (800): exp(800) overflows float64 unless you subtract the maximum",
         (big_q, keys, heights)),
    ]
    out = []
    for label, args in cases:
        query, ks, vs = args
        w = ref.softmax(ks @ query)
        out.append(Case(label, args, w @ vs, weights=w))
    return out


def _soft_lookup_mistakes():
    def hard(query, keys, values):
        s = keys @ query
        return (s == s.max()).astype(float) / (s == s.max()).sum() @ values

    def ratio(query, keys, values):
        s = keys @ query
        return (s / s.sum()) @ values

    return [
        Mistake(HINT_NAIVE, lambda q, k, v: _sm(k @ q, shift="none") @ v),
        Mistake("the scores are scaled by sqrt(d); this soft lookup has no scale "
                "(the scale comes in the scaling chapter)",
                lambda q, k, v: _sm(k @ q / np.sqrt(q.shape[-1])) @ v),
        Mistake(HINT_ARGMAX, hard),
        Mistake(HINT_ARGMAX, lambda q, k, v: v[np.argmax(k @ q)]),
        Mistake(HINT_RATIO, ratio),
        Mistake(HINT_PRODUCTS, lambda q, k, v: _sm(k @ q) * v),
        Mistake(HINT_QUERY_KEYS, lambda q, k, v: _sm(q @ k) @ v),
        Mistake("the weights are exp(scores) without dividing by their sum",
                lambda q, k, v: np.exp(k @ q - (k @ q).max()) @ v),
        Mistake("the plain average of the values: the query is ignored",
                lambda q, k, v: v.mean(axis=0)),
        Mistake("this is the weights; return the weighted sum weights @ values",
                lambda q, k, v: _sm(k @ q)),
    ]


def check_soft_lookup(fn: Callable) -> Verdict:
    """Check a learner's ``soft_lookup(query, keys, values)`` = softmax(keys @ query) @ values
    for one query vector (d,), keys (n, d) and values (n,) or (n, dv)."""
    return run_cases(fn, soft_lookup_cases(), "check_soft_lookup",
                     mistakes=_soft_lookup_mistakes())


def temperature_softmax_cases() -> list[Case]:
    z = np.array([1.0, 2.0, 7.0, 12.0, 8.0, 5.0, 2.0, 1.0])
    rng = np.random.default_rng(5)
    batch = rng.normal(size=(2, 3, 4))
    ties = np.array([3.0, 1.0, 3.0])
    rows0 = np.array([[1.0, 5.0, 3.0], [2.0, 0.0, 1.0], [4.0, 4.0, -1.0]])
    apart = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    cases = [
        ("the source's scores [1, 2, 7, 12, 8, 5, 2, 1] at t = 1", (z, 1.0)),
        ("the same scores at t = 16 (= sqrt(256))", (z, 16.0)),
        ("the scores [100, 99, 90] at t = 1/8: x / t reaches 800, so exp "
         "overflows unless you subtract the maximum", (np.array([100.0, 99.0, 90.0]), 0.125)),
        ("the scores [1000, 1001, 1002] at t = 4: the maximum to subtract is "
         "that of x / t", (np.array([1000.0, 1001.0, 1002.0]), 4.0)),
        ("a small temperature, t = 0.01 (exp overflows unless you subtract the "
         "maximum first)", (z, 0.01)),
        ("a batch of shape (2, 3, 4) at t = 2, over the last axis", (batch, 2.0)),
        ("t = 0, the limit: all the weight on the maximum", (z, 0.0)),
        ("t = 0 with a tie for the maximum: the weight is split equally", (ties, 0.0)),
        ("t = 0 on three rows with different maxima: each row's own maximum",
         (rows0, 0.0)),
        (f"t = 1 on two rows {apart.max() - apart[1].max():g} apart: each row's "
         f"own maximum", (apart, 1.0)),
    ]
    return [Case(label, args, ref.softmax(args[0], temperature=args[1]))
            for label, args in cases]


def _temperature_mistakes():
    def variant(shift="row", axis=-1, zero="split", times=False, zero_shift="row",
                ignore_t=False):
        def f(x, t):
            x = np.asarray(x, dtype=float)
            if t == 0:
                m = x.max() if zero_shift == "global" else x.max(axis=axis, keepdims=True)
                hot = (x == m).astype(float)
                if zero == "raw":
                    return hot
                if zero == "first":
                    return np.eye(x.shape[-1])[np.argmax(x, axis=-1)]
                if zero == "divide":
                    return _sm(x / t, axis=axis)
                if zero == "uniform":
                    return np.full(x.shape, 1 / x.shape[-1])
                return hot / hot.sum(axis=axis, keepdims=True)
            if ignore_t:
                return _sm(x, axis=axis, shift=shift)
            if shift == "x":  # x / t - max(x): the maximum of x, not of x / t
                return _sm(x / t - x.max(axis=axis, keepdims=True), axis=axis, shift="none")
            return _sm(x * t if times else x / t, axis=axis, shift=shift)
        return f

    return [
        Mistake(HINT_T_TIMES, variant(times=True)),
        Mistake(HINT_T_IGNORED, variant(ignore_t=True)),
        Mistake(HINT_T_SHIFT, variant(shift="x")),
        Mistake(HINT_T_ZERO_DIV, variant(zero="divide")),
        Mistake(HINT_T_UNIFORM, variant(zero="uniform")),
        Mistake(HINT_NAIVE, variant(shift="none")),
        Mistake(HINT_GLOBAL, variant(shift="global")),
        Mistake(HINT_GLOBAL + " (in the t = 0 branch)", variant(zero_shift="global")),
        Mistake(HINT_AXIS, variant(axis=0)),
        Mistake(HINT_AXIS, variant(axis=-2)),
        Mistake("at t = 0 the weight of a tie is split equally; argmax picks "
                "only the first maximum", variant(zero="first")),
        Mistake("at t = 0 the one-hot (x == max) must be divided by the number "
                "of maxima, so that it sums to 1", variant(zero="raw")),
    ]


def check_temperature_softmax(fn: Callable) -> Verdict:
    """Check a learner's ``softmax_t(x, t)`` = softmax(x / t) over the last axis, with
    t = 0 meaning the limit t -> 0+ (all weight on the maximum, ties split equally)."""
    return run_cases(fn, temperature_softmax_cases(), "check_temperature_softmax",
                     mistakes=_temperature_mistakes())


# --- Part II: self-attention, masking, cross-attention ---
