"""Checkers of chapter 21 (Part VIII): the top-k selection of DeepSeek
Sparse Attention."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["topk_cases", "topk_mistakes", "check_topk_mask"]


def _distinct(rng, shape, low=-2.0, high=2.0):
    """Index scores with no two equal in a row (the top-k is then unique)."""
    n = int(np.prod(shape))
    values = np.round(rng.permutation(np.linspace(low, high, n)), 4)
    return values.reshape(shape)


def topk_cases() -> list[Case]:
    """No ties in any row; the cases differ in N_q, N_k, top_k and the mask."""
    rng = np.random.default_rng(21)
    window = ref.sliding_window_mask(6, 6, 3)
    out = []
    for label, scores, top_k, mask in [
        ("one query, 6 keys, top_k = 2, no mask", _distinct(rng, (1, 6)), 2, None),
        ("5 tokens, causal mask, top_k = 2: queries 0 and 1 have fewer "
         "than 2 allowed keys", _distinct(rng, (5, 5)), 2, ref.causal_mask(5)),
        ("a batch of 2 x 4 tokens, causal mask, top_k = 3",
         _distinct(rng, (2, 4, 4)), 3, ref.causal_mask(4)),
        ("6 tokens, sliding window of 3 keys, top_k = 2", _distinct(rng, (6, 6)),
         2, window),
        ("5 tokens, causal mask, every score negative, top_k = 2",
         _distinct(rng, (5, 5), -3.0, -0.5), 2, ref.causal_mask(5)),
        ("4 queries, 7 keys, no mask, top_k = 10 (more than the keys)",
         _distinct(rng, (4, 7)), 10, None),
        ("6 tokens, causal mask, top_k = 1", _distinct(rng, (6, 6)), 1,
         ref.causal_mask(6)),
    ]:
        kwargs = {} if mask is None else {"mask": mask}
        out.append(Case(label, (scores, top_k), ref.topk_mask(scores, top_k, mask),
                        kwargs=kwargs))
    return out


def _keep_top(s, top_k, axis=-1, largest=True):
    order = np.argsort(-s if largest else s, axis=axis, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(s.shape[axis]).reshape(
        [-1 if a == (axis % s.ndim) else 1 for a in range(s.ndim)]), axis=axis)
    return rank < top_k


def _masked(s, mask, fill=-np.inf):
    return s if mask is None else np.where(mask, s, fill)


def topk_mistakes() -> list[Mistake]:
    """The wrong answers a learner plausibly writes, with the hint that names each."""
    def mask_after(s, top_k, mask=None):
        keep = _keep_top(s, top_k)
        return keep if mask is None else keep & mask

    def mask_ignored(s, top_k, mask=None):
        return _keep_top(s, top_k)

    def zero_fill(s, top_k, mask=None):
        return _keep_top(_masked(s, mask, 0.0), top_k)

    def zero_fill_then_mask(s, top_k, mask=None):
        keep = _keep_top(_masked(s, mask, 0.0), top_k)
        return keep if mask is None else keep & mask

    def hidden_ranked(s, top_k, mask=None):
        return _keep_top(_masked(s, mask), top_k)

    def smallest(s, top_k, mask=None):
        keep = _keep_top(_masked(s, mask, np.inf), top_k, largest=False)
        return keep if mask is None else keep & mask

    def one_more(s, top_k, mask=None):
        keep = _keep_top(_masked(s, mask), top_k + 1)
        return keep if mask is None else keep & mask

    def query_axis(s, top_k, mask=None):
        keep = _keep_top(_masked(s, mask), top_k, axis=-2)
        return keep if mask is None else keep & mask

    return [
        Mistake("the mask was applied after the top-k: future (hidden) keys "
                "took places in the top-k and were then dropped, so some "
                "queries kept fewer than top_k keys. Set the hidden keys' "
                "scores to -inf first, then take the top-k.", mask_after),
        Mistake("hidden keys were kept: the mask was not applied at all. A "
                "query may keep only keys its mask allows.", mask_ignored),
        Mistake("hidden keys were kept: their scores were set to 0, which "
                "beats any negative allowed score. Set them to -inf (and "
                "keep only allowed keys).", zero_fill),
        Mistake("some queries kept fewer than top_k keys: the hidden keys' "
                "scores were set to 0, not -inf, before the top-k, so a hidden "
                "key beat the negative allowed scores, took a place, and was "
                "then dropped by & mask. Fill with -inf, then take the top-k.",
                zero_fill_then_mask),
        Mistake("a query with fewer allowed keys than top_k kept hidden keys "
                "too: at -inf they are ranked last, but they still have ranks "
                "below top_k. Keep a key only if it is allowed AND in the top "
                "k (np.isfinite(s) & (rank < top_k), or & mask).",
                hidden_ranked),
        Mistake("the LOWEST scores were kept: sort in descending order "
                "(np.argsort(-scores)) or take the last top_k of an "
                "ascending sort.", smallest),
        Mistake("one key too many per query: keep ranks 0 .. top_k - 1 "
                "(rank < top_k), not rank <= top_k.", one_more),
        Mistake("the top-k was taken down each column (over the queries, "
                "axis -2): each query chooses among its own row of keys, "
                "axis -1.", query_axis),
    ]


def check_topk_mask(fn: Callable) -> Verdict:
    """Check ``topk_mask(index_scores, top_k, mask=None)``: index_scores
    (..., N_q, N_k), mask boolean (True = may attend); returns a boolean
    (..., N_q, N_k), True for the top_k allowed keys of each query with the
    highest scores (all its allowed keys if it has fewer)."""
    return run_cases(fn, topk_cases(), "check_topk_mask", rtol=0, atol=0,
                     mistakes=topk_mistakes(), want_bool=True)
