"""Checkers of Part III (chapters 08-09): multi-head attention from a list of
heads, splitting and merging heads."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases
from ._wrong import *  # noqa: F401,F403
from ._wrong import _attn

__all__ = ['check_multihead_list', 'check_split_heads', 'check_merge_heads']


# --- multi-head attention (Part III) ---

def _mha_list(x, W_qs, W_ks, W_vs, W_o, mask=None, *, scale=None, axis=-1, invert=False,
              combine="concat", same_head=False):
    """Multi-head attention from lists of per-head matrices, with a chosen mistake."""
    outs, weights = [], []
    for h, (wq, wk, wv) in enumerate(zip(W_qs, W_ks, W_vs)):
        if same_head:
            wq, wk, wv = W_qs[0], W_ks[0], W_vs[0]
        m = None if mask is None else (~mask if invert else mask)
        o, w = _attn(x @ wq, x @ wk, x @ wv, m, axis=axis,
                     scale=None if scale is None else (lambda q, k, v: scale(x, W_qs)))
        outs.append(o)
        weights.append(w)
    hs = W_qs[0].shape[1]
    if combine == "concat":
        y = np.concatenate(outs, axis=-1) @ W_o
    elif combine == "no_wo":
        y = np.concatenate(outs, axis=-1)
    elif combine == "average":
        y = sum(o @ W_o[:hs] for o in outs) / len(outs)
    elif combine == "d_over_nh":  # HS taken as D // NH to slice W_o
        step = x.shape[-1] // len(W_qs)
        y = sum(o @ W_o[h * step:(h + 1) * step] for h, o in enumerate(outs))
    else:
        raise ValueError(combine)
    return y, np.stack(weights, axis=-3)


def multihead_list_cases() -> list[Case]:
    rng = np.random.default_rng(8)

    def heads(nh, d, hs):
        return [[rng.normal(size=(d, hs)) for _ in range(nh)] for _ in range(3)]

    out = []
    for label, b, n, d, nh, hs, mask in [
        ("one head (NH = 1, HS = D = 4), one sequence", 1, 3, 4, 1, 4, None),
        ("two heads of HS = 4, D = 8", 1, 5, 8, 2, 4, None),
        ("three heads of HS = 2, D = 8 (NH * HS = 6 is not D)", 1, 4, 8, 3, 2, None),
        ("a batch of 3 sequences, four heads of HS = 2", 3, 4, 8, 4, 2, None),
        ("two heads with a causal mask (N, N), the same for every head", 2, 5, 8, 2, 4,
         "causal"),
        ("two heads of HS = 3, D = 8: HS is W_q's width, not D // NH = 4",
         2, 4, 8, 2, 3, None),
        ("three heads of HS = 2, D = 4: NH * HS = 6 > D, and D // NH = 1",
         1, 3, 4, 3, 2, None),
        ("a padding mask (B, 1, N), lengths [4, 2]: per sequence, every head",
         2, 4, 6, 2, 3, "padding"),
    ]:
        x = rng.normal(size=(b, n, d))
        W_qs, W_ks, W_vs = heads(nh, d, hs)
        W_o = rng.normal(size=(nh * hs, d))
        kwargs = {}
        if mask == "causal":
            kwargs = {"mask": ref.causal_mask(n)}
        elif mask == "padding":
            kwargs = {"mask": ref.padding_mask([4, 2], n)}
        y, w = _mha_list(x, W_qs, W_ks, W_vs, W_o, **kwargs)
        out.append(Case(label, (x, W_qs, W_ks, W_vs, W_o), y, kwargs, weights=w))
    return out


def _multihead_mistakes():
    def mh(**kw):
        return lambda x, W_qs, W_ks, W_vs, W_o, mask=None: _mha_list(
            x, W_qs, W_ks, W_vs, W_o, mask, **kw)

    hs_from_d = ("HS is computed as D // NH; here NH * HS != D, so take HS from "
                 "the matrices: HS = W_qs[0].shape[1]")
    return [
        Mistake(HINT_NO_SCALE, mh(scale=lambda x, W: 1.0)),
        Mistake(HINT_WIDTH_D, mh(scale=lambda x, W: np.sqrt(x.shape[-1]))),
        Mistake(hs_from_d, mh(scale=lambda x, W: np.sqrt(x.shape[-1] // len(W)))),
        Mistake(hs_from_d, mh(combine="d_over_nh")),
        Mistake("the mask is ignored: pass it to every head",
                lambda x, W_qs, W_ks, W_vs, W_o, mask=None: _mha_list(
                    x, W_qs, W_ks, W_vs, W_o)),
        Mistake(HINT_POLARITY, mh(invert=True)),
        Mistake(HINT_AXIS, mh(axis=-2)),
        Mistake("the heads are averaged; multi-head attention concatenates "
                "them and multiplies by W_o", mh(combine="average")),
        Mistake("W_o is not applied: multiply the concatenated heads by W_o",
                mh(combine="no_wo")),
        Mistake("every head uses the first head's matrices: head h uses "
                "W_qs[h], W_ks[h], W_vs[h]", mh(same_head=True)),
    ]


def check_multihead_list(fn: Callable) -> Verdict:
    """Check ``fn(x, W_qs, W_ks, W_vs, W_o, mask=None)``: multi-head attention from lists of
    per-head (D, HS) matrices and the output projection W_o (NH * HS, D); x is (B, N, D).
    It may return the output or an ``(output, weights)`` tuple, weights (B, NH, N, N)."""
    return run_cases(fn, multihead_list_cases(), "check_multihead_list",
                     mistakes=_multihead_mistakes())


def split_heads_cases() -> list[Case]:
    rng = np.random.default_rng(9)
    pictured = np.arange(24, dtype=float).reshape(1, 4, 6)  # entry = 6 * token + column
    out = []
    for label, x, nh in [
        ("the pictured example: (B, N, D) = (1, 4, 6), 3 heads, x[0, t, c] = 6t + c",
         pictured, 3),
        ("a batch (2, 5, 8) into 4 heads of 2", rng.normal(size=(2, 5, 8)), 4),
        ("(2, 3, 6) into 2 heads of 3", rng.normal(size=(2, 3, 6)), 2),
        ("one head: (2, 3, 4) -> (2, 1, 3, 4)", rng.normal(size=(2, 3, 4)), 1),
        ("heads of size 1: (1, 3, 4) into 4 heads", rng.normal(size=(1, 3, 4)), 4),
    ]:
        out.append(Case(label, (x, nh), ref.split_heads(x, nh)))
    return out


def merge_heads_cases() -> list[Case]:
    rng = np.random.default_rng(10)
    pictured = ref.split_heads(np.arange(24, dtype=float).reshape(1, 4, 6), 3)  # (1, 3, 4, 2)
    out = []
    for label, h in [
        ("the pictured example: (B, NH, N, HS) = (1, 3, 4, 2) -> (1, 4, 6)", pictured),
        ("(2, 4, 5, 2) -> (2, 5, 8)", rng.normal(size=(2, 4, 5, 2))),
        ("(2, 2, 3, 3) -> (2, 3, 6)", rng.normal(size=(2, 2, 3, 3))),
        ("one head: (2, 1, 3, 4) -> (2, 3, 4)", rng.normal(size=(2, 1, 3, 4))),
    ]:
        out.append(Case(label, (h,), ref.merge_heads(h)))
    return out


HINT_SPLIT_NO_T = (
    "your result is x reshaped straight to (B, NH, N, HS), without the "
    "transpose. That reads the numbers in memory order, so a 'head' gets "
    "whole rows of one token and part of the next: tokens are mixed across "
    "heads. Reshape to (B, N, NH, HS) first, then swap axes 1 and 2.")
HINT_SPLIT_NO_SWAP = (
    "your result is (B, N, NH, HS): the reshape is right, but axes 1 (N) and "
    "2 (NH) still need to be swapped, e.g. with .transpose(0, 2, 1, 3).")
HINT_SPLIT_INTERLEAVED = (
    "head h got the columns h, h + NH, h + 2 NH, ... (a reshape to "
    "(B, N, HS, NH)); head h holds the block of columns h*HS:(h+1)*HS, so "
    "reshape to (B, N, NH, HS)")
HINT_MERGE_NO_T = (
    "your result is the heads reshaped straight to (B, N, NH * HS), without "
    "the transpose. A token's row then holds several tokens' outputs from one "
    "head. Swap axes 1 (NH) and 2 (N) first, giving (B, N, NH, HS), then "
    "reshape.")
HINT_MERGE_INTERLEAVED = (
    "the heads' columns are interleaved (a transpose to (B, N, HS, NH) before "
    "the reshape); head h's output must fill the block h*HS:(h+1)*HS: "
    "transpose to (B, N, NH, HS)")


def check_split_heads(fn: Callable) -> Verdict:
    """Check ``fn(x, n_heads)``: (B, N, D) -> (B, NH, N, HS), head h holding columns h*HS:(h+1)*HS."""
    def no_t(x, nh):
        b, n, d = x.shape
        return x.reshape(b, nh, n, d // nh)

    def no_swap(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, nh, d // nh)

    def interleaved(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, d // nh, nh).transpose(0, 3, 1, 2)

    mistakes = [Mistake(HINT_SPLIT_NO_T, no_t), Mistake(HINT_SPLIT_NO_SWAP, no_swap),
                Mistake(HINT_SPLIT_INTERLEAVED, interleaved)]
    return run_cases(fn, split_heads_cases(), "check_split_heads", mistakes=mistakes)


def check_merge_heads(fn: Callable) -> Verdict:
    """Check ``fn(h)``: (B, NH, N, HS) -> (B, N, NH * HS), the inverse of split_heads."""
    def no_t(h):
        b, nh, n, hs = h.shape
        return h.reshape(b, n, nh * hs)

    def interleaved(h):
        b, nh, n, hs = h.shape
        return h.transpose(0, 2, 3, 1).reshape(b, n, nh * hs)

    mistakes = [Mistake(HINT_MERGE_NO_T, no_t), Mistake(HINT_MERGE_INTERLEAVED, interleaved)]
    return run_cases(fn, merge_heads_cases(), "check_merge_heads", mistakes=mistakes)
