"""Checkers of chapter 14 (Part VI, the KV cache): its size in bytes, the
sliding-window mask, attention through a rolling buffer."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["kv_cache_bytes_cases", "check_kv_cache_bytes", "sliding_window_mask_cases",
           "check_sliding_window_mask", "rolling_attention_cases", "check_rolling_attention"]


def _kv_bytes(layers, kv_heads, head_dim, n_tokens, bytes_per_number=2):
    return 2 * layers * kv_heads * head_dim * n_tokens * bytes_per_number


def kv_cache_bytes_cases() -> list[Case]:
    out = []
    for label, args in [
        ("2 layers, 1 KV head of 4, 3 tokens, fp32", (2, 1, 4, 3, 4)),
        ("32 layers, 8 heads of 128, 1 token, bf16", (32, 8, 128, 1, 2)),
        ("28 layers, 4 heads of 128, 8192 tokens", (28, 4, 128, 8192, 2)),
        ("the same in float32 (4 bytes per number)", (28, 4, 128, 8192, 4)),
        ("an empty cache: 0 tokens", (80, 8, 128, 0, 2)),
    ]:
        out.append(Case(label, args, float(_kv_bytes(*args))))
    return out


def _kv_bytes_mistakes(case):
    layers, h, hd, n, b = case.args
    forms = [
        ("half the expected size: the cache holds keys AND values, "
         "a factor of 2.", _kv_bytes(*case.args) / 2),
        ("the result is in numbers, not bytes: multiply by "
         "bytes_per_number.", _kv_bytes(layers, h, hd, n, 1)),
        ("the result is in bits: a byte is 8 bits; count bytes.",
         _kv_bytes(*case.args) * 8),
        ("the result does not grow with n_tokens: every token in the "
         "cache keeps its own keys and values.",
         _kv_bytes(layers, h, hd, 1, b)),
    ] + [(f"the result is in {unit}: return bytes, and convert only "
          "when you print.", _kv_bytes(*case.args) / 2 ** p)
         for unit, p in (("KiB", 10), ("MiB", 20), ("GiB", 30))]
    return [Mistake.result(hint, value) for hint, value in forms]


def check_kv_cache_bytes(fn: Callable) -> Verdict:
    """Check ``kv_cache_bytes(layers, kv_heads, head_dim, n_tokens,
    bytes_per_number)``: the bytes a KV cache holds (keys and values)."""
    return run_cases(fn, kv_cache_bytes_cases(), "check_kv_cache_bytes", rtol=0,
                     atol=0.5, mistakes=_kv_bytes_mistakes)


# --- sliding window and rolling buffer ----------------------------------------

def _band(n_q, n_k, lo, hi, top_left=False):
    """Keys at offsets lo <= p - j <= hi from query i's position p."""
    start = 0 if top_left else n_k - n_q
    pos = start + np.arange(n_q)[:, None]
    off = pos - np.arange(n_k)[None, :]
    return (off >= lo) & (off <= hi)


def sliding_window_mask_cases() -> list[Case]:
    out = []
    for label, n_q, n_k, w in [
        ("6 tokens, window 3 (square: n_q = n_k = 6)", 6, 6, 3),
        ("decoding: 1 new query against 8 keys, window 3 (shape (1, 8))",
         1, 8, 3),
        ("a chunk: 3 queries against 8 keys, window 4 (shape (3, 8))",
         3, 8, 4),
        ("window 1: each query sees only itself", 5, 5, 1),
        ("window 10 > 4 keys: the plain causal mask", 2, 4, 10),
        ("no queries yet: shape (0, 5)", 0, 5, 2),
    ]:
        out.append(Case(label, (n_q, n_k, w),
                        ref.sliding_window_mask(n_q, n_k, w)))
    return out


def _sliding_window_mistakes(case):
    n_q, n_k, w = case.args
    forms = [
        ("your mask is aligned top-left (query i at position i). With "
         "a cache the queries are the LAST n_q positions: query i "
         "sits at n_k - n_q + i.", _band(n_q, n_k, 0, w - 1, True),
         None),
        ("each query sees window + 1 keys: the window counts the "
         "query's own key, so it reaches back to p - window + 1, "
         "not p - window.", _band(n_q, n_k, 0, w), None),
        ("each query sees window - 1 keys: the window includes the "
         "query's own position p, so keys p - window + 1 .. p.",
         _band(n_q, n_k, 0, w - 2), None),
        ("your band also reaches into the future: keep only keys at "
         "or before the query's position (the causal part).",
         _band(n_q, n_k, -(w - 1), w - 1), None),
        ("the query does not see its own key: the window ends AT the "
         "query's position p (keys p - window + 1 .. p, so key j <= "
         "p, not j < p).", _band(n_q, n_k, 1, w), None),
        ("your band looks forward, at keys p .. p + window - 1 (is "
         "the mask transposed? rows are queries, columns keys): the "
         "window ends at the query's own position.",
         _band(n_q, n_k, -(w - 1), 0), None),
        ("True and False are swapped: in this book True means "
         "'may attend'.", ~ref.sliding_window_mask(n_q, n_k, w), None),
        ("this is the plain causal mask: the window is missing.",
         ref.causal_mask(n_q, n_k), None),
    ]
    return [Mistake.result(hint, value, rows) for hint, value, rows in forms]


def check_sliding_window_mask(fn: Callable) -> Verdict:
    """Check ``sliding_window_mask(n_q, n_k, window)``: boolean (n_q, n_k),
    True = may attend; query i at position n_k - n_q + i sees the ``window``
    keys ending at its own position."""
    return run_cases(fn, sliding_window_mask_cases(), "check_sliding_window_mask",
                     want_bool=True, mistakes=_sliding_window_mistakes)


def _pick_output(result):
    """The output from ``output`` or ``(output, weights)`` (tuple or list)."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        first = result[0]
        if isinstance(first, np.ndarray) and first.ndim == 2:
            return first
    if isinstance(result, tuple) and result:
        return result[0]
    return result


def _softmax_rows(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _zero_slots_attention(q, k, v, w):
    """The wrong answer that attends to every slot of a zero-filled ring
    buffer, the slots not yet written included (their key and value are 0)."""
    kb, vb = np.zeros((w, k.shape[1])), np.zeros((w, v.shape[1]))
    out = np.empty((len(q), v.shape[1]))
    for p in range(len(q)):
        kb[p % w], vb[p % w] = k[p], v[p]
        out[p] = _softmax_rows(kb @ q[p] / np.sqrt(q.shape[1])) @ vb
    return out


def rolling_attention_cases() -> list[Case]:
    rng = np.random.default_rng(14)
    out = []
    for label, n, d_k, d_v, w in [
        ("7 tokens, window 3 (the buffer wraps around twice)", 7, 4, 4, 3),
        ("9 tokens, window 2, d_k = 4, d_v = 3", 9, 4, 3, 2),
        ("window 1: each output is the token's own value", 5, 3, 3, 1),
        ("4 tokens, window 4: never wraps, plain causal attention", 4, 4, 2,
         4),
        ("3 tokens, window 5 > 3: the buffer is never full", 3, 4, 4, 5),
    ]:
        q = rng.normal(size=(n, d_k))
        k = rng.normal(size=(n, d_k))
        v = rng.normal(size=(n, d_v))
        expected, _ = ref.scaled_dot_product_attention(
            q, k, v, ref.sliding_window_mask(n, n, w))
        out.append(Case(label, (q, k, v, w), expected))
    return out


def _rolling_mistakes(case):
    q, k, v, w = case.args
    n = len(q)

    def masked(mask):
        return ref.scaled_dot_product_attention(
            q, k, v, mask, fully_masked="zeros")[0]

    def masked_unscaled(mask):
        d_k = q.shape[-1]  # undo the 1/sqrt(d_k) of the answer key
        return ref.scaled_dot_product_attention(
            q * np.sqrt(d_k), k, v, mask, fully_masked="zeros")[0]

    forms = [
        ("the outputs equal full causal attention: the window is not "
         "applied (does the buffer keep only `window` keys?).",
         masked(ref.causal_mask(n)), None),
        ("each step attends to window + 1 keys: a buffer of `window` "
         "slots holds the new key and the window - 1 before it.",
         masked(ref.sliding_window_mask(n, n, w + 1)), None),
        ("the new token does not see its own key: store k[p] and v[p] "
         "in the buffer BEFORE attending.",
         masked(_band(n, n, 1, w)), slice(1, None)),
        ("the empty slots take part: before the buffer is full, "
         "attend only to the slots written so far (their zero keys "
         "still get weight in the softmax).",
         _zero_slots_attention(q, k, v, w), None),
        ("the scores are not scaled: divide q . k by sqrt(d_k).",
         masked_unscaled(ref.sliding_window_mask(n, n, w)), None),
    ] + ([] if w < 2 else [
        ("each step attends to window - 1 keys: the buffer has "
         "`window` slots, the new key and the window - 1 before it.",
         masked(ref.sliding_window_mask(n, n, w - 1)), None)])
    return [Mistake.result(hint, value, rows) for hint, value, rows in forms]


def _ring_buffer_error(exc, case):
    """The errors that two ring-buffer mistakes raise, named."""
    if isinstance(exc, IndexError):
        return "a buffer of `window` slots stores position p in slot p % window"
    if isinstance(exc, ValueError) and "zero-size" in str(exc):
        return ("at the first token the buffer is still empty; store k[p] and "
                "v[p] BEFORE attending")
    return None


def check_rolling_attention(fn: Callable) -> Verdict:
    """Check ``rolling_attention(q, k, v, window)``: q, k (N, d_k), v (N, d_v),
    one token at a time with a ring buffer of ``window`` slots; returns the N
    outputs (N, d_v), or a tuple or list ``(outputs, anything)``."""
    return run_cases(fn, rolling_attention_cases(), "check_rolling_attention",
                     pick=_pick_output, mistakes=_rolling_mistakes,
                     on_error=_ring_buffer_error)
