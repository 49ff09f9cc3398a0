"""Checker of chapter 20b (Part VIII): differential attention, as
DiffLlamaAttention computes one head pair."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["differential_cases", "differential_mistakes", "check_differential_attention"]

EPS = 1e-5


def differential_cases() -> list[Case]:
    """lambda is never 0, 1 or lambda_init; d_v = 2d as in DiffLlama except
    in one case; query and key lengths differ from the second case on."""
    rng = np.random.default_rng(20)
    out = []
    for label, lead, n_q, n_k, d, d_v, lam, lam_init in [
        ("one head, 4 queries, 4 keys, d = 2, d_v = 4", (), 4, 4, 2, 4, 0.61, 0.2),
        ("one head, 3 queries, 5 keys, d = 3, d_v = 6", (), 3, 5, 3, 6, 0.47, 0.35),
        ("2 heads at once (a leading axis), 2 queries, 4 keys, d = 2, d_v = 4",
         (2,), 2, 4, 2, 4, 0.9, 0.47),
        ("one head, lambda above 1, 3 queries, 3 keys, d = 4, d_v = 3",
         (), 3, 3, 4, 3, 1.3, 0.8),
    ]:
        q1, q2 = rng.normal(size=(2,) + lead + (n_q, d))
        k1, k2 = rng.normal(size=(2,) + lead + (n_k, d))
        v = rng.normal(size=lead + (n_k, d_v))
        args = (q1, k1, q2, k2, v, lam, lam_init)
        o, w = ref.differential_attention(q1, k1, q2, k2, v, lam, lambda_init=lam_init,
                                          eps=EPS)
        out.append(Case(label, args, o, weights=w))
    return out


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _rms(x):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)


def _diff(q1, k1, q2, k2, v, lam, lam_init, *, sign=1, norm="after", factor="1 - init",
          scale="d", where="weights", axis=-1, sm_axis=-1, crossed=False,
          lam_both=False, eps=EPS):
    s = np.sqrt(q1.shape[-1] if scale == "d" else v.shape[-1]) if scale else 1.0
    if crossed:                                 # q1 with k2, q2 with k1
        k1, k2 = k2, k1
    s1 = q1 @ np.swapaxes(k1, -1, -2) / s
    s2 = q2 @ np.swapaxes(k2, -1, -2) / s
    if where == "scores":                       # one softmax of the difference
        w = _softmax(s1 - sign * lam * s2)
    elif lam_both:                              # lambda (softmax_1 - softmax_2)
        w = lam * (_softmax(s1, sm_axis) - _softmax(s2, sm_axis))
    else:
        w = _softmax(s1, sm_axis) - sign * lam * _softmax(s2, sm_axis)
    if norm == "before":
        o = _rms(_softmax(s1) @ v) - sign * lam * _rms(_softmax(s2) @ v)
    else:
        o = w @ v
    if norm == "after":
        o = o / np.sqrt((o * o).mean(axis, keepdims=True) + eps)
    elif norm == "layer":                       # mean subtracted too
        o = (o - o.mean(-1, keepdims=True)) / np.sqrt(o.var(-1, keepdims=True) + EPS)
    scale_out = {"1 - init": 1 - lam_init, "init": lam_init, "none": 1.0}[factor]
    return scale_out * o, w


def differential_mistakes() -> list[Mistake]:
    """The wrong answers a learner plausibly writes, with the hint that names each."""
    def wrong(**switch):
        return lambda *args: _diff(*args, **switch)

    return [
        Mistake("the two maps were ADDED: differential attention subtracts, "
                "softmax_1 - lambda softmax_2.", wrong(sign=-1)),
        Mistake("the SCORES were subtracted and one softmax taken: subtract "
                "the two softmax MAPS, each normalised on its own; their "
                "difference may be negative.", wrong(where="scores")),
        Mistake("no head-wise norm: normalise each head's output over its "
                "d_v features, x / sqrt(mean(x**2) + eps), after the "
                "subtraction.", wrong(norm="none")),
        Mistake("each map's output was normalised BEFORE the subtraction: "
                "subtract first, (softmax_1 - lambda softmax_2) V, then apply "
                "the RMSNorm once.", wrong(norm="before")),
        Mistake("the factor (1 - lambda_init) is missing: DiffLlama multiplies "
                "the normalised output by it.", wrong(factor="none")),
        Mistake("the output was multiplied by lambda_init itself: the factor "
                "is 1 - lambda_init.", wrong(factor="init")),
        Mistake("the norm subtracted the mean (a LayerNorm): RMSNorm only "
                "divides by sqrt(mean(x**2) + eps).", wrong(norm="layer")),
        Mistake("the RMSNorm ran over the queries (axis -2): normalise each "
                "output row over its d_v features, axis -1.", wrong(axis=-2)),
        Mistake("the scores were divided by sqrt(d_v): the scale is "
                "1/sqrt(d), the width of q1 and k1 (d_v = 2d in DiffLlama).",
                wrong(scale="d_v")),
        Mistake("the scores were not scaled: divide them by sqrt(d).",
                wrong(scale=None)),
        Mistake("each softmax was taken down the queries (axis -2): each query's "
                "weights are a softmax over the keys, axis -1.",
                wrong(sm_axis=-2)),
        Mistake("the pairs were crossed (q1 with k2, q2 with k1): map 1 is "
                "softmax(q1 k1^T / sqrt(d)), map 2 softmax(q2 k2^T / "
                "sqrt(d)).", wrong(crossed=True)),
        Mistake("lambda multiplied both maps, lambda (softmax_1 - "
                "softmax_2): only the second map is scaled, softmax_1 - "
                "lambda softmax_2.", wrong(lam_both=True)),
        Mistake("the RMSNorm's epsilon is not 1e-5 (1e-6 is Gemma's): "
                "DiffLlama's head norm adds eps = 1e-5 under the square "
                "root.", wrong(eps=1e-6)),
        Mistake("the result came back as (weights, output): return "
                "(output, weights), the output first.",
                lambda *args: _diff(*args)[::-1]),
    ]


def _rms_rule(fn, call, cases, index, rtol, atol, want_bool):
    """A hint no single wrong answer computes: after the norm and the factor,
    every output row has root mean square 1 - lambda_init (up to eps)."""
    case = cases[index]
    out = np.asarray(call(fn, case)["output"], dtype=float)
    if out.shape != np.shape(case.expected):
        return None
    lam_init = case.args[6]
    if not np.allclose(np.sqrt((out * out).mean(-1)), 1 - lam_init, atol=1e-3):
        return ("every output row should have root mean square 1 - lambda_init "
                "once it is normalised and scaled; yours do not: check the "
                "RMSNorm (over the last axis, after the subtraction) and the "
                "factor (1 - lambda_init).")
    return ("the norm and the factor look right (each row's root mean square "
            "is 1 - lambda_init), so the map is wrong: check both softmax maps "
            "(each over the keys, scores divided by sqrt(d)) and the "
            "subtraction softmax_1 - lam softmax_2.")


def check_differential_attention(fn: Callable) -> Verdict:
    """Check ``differential_attention(q1, k1, q2, k2, v, lam, lambda_init)``:
    q1, q2 (..., Nq, d), k1, k2 (..., Nk, d), v (..., Nk, d_v). Returns
    the output (..., Nq, d_v), or (output, weights) with weights the
    differential map softmax_1 - lam softmax_2."""
    return run_cases(fn, differential_cases(), "check_differential_attention",
                     mistakes=differential_mistakes(), rules=[_rms_rule])
