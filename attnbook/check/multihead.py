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
    elif combine == "rows_h":  # head h's rows taken from h, not h * HS
        y = sum(o @ W_o[h:h + hs] for h, o in enumerate(outs))
    elif combine == "first_rows":  # every head times the first HS rows
        y = sum(o @ W_o[:hs] for o in outs)
    elif combine == "columns":  # W_o sliced by columns
        y = sum(o @ W_o[:, h * hs:(h + 1) * hs] for h, o in enumerate(outs))
    elif combine == "tokens":  # heads joined along the tokens
        y = np.concatenate(outs, axis=-2) @ W_o
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


HINT_POLARITY_RAISED = (
    "a query had every key hidden, yet this case's mask leaves every query "
    "some key: is the mask inverted? True must mean 'may attend' (the "
    "book's convention)")
HINT_WO_SHAPE = (
    "the product with W_o does not fit. W_o is (NH * HS, D): it takes the "
    "heads joined side by side on the last axis, (B, N, NH * HS), or one "
    "head's output (B, N, HS) times its HS rows, W_o[h*HS:(h+1)*HS]. Slicing "
    "W_o's columns, or joining the heads along the tokens (axis 1), does not "
    "fit")


def _inverted_mask_error(exc, case):
    """The hint for a fully masked row (the answer key's error) on a case whose
    mask has none: the learner's code inverted the mask."""
    mask = case.kwargs.get("mask")
    text = str(exc)
    if (mask is not None and np.asarray(mask).any(axis=-1).all()
            and ("every key masked" in text or "entirely -inf" in text)):
        return HINT_POLARITY_RAISED
    return None


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
        Mistake("head h's rows of W_o start at h * HS, not at h: "
                "W_o[h*HS:(h+1)*HS]", mh(combine="rows_h")),
        Mistake("every head is multiplied by the first HS rows of W_o; head "
                "h's rows are W_o[h*HS:(h+1)*HS]", mh(combine="first_rows")),
        Mistake(HINT_WO_SHAPE, mh(combine="columns")),
        Mistake(HINT_WO_SHAPE, mh(combine="tokens")),
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
                     mistakes=_multihead_mistakes(), on_error=_inverted_mask_error)


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
HINT_SPLIT_T = (
    ".T reverses every axis: x.reshape(B, N, NH, HS).T is (HS, NH, N, B). "
    "Swap only axes 1 and 2: .transpose(0, 2, 1, 3) or .swapaxes(1, 2)")
HINT_MERGE_T = (
    ".T reverses every axis: (B, NH, N, HS).T is (HS, N, NH, B). Swap only "
    "axes 1 and 2, .transpose(0, 2, 1, 3), then reshape to (B, N, NH * HS)")
HINT_TRANSPOSE_3 = (
    "transpose(0, 2, 1) lists 3 axes for a 4-D array: give all four, "
    ".transpose(0, 2, 1, 3), or use .swapaxes(1, 2)")
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

    def dot_t(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, nh, d // nh).T

    def three_axes(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, nh, d // nh).transpose(0, 2, 1)

    mistakes = [Mistake(HINT_SPLIT_NO_T, no_t), Mistake(HINT_SPLIT_NO_SWAP, no_swap),
                Mistake(HINT_SPLIT_INTERLEAVED, interleaved), Mistake(HINT_SPLIT_T, dot_t),
                Mistake(HINT_TRANSPOSE_3, three_axes)]
    return run_cases(fn, split_heads_cases(), "check_split_heads", mistakes=mistakes)


def check_merge_heads(fn: Callable) -> Verdict:
    """Check ``fn(h)``: (B, NH, N, HS) -> (B, N, NH * HS), the inverse of split_heads."""
    def no_t(h):
        b, nh, n, hs = h.shape
        return h.reshape(b, n, nh * hs)

    def interleaved(h):
        b, nh, n, hs = h.shape
        return h.transpose(0, 2, 3, 1).reshape(b, n, nh * hs)

    def dot_t(h):
        b, nh, n, hs = h.shape
        return h.T.reshape(b, n, nh * hs)

    def three_axes(h):
        b, nh, n, hs = h.shape
        return h.transpose(0, 2, 1).reshape(b, n, nh * hs)

    mistakes = [Mistake(HINT_MERGE_NO_T, no_t), Mistake(HINT_MERGE_INTERLEAVED, interleaved),
                Mistake(HINT_MERGE_T, dot_t), Mistake(HINT_TRANSPOSE_3, three_axes)]
    return run_cases(fn, merge_heads_cases(), "check_merge_heads", mistakes=mistakes)
