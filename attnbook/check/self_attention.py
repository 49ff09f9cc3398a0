"""Checkers of Part II (chapters 05-07): batched self-attention, the causal
and padding masks, cross-attention."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import (BadResult, Case, Mistake, Verdict, _copy_args, _split_result,
                        run_cases)
from ._rules import batch_rule
from ._wrong import *  # noqa: F401,F403
from ._wrong import _attn, _batch_axis_mistakes, _scale_mistakes

__all__ = ['check_self_attention_batched', 'check_causal_mask', 'check_padding_mask', 'check_cross_attention']


def self_attention_cases() -> list[Case]:
    # B = 3, N = 5, D = 7, dk = 4, dv = 6: every wrong scale (1, dk, or the
    # square root of B, N, D or dv) differs from every other, so a hint names
    # the mistake made (with dv = N, sqrt(dv) once passed for a number of tokens)
    rng = np.random.default_rng(4)
    d, hs, dv = 7, 4, 6
    w_q, w_k, w_v = rng.normal(size=(d, hs)), rng.normal(size=(d, hs)), rng.normal(size=(d, dv))
    w_v4 = rng.normal(size=(d, hs))
    x3 = rng.normal(size=(3, 5, d))
    x1 = rng.normal(size=(1, 4, d))
    x2d = rng.normal(size=(5, d))
    xone = rng.normal(size=(2, 1, d))
    x_apart = np.stack([x3[0], 25 * x3[1]])  # the second sequence's scores are huge
    scores = (x_apart @ w_q) @ np.swapaxes(x_apart @ w_k, -2, -1) / np.sqrt(hs)
    gap = scores.max() - scores[0].max(axis=-1).min()
    out = []
    for label, args in [
        ("a batch: x (3, 5, 7), W_q and W_k (7, 4), dv = dk = 4", (x3, w_q, w_k, w_v4)),
        ("a batch of one: x (1, 4, 7)", (x1, w_q, w_k, w_v4)),
        ("no batch axis: x (5, 7) must give (5, 4)", (x2d, w_q, w_k, w_v4)),
        ("value width differs: W_v (7, 6), so the output is (3, 5, 6)",
         (x3, w_q, w_k, w_v)),
        ("sequences of one token: x (2, 1, 7)", (xone, w_q, w_k, w_v4)),
        (f"two sequences whose scores lie {gap:.0f} apart: each row needs its "
         f"own maximum", (x_apart, w_q, w_k, w_v)),
    ]:
        x, wq, wk, wv = args
        o, w = ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv)
        out.append(Case(label, args, o, weights=w))
    return out


def _self_mistakes():
    def sa(**kw):
        return lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv, **kw)

    def by(scale):
        return sa(scale=scale)

    def mixed(x, wq, wk, wv):
        flat = x.reshape(-1, x.shape[-1])
        o, _ = _attn(flat @ wq, flat @ wk, flat @ wv)
        return o.reshape(*x.shape[:-1], wv.shape[-1])

    return _scale_mistakes(by) + [
        Mistake(HINT_WIDTH_D, lambda x, wq, wk, wv: _attn(
            x @ wq, x @ wk, x @ wv, scale=lambda q, k, v: np.sqrt(x.shape[-1]))),
        Mistake(HINT_AXIS, sa(axis=-2)),
        Mistake(HINT_NAIVE, sa(shift="none")),
        Mistake(HINT_GLOBAL, sa(shift="global")),
        Mistake(HINT_TRANSPOSED, sa(swap=True)),
        Mistake(HINT_MIX_BATCH, mixed),
        Mistake(HINT_WEIGHTS, lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv)[1]),
        Mistake(HINT_KEEPDIMS, sa(keepdims=False)),
        Mistake(HINT_KEEPDIMS, sa(keepdims="max")),
        Mistake(HINT_KEEPDIMS, sa(keepdims="sum")),
        Mistake("the values are x itself: project them too, v = x @ W_v",
                lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x)),
        Mistake("the keys are projected with W_q: k = x @ W_k",
                lambda x, wq, wk, wv: _attn(x @ wq, x @ wq, x @ wv)),
    ] + _batch_axis_mistakes(lambda x, wq, wk, wv: (x @ wq, x @ wk, x @ wv))


def check_self_attention_batched(fn: Callable) -> Verdict:
    """Check a learner's ``self_attention(x, W_q, W_k, W_v)`` for x of shape (B, N, D) or (N, D)
    (returns the output, or an ``(output, weights)`` tuple; the weights are checked too)."""
    return run_cases(fn, self_attention_cases(), "check_self_attention_batched",
                     mistakes=_self_mistakes(), rules=[batch_rule()])


def _call_mask(fn, case):
    """Run a learner's mask function; a Python list where a boolean array is
    expected gets its own report (NumPy would read [] as float64)."""
    got = fn(*_copy_args(case.args), **case.kwargs)
    if isinstance(got, list) and (not got or not isinstance(got[0], np.ndarray)):
        raise BadResult(
            "your function returned a Python list; the mask must be a NumPy "
            "boolean array (True = may attend). Build it with NumPy, or wrap "
            "your list in np.array(..., dtype=bool)")
    out, _ = _split_result(got, np.shape(case.expected))
    return {"output": out}


def causal_mask_cases() -> list[Case]:
    return [Case(f"n = {n}" + (" (an empty sequence: shape (0, 0))" if n == 0 else ""),
                 (n,), ref.causal_mask(n))
            for n in (3, 1, 6, 0)]



def _causal_mistakes():
    def tri(k=0, upper=False, invert=False):
        def f(n):
            m = (np.triu if upper else np.tril)(np.ones((n, n), dtype=bool), k=k)
            return ~m if invert else m
        return f

    return [
        Mistake(HINT_POLARITY, tri(invert=True)),
        Mistake(HINT_POLARITY, tri(k=1, upper=True)),
        Mistake("off by one: k=-1 hides the diagonal, but query i may attend "
                "to key i itself (np.tril keeps it with the default k=0)", tri(k=-1)),
        Mistake("off by one: k=1 lets query i see key i + 1, one step into the "
                "future (use the default k=0)", tri(k=1)),
        Mistake("the upper triangle lets query i see keys i..n-1, the future; "
                "the causal mask is the lower triangle, np.tril", tri(upper=True)),
        Mistake("nothing is hidden: every entry is True",
                lambda n: np.ones((n, n), dtype=bool)),
        Mistake("np.ones takes the shape as one tuple, np.ones((n, n), dtype=bool): "
                "its second argument is the dtype",
                lambda n: np.tril(np.ones(n, n))),
    ]


def check_causal_mask(fn: Callable) -> Verdict:
    """Check a learner's ``causal_mask(n)``: a boolean (n, n) array, True where query i may see key j."""
    return run_cases(fn, causal_mask_cases(), "check_causal_mask", want_bool=True,
                     mistakes=_causal_mistakes(), call=_call_mask)


def padding_mask_cases() -> list[Case]:
    return [
        Case("lengths [3, 5] padded to n = 5 (shape (2, 1, 5): hides key columns)",
             (np.array([3, 5]), 5), ref.padding_mask([3, 5], 5)),
        Case("lengths [2, 3, 1] padded to n = 4 (no sequence fills all n positions)",
             (np.array([2, 3, 1]), 4), ref.padding_mask([2, 3, 1], 4)),
        Case("one sequence with no padding: lengths [4], n = 4", (np.array([4]), 4),
             ref.padding_mask([4], 4)),
        Case("lengths [5, 0]: an empty sequence has every key hidden", (np.array([5, 0]), 5),
             ref.padding_mask([5, 0], 5)),
    ]


def _padding_mistakes():
    def real(lengths, n, op=np.less, shift=0):
        return op(np.arange(n)[None, :], np.asarray(lengths)[:, None] + shift)  # (B, n)

    return [
        Mistake("the mask hides query rows: shape (B, n, 1). Padding hides keys, "
                "the columns: put the size-1 axis in the middle, (B, 1, n)",
                lambda lengths, n: real(lengths, n)[:, :, None]),
        Mistake("shape (B, n) has no query axis: against (B, Nq, Nk) scores its "
                "B would line up with the queries. Return (B, 1, n)",
                lambda lengths, n: real(lengths, n)),
        Mistake("(B, 1, 1, n) is the form for multi-head scores; this exercise "
                "wants one head's (B, 1, n)", lambda lengths, n: real(lengths, n)[:, None, None]),
        Mistake(HINT_POLARITY, lambda lengths, n: ~real(lengths, n)[:, None]),
        Mistake("the mask has max(lengths) columns: it must have n, the length the "
                "batch is padded to (n can exceed every length)",
                lambda lengths, n: real(lengths, int(np.max(lengths)))[:, None]),
        Mistake("compare every position with every length: np.arange(n) (shape "
                "(n,)) < lengths[:, None] (shape (B, 1)) gives (B, n)",
                lambda lengths, n: (np.arange(n) < np.asarray(lengths))[:, None]),
        Mistake("a (B, n, n) mask that also hides the padded queries' rows: padding "
                "hides keys only. Return (B, 1, n); broadcasting repeats it for "
                "every query", lambda lengths, n: real(lengths, n)[:, None] & real(
                    lengths, n)[:, :, None]),
        Mistake("the right keys, repeated for every query: (B, n, n). Return "
                "(B, 1, n); broadcasting repeats it for every query",
                lambda lengths, n: np.repeat(real(lengths, n)[:, None], n, axis=1)),
        Mistake("off by one: position lengths[b] is already padding (positions "
                "count from 0): use <, not <=",
                lambda lengths, n: real(lengths, n, np.less_equal)[:, None]),
        Mistake("off by one: the last real key (position lengths[b] - 1) is "
                "hidden", lambda lengths, n: real(lengths, n, shift=-1)[:, None]),
    ]


def check_padding_mask(fn: Callable) -> Verdict:
    """Check a learner's ``padding_mask(lengths, n)``: boolean, shape (B, 1, n), True = a real key."""
    return run_cases(fn, padding_mask_cases(), "check_padding_mask", want_bool=True,
                     mistakes=_padding_mistakes(), call=_call_mask)


def cross_attention_cases() -> list[Case]:
    # B = 2, Nq = 3, Nk = 5, D = 6, dk = 4, dv = 7: every wrong scale (1, dk, or
    # the square root of B, Nq, Nk, D or dv) differs from every other (with
    # dv = Nq, sqrt(dv) once passed for a number of tokens)
    rng = np.random.default_rng(5)
    d, hs, dv = 6, 4, 7
    w_q, w_k, w_v = rng.normal(size=(d, hs)), rng.normal(size=(d, hs)), rng.normal(size=(d, dv))
    xq, xv = rng.normal(size=(2, 3, d)), rng.normal(size=(2, 5, d))
    xq4, xv4 = rng.normal(size=(2, 4, d)), rng.normal(size=(2, 4, d))
    out = []
    for label, args in [
        ("a batch: xq (2, 3, 6) against xv (2, 5, 6), dk = 4, dv = 7; the output is "
         "(2, 3, 7)",
         (xq, xv, w_q, w_k, w_v)),
        ("more queries than keys: xq (2, 5, 6), xv (2, 3, 6)", (xv, xq, w_q, w_k, w_v)),
        ("no batch axis: xq (3, 6), xv (5, 6)", (xq[0], xv[0], w_q, w_k, w_v)),
        ("a single query: xq (2, 1, 6)", (xq[:, :1], xv, w_q, w_k, w_v)),
        ("as many queries as keys: xq (2, 4, 6), xv (2, 4, 6), different tokens",
         (xq4, xv4, w_q, w_k, w_v)),
    ]:
        x_q, x_v = args[0], args[1]
        o, w = ref.scaled_dot_product_attention(x_q @ w_q, x_v @ w_k, x_v @ w_v)
        out.append(Case(label, args, o, weights=w))
    return out


def _cross_mistakes():
    def ca(**kw):
        return lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xv @ wk, xv @ wv, **kw)

    return _scale_mistakes(lambda scale: ca(scale=scale)) + [
        Mistake(HINT_WIDTH_D, lambda xq, xv, wq, wk, wv: _attn(
            xq @ wq, xv @ wk, xv @ wv, scale=lambda q, k, v: np.sqrt(xq.shape[-1]))),
        Mistake(HINT_AXIS, ca(axis=-2)),
        Mistake(HINT_TRANSPOSED, lambda xq, xv, wq, wk, wv: _attn(
            xq @ wk, xv @ wq, xv @ wv)),
        Mistake("the keys come from xq: in cross-attention the keys and the "
                "values both come from xv, the sequence attended to",
                lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xq @ wk, xv @ wv)),
        Mistake("the values come from xq: in cross-attention the keys and the "
                "values both come from xv, the sequence attended to",
                lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xv @ wk, xq @ wv)),
        Mistake("this is self-attention of xq: the keys and values must come "
                "from xv", lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xq @ wk, xq @ wv)),
        Mistake("the roles are swapped: the queries come from xq and the keys "
                "and values from xv", lambda xq, xv, wq, wk, wv: _attn(
                    xv @ wq, xq @ wk, xq @ wv)),
        Mistake(HINT_WEIGHTS, lambda xq, xv, wq, wk, wv: _attn(
            xq @ wq, xv @ wk, xv @ wv)[1]),
        Mistake(HINT_KEEPDIMS, ca(keepdims=False)),
        Mistake(HINT_KEEPDIMS, ca(keepdims="max")),
        Mistake(HINT_KEEPDIMS, ca(keepdims="sum")),
        Mistake("the values are xv itself: project them too, v = xv @ W_v",
                lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xv @ wk, xv)),
    ] + _batch_axis_mistakes(lambda xq, xv, wq, wk, wv: (xq @ wq, xv @ wk, xv @ wv))


def check_cross_attention(fn: Callable) -> Verdict:
    """Check a learner's ``cross_attention(xq, xv, W_q, W_k, W_v)``: queries from xq, keys and
    values from xv (returns the output, or an ``(output, weights)`` tuple; weights checked)."""
    return run_cases(fn, cross_attention_cases(), "check_cross_attention",
                     mistakes=_cross_mistakes(), rules=[batch_rule()])
