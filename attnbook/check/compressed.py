"""Checkers of chapter 21b (Part VIII): DeepSeek-V4's compressor and the
compressed causal mask."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["compress_cases", "compress_mistakes", "check_compress_kv",
           "compressed_mask_cases", "compressed_mask_mistakes",
           "check_compressed_causal_mask"]


def compress_cases() -> list[Case]:
    """Windows whose gates differ by channel (softmax over the channels
    differs from over the window), sequences with and without a last
    incomplete window, a batch, and non-zero position biases."""
    rng = np.random.default_rng(212)
    out = []
    for label, n, d, rate, lead in [
        ("8 tokens, 3 channels, rate 4 (two whole windows)", 8, 3, 4, ()),
        ("10 tokens, 2 channels, rate 4: the last 2 tokens make no entry",
         10, 2, 4, ()),
        ("a batch of 2 x 9 tokens, 4 channels, rate 3", 9, 4, 3, (2,)),
        ("7 tokens, 3 channels, rate 2", 7, 3, 2, ()),
        ("5 tokens, 2 channels, rate 5 (one window)", 5, 2, 5, ()),
    ]:
        kv = np.round(rng.normal(size=lead + (n, d)), 3)
        z = np.round(rng.normal(size=lead + (n, d)), 3)
        bias = np.round(rng.normal(size=(rate, d)), 3)
        out.append(Case(label, (kv, z, bias, rate), ref.compress_kv(kv, z, bias, rate)))
    return out


def _windows(kv, z, bias, rate, keep_last=False):
    n = kv.shape[-2]
    n_win = -(-n // rate) if keep_last else n // rate
    outs = []
    for w in range(n_win):
        sl = slice(w * rate, min((w + 1) * rate, n))
        outs.append((kv[..., sl, :], z[..., sl, :], bias[: sl.stop - sl.start]))
    return outs


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def compress_mistakes() -> list[Mistake]:
    def stack(parts, _):
        return np.stack(parts, axis=-2)

    def over_channels(kv, z, bias, rate):
        return stack([(_softmax(zz + b, -1) * k).sum(axis=-2)
                      for k, zz, b in _windows(kv, z, bias, rate)], 0)

    def kept_last(kv, z, bias, rate):
        return stack([(_softmax(zz + b, -2) * k).sum(axis=-2)
                      for k, zz, b in _windows(kv, z, bias, rate, True)], 0)

    def no_bias(kv, z, bias, rate):
        return ref.compress_kv(kv, z, np.zeros_like(bias), rate)

    def mean_pool(kv, z, bias, rate):
        return stack([k.mean(axis=-2) for k, _, _ in _windows(kv, z, bias, rate)], 0)

    def one_weight(kv, z, bias, rate):  # one softmax per window: channels summed
        outs = []
        for k, zz, b in _windows(kv, z, bias, rate):
            p = _softmax((zz + b).sum(axis=-1, keepdims=True), -2)
            outs.append((p * k).sum(axis=-2))
        return stack(outs, 0)

    def sliding_windows(kv, z, bias, rate):  # stride 1 instead of rate
        n = kv.shape[-2]
        outs = []
        for s in range(0, n - rate + 1):
            k, zz = kv[..., s:s + rate, :], z[..., s:s + rate, :]
            outs.append((_softmax(zz + bias, -2) * k).sum(axis=-2))
        return stack(outs, 0)

    def bias_after(kv, z, bias, rate):
        return stack([((_softmax(zz, -2) + b) * k).sum(axis=-2)
                      for k, zz, b in _windows(kv, z, bias, rate)], 0)

    def strided(kv, z, bias, rate):  # reshape (rate, N // rate, d): every n_w-th token
        n_w = kv.shape[-2] // rate
        shape = kv.shape[:-2] + (rate, n_w, kv.shape[-1])
        kk = np.swapaxes(kv[..., : n_w * rate, :].reshape(shape), -2, -3)
        zz = np.swapaxes(z[..., : n_w * rate, :].reshape(shape), -2, -3)
        return (_softmax(zz + bias, -2) * kk).sum(axis=-2)

    def zero_padded(kv, z, bias, rate):  # the last window filled up with zeros
        n = kv.shape[-2]
        n_win = -(-n // rate)
        pad = [(0, 0)] * (kv.ndim - 2) + [(0, n_win * rate - n), (0, 0)]
        shape = kv.shape[:-2] + (n_win, rate, kv.shape[-1])
        zz = np.pad(z, pad).reshape(shape) + bias
        return (_softmax(zz, -2) * np.pad(kv, pad).reshape(shape)).sum(axis=-2)

    def sigmoid_gate(kv, z, bias, rate):
        return stack([(k / (1 + np.exp(-(zz + b)))).sum(axis=-2)
                      for k, zz, b in _windows(kv, z, bias, rate)], 0)

    def logits_pooled(kv, z, bias, rate):  # the weights times the logits, not kv
        return ref.compress_kv(z, z, bias, rate)

    return [
        Mistake("the softmax ran over the channels (axis -1): each channel "
                "has its own softmax over the window's tokens (axis -2 of a "
                "(windows, rate, d) array).", over_channels),
        Mistake("the last incomplete window was kept: with N = 10 and rate "
                "4 there are 10 // 4 = 2 entries; the 2 leftover tokens wait "
                "for their window to fill.", kept_last),
        Mistake("the position bias was left out: add position_bias (rate, "
                "d) to each window's gate logits before the softmax.", no_bias),
        Mistake("the window was averaged: the weights are the softmax of the "
                "gate logits plus the bias, not 1/rate each.", mean_pool),
        Mistake("one weight per token for all channels: the gate is per "
                "channel, so keep the (rate, d) logits and take the softmax "
                "of each column.", one_weight),
        Mistake("the windows overlap (stride 1): window w is tokens w*rate "
                "to w*rate + rate - 1, reshape to (N // rate, rate, d).",
                sliding_windows),
        Mistake("the position bias was added to the weights after the "
                "softmax: add it to the gate logits, then take the softmax.",
                bias_after),
        Mistake("the windows are strided: reshaping to (rate, N // rate, d) "
                "puts tokens w, w + N // rate, ... in window w; window w is "
                "the consecutive tokens w*rate to w*rate + rate - 1, so "
                "reshape to (N // rate, rate, d).", strided),
        Mistake("the last window was padded with zeros and kept: an "
                "incomplete window makes no entry (N // rate entries, not "
                "ceil(N / rate)).", zero_padded),
        Mistake("the gate was a sigmoid: the weights are a softmax over the "
                "window (they sum to 1 in each channel).", sigmoid_gate),
        Mistake("the softmax weights multiplied the gate logits: they weigh "
                "kv, the keys-and-values being pooled.", logits_pooled),
    ]


def check_compress_kv(fn: Callable) -> Verdict:
    """Check ``compress_kv(kv, gate_logits, position_bias, rate)``: kv and
    gate_logits (..., N, d), position_bias (rate, d); returns (..., N //
    rate, d), each entry the per-channel softmax-weighted sum of a window."""
    return run_cases(fn, compress_cases(), "check_compress_kv",
                     mistakes=compress_mistakes())


# --- the compressed causal mask --------------------------------------------------

def compressed_mask_cases() -> list[Case]:
    out = []
    for label, n, rate in [
        ("8 tokens, rate 4", 8, 4),
        ("10 tokens, rate 4 (the last 2 tokens in no entry)", 10, 4),
        ("9 tokens, rate 3", 9, 3),
        ("7 tokens, rate 2", 7, 2),
        ("5 tokens, rate 1 (every token its own entry)", 5, 1),
    ]:
        out.append(Case(label, (n, rate), ref.compressed_causal_mask(n, rate)))
    return out


def compressed_mask_mistakes() -> list[Mistake]:
    def grid(n, rate):
        return np.arange(n)[:, None], np.arange(n // rate)[None, :]

    def early(n, rate):
        t, w = grid(n, rate)
        return w <= (t + 1) // rate

    def late(n, rate):
        t, w = grid(n, rate)
        return w < t // rate

    def window_start(n, rate):
        t, w = grid(n, rate)
        return w * rate <= t

    def extra_column(n, rate):
        t, w = np.arange(n)[:, None], np.arange(-(-n // rate))[None, :]
        return w < (t + 1) // rate

    def transposed(n, rate):
        return ref.compressed_causal_mask(n, rate).T

    def token_mask(n, rate):
        return np.tril(np.ones((n, n), dtype=bool))

    def window_start_strict(n, rate):
        t, w = grid(n, rate)
        return w * rate < t

    def inverted(n, rate):
        return ~ref.compressed_causal_mask(n, rate)

    def everything(n, rate):
        return np.ones((n, n // rate), dtype=bool)

    return [
        Mistake("one window too early: query t reads an entry whose window "
                "it is still inside. Entry w ends at token w*rate + rate - 1; "
                "allow w < (t + 1) // rate, not <=.", early),
        Mistake("one token too late: the query at the window's LAST token "
                "may already read it (the window lies at or before t); use "
                "(t + 1) // rate, not t // rate.", late),
        Mistake("the window's FIRST token was compared with t: the entry "
                "pools tokens up to w*rate + rate - 1, which may be in the "
                "future of t.", window_start),
        Mistake("one column too many: there are n // rate entries; the "
                "last incomplete window has no entry yet.", extra_column),
        Mistake("the result is transposed: rows are queries (n), columns "
                "entries (n // rate).", transposed),
        Mistake("this is the token-level causal mask (n, n): the columns are "
                "the n // rate compressed entries.", token_mask),
        Mistake("the window's start was compared with t, w*rate < t: "
                "compare its LAST token, w*rate + rate - 1 <= t (the entry "
                "holds tokens up to it).", window_start_strict),
        Mistake("the mask is inverted (True where the query may NOT read): "
                "here True means may attend.", inverted),
        Mistake("nothing is masked: query t may read an entry only once its "
                "whole window lies at or before t.", everything),
    ]


def check_compressed_causal_mask(fn: Callable) -> Verdict:
    """Check ``compressed_causal_mask(n, rate)``: (n, n // rate) boolean,
    True where query t may read entry w (its whole window at or before t)."""
    return run_cases(fn, compressed_mask_cases(), "check_compressed_causal_mask",
                     rtol=0, atol=0, mistakes=compressed_mask_mistakes(),
                     want_bool=True)
