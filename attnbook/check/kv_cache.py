"""Checkers of chapter 14 (Part VI, the KV cache): its size in bytes, the
sliding-window mask, attention through a rolling buffer."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import BadResult, Case, Mistake, Verdict, run_cases

__all__ = ["kv_cache_bytes_cases", "kv_cache_bytes_mistakes", "check_kv_cache_bytes",
           "sliding_window_mask_cases",
           "check_sliding_window_mask", "rolling_attention_cases", "check_rolling_attention"]


def _kv_bytes(layers, kv_heads, head_dim, n_tokens, bytes_per_number=2):
    return 2 * layers * kv_heads * head_dim * n_tokens * bytes_per_number


def kv_cache_bytes_cases() -> list[Case]:
    # Sizes chosen so that no two of the mistakes below give the same numbers
    # on every case (tests/check/test_check_llm.py checks it): the first case has a
    # factor of its own for each argument, and float64, bf16 and float32
    # caches tell a missing bytes_per_number from a hard-coded 2 or 4.
    out = []
    for label, args in [
        ("3 layers, 5 KV heads of 7, 11 tokens, float64 (8 bytes), like the "
         "toy decoder of chapter 14", (3, 5, 7, 11, 8)),
        ("32 layers, 8 heads of 128, 1 token, bf16", (32, 8, 128, 1, 2)),
        ("28 layers, 4 heads of 128, 8192 tokens, bf16", (28, 4, 128, 8192, 2)),
        ("the same in float32 (4 bytes per number)", (28, 4, 128, 8192, 4)),
        ("an empty cache: 0 tokens", (80, 8, 128, 0, 2)),
    ]:
        out.append(Case(label, args, float(_kv_bytes(*args))))
    return out


def kv_cache_bytes_mistakes() -> list[tuple[str, Callable]]:
    """(hint, the wrong function) for the mistakes a learner plausibly makes."""
    def times(factor):
        return lambda *a: _kv_bytes(*a) * factor

    def without(i):  # one argument left out (taken as 1)
        return lambda *a: _kv_bytes(*(1 if j == i else x for j, x in enumerate(a)))

    def fixed_bytes(b):
        return lambda layers, h, hd, n, _: _kv_bytes(layers, h, hd, n, b)

    return [
        ("half the expected size: the cache holds keys AND values, a factor "
         "of 2.", times(1 / 2)),
        ("the result counts numbers, not bytes: multiply by "
         "bytes_per_number.", without(4)),
        ("bytes_per_number is ignored and 2 (bf16) used instead: use the "
         "argument (the cases include float64 and float32 caches).",
         fixed_bytes(2)),
        ("bytes_per_number is ignored and 4 (float32) used instead: use the "
         "argument.", fixed_bytes(4)),
        ("the result is one layer's cache: every layer keeps its own keys "
         "and values, so multiply by layers.", without(0)),
        ("the result is one KV head's cache: multiply by kv_heads (the KV "
         "heads, not the query heads, are what the cache keeps).", without(1)),
        ("each key and each value has head_dim numbers: multiply by "
         "head_dim.", without(2)),
        ("the result does not grow with n_tokens: every token in the cache "
         "keeps its own keys and values.", without(3)),
        ("the result is in bits: a byte is 8 bits; count bytes.", times(8)),
        ("keys and values are counted twice: the factor is 2, once.",
         times(2)),
    ] + [(f"the result is in {unit}: return bytes, and convert only when you "
          "print.", times(2.0 ** -p))
         for unit, p in (("KiB", 10), ("MiB", 20), ("GiB", 30))]


def _kv_bytes_rule(fn, call, cases, index, rtol, atol, want_bool):
    """The mistake whose results equal the learner's on every case (one case
    alone cannot tell, say, a missing factor 2 from a hard-coded 4 bytes)."""
    got = [float(np.asarray(call(fn, case)["output"])) for case in cases]
    for hint, wrong in kv_cache_bytes_mistakes():
        if np.allclose(got, [wrong(*case.args) for case in cases], rtol=1e-9,
                       atol=0.5):
            return hint
    return None


def check_kv_cache_bytes(fn: Callable) -> Verdict:
    """Check ``kv_cache_bytes(layers, kv_heads, head_dim, n_tokens,
    bytes_per_number)``: the bytes a KV cache holds (keys and values). A
    failure is named by the mistake that gives the learner's numbers on every
    case."""
    return run_cases(fn, kv_cache_bytes_cases(), "check_kv_cache_bytes", rtol=0,
                     atol=0.5, rules=[_kv_bytes_rule])


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

    def masked_scaled_by(scale, mask):
        d_k = q.shape[-1]  # replace the 1/sqrt(d_k) of the answer key
        return ref.scaled_dot_product_attention(
            q * np.sqrt(d_k) / scale, k, v, mask, fully_masked="zeros")[0]

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
        ("the scores are divided by sqrt(d_v), the width of the values: "
         "divide q . k by sqrt(d_k), the width of the queries and keys.",
         masked_scaled_by(np.sqrt(v.shape[-1]), ref.sliding_window_mask(n, n, w)),
         None),
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


# --- page 1 of chapter 14: one head's decode step with RoPE -------------------

__all__ += ["cached_attention_cases", "check_cached_attention"]


def _cached_step(q, k, v, k_cache, v_cache, *, offset=True, mask="bottom-right",
                 append_first=True, rotate_q=True, rotate_v=False, scale="k",
                 cache_rotated=True, rerotate=False, prepend=False):
    """One decode step of one head, right by default, with one knob turned."""
    start, n = len(k_cache), len(q)
    at = start if offset else 0
    pos = np.arange(at, at + n)
    q2 = ref.rope(q, pos) if rotate_q else q
    k2 = ref.rope(k, pos)
    v2 = ref.rope(v, pos) if rotate_v else v
    new_k = np.concatenate([k_cache, k2 if cache_rotated else k])
    new_v = np.concatenate([v_cache, v2])
    if prepend:  # the new rows put in front of the cache
        new_k, new_v = np.concatenate([k2, k_cache]), np.concatenate([v2, v_cache])
    keys, vals = new_k, new_v
    if rerotate or not cache_rotated:  # every cached key rotated (again)
        keys = ref.rope(new_k, np.arange(len(new_k)))
    if not append_first:  # attended to the old cache only
        keys, vals = keys[:start], v_cache
    if len(keys) == 0:
        return np.zeros((n, v.shape[-1])), new_k, new_v
    if mask == "bottom-right":
        m = ref.causal_mask(n, len(keys))
    elif mask == "top-left":
        m = np.tril(np.ones((n, len(keys)), dtype=bool))
    else:
        m = np.ones((n, len(keys)), dtype=bool)
    d = {"k": q.shape[-1], "v": v.shape[-1], "none": 1}[scale]
    s = np.where(m, q2 @ keys.T / np.sqrt(d), -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return (w / w.sum(axis=-1, keepdims=True)) @ vals, new_k, new_v


def _feed(fn, q, k, v, pieces):
    """Feed the rows of q, k, v to fn piece by piece, as prefill and decoding
    do: {"output": the outputs of all rows (N, d_v), "k_cache": the last key
    cache}. Raises BadResult when fn returns something of the wrong form."""
    k_cache, v_cache = np.zeros((0, k.shape[1])), np.zeros((0, v.shape[1]))
    outs, start = [], 0
    for n in pieces:
        rows = slice(start, start + n)
        try:
            got = fn(q[rows].copy(), k[rows].copy(), v[rows].copy(),
                     k_cache.copy(), v_cache.copy())
        except Exception as exc:
            if start == 0 and hasattr(exc, "__dict__"):
                exc._attnbook_empty_cache = True  # for _empty_cache_error
            raise
        if not (isinstance(got, (tuple, list)) and len(got) == 3):
            kind = type(got).__name__ + (
                f" of {len(got)}" if isinstance(got, (tuple, list)) else "")
            raise BadResult("return the tuple (out, k_cache, v_cache): the "
                            "outputs of the new rows and the two grown caches "
                            f"(your function returned: {kind})")
        try:
            out, k_cache, v_cache = (np.asarray(g, dtype=float) for g in got)
        except (TypeError, ValueError):
            raise BadResult("out, k_cache and v_cache must be arrays of "
                            "numbers") from None
        want = (start + n, k.shape[1]), (start + n, v.shape[1])
        if (k_cache.shape, v_cache.shape) != want:
            raise BadResult(
                f"after {start} cached rows and {n} new ones the caches must "
                f"be {want[0]} and {want[1]}, got {k_cache.shape} and "
                f"{v_cache.shape}: append the new keys and values to the "
                "caches and return them")
        outs.append(out)
        start += n
    return {"output": np.concatenate(outs), "k_cache": k_cache}


def _call_cached(fn, case):
    return _feed(fn, *case.args)


def cached_attention_cases() -> list[Case]:
    rng = np.random.default_rng(1414)
    out = []
    for label, pieces, d, d_v in [
        ("a prompt of 4 tokens, then 3 decode steps of 1 token (d = 4)",
         (4, 1, 1, 1), 4, 4),
        ("a prompt of 3, one token, then a chunk of 3 (d = 6, d_v = 3)",
         (3, 1, 3), 6, 3),
        ("one token at a time from an empty cache, 6 tokens (d = 2)",
         (1,) * 6, 2, 2),
        ("a whole prompt of 5 tokens in one pass (nothing cached)", (5,), 4,
         5),
    ]:
        n = sum(pieces)
        q, k = rng.normal(size=(2, n, d))
        v = rng.normal(size=(n, d_v))
        at = np.arange(n)
        k_rot = ref.rope(k, at)
        expected, _ = ref.scaled_dot_product_attention(
            ref.rope(q, at), k_rot, v, ref.causal_mask(n))
        out.append(Case(label, (q, k, v, pieces),
                        {"output": expected, "k_cache": k_rot}))
    return out


_CACHED_MISTAKES = [
    ("the new rows are rotated as if they stood at positions 0, 1, ...: "
     "they sit where the cache ends, positions T, T + 1, ... (T = "
     "len(k_cache)).", dict(offset=False)),
    ("the mask is aligned top-left (np.tril, or is_causal=True): the n new "
     "queries are the LAST n of the T + n positions, so query i sees keys "
     "0 .. T + i (ref.causal_mask(n, T + n)).", dict(mask="top-left")),
    ("there is no causal mask: within a chunk of several new tokens, a "
     "token must not see the ones after it (ref.causal_mask(n, T + n)).",
     dict(mask="none")),
    ("the queries are not rotated: RoPE rotates the queries and the keys, "
     "each at its own position.", dict(rotate_q=False)),
    ("the values are rotated: RoPE rotates only the queries and the keys.",
     dict(rotate_v=True)),
    ("the scores are not scaled: divide them by sqrt(d), the width of the "
     "queries and keys.", dict(scale="none")),
    ("the scores are divided by sqrt(d_v), the width of the values: the "
     "scale is 1 / sqrt(d), the width of the queries and keys.",
     dict(scale="v")),
    ("the new tokens attend before their keys are appended: store the new "
     "keys and values first, so that each token sees itself.",
     dict(append_first=False)),
    ("the new keys and values are put in front of the cache: append them at "
     "the end, so that row j of the cache is position j (the mask relies on "
     "it).", dict(prepend=True)),
    ("the cached keys are rotated again at every step: they were rotated "
     "when they were stored; rotate only the new rows.", dict(rerotate=True)),
    ("the outputs are right, but the cache holds the keys before RoPE (and "
     "every step rotates them all again): store each key after rotating it, "
     "so that a step rotates only its new rows.", dict(cache_rotated=False)),
]


def _empty_cache_error(exc, case):
    """An error about attending to nothing, raised while the cache was empty."""
    words = ("zero-size", "every key masked", "empty")
    if getattr(exc, "_attnbook_empty_cache", False) and any(w in str(exc) for w in words):
        return ("the cache is empty at the first call: append the new keys "
                "and values BEFORE attending, so that each token also sees "
                "itself")
    return None


def check_cached_attention(fn: Callable) -> Verdict:
    """Check ``cached_attention(q, k, v, k_cache, v_cache)``: one head's decode
    step with RoPE. q, k (n, d) and v (n, d_v) are the new rows, not yet
    rotated; k_cache (T, d) holds the rotated keys of positions 0 .. T-1 and
    v_cache (T, d_v) their values. Returns ``(out, k_cache, v_cache)``: the
    (n, d_v) outputs and the grown caches. Each case feeds a sequence in
    pieces (a prompt, single tokens, a chunk) and compares the outputs with
    attention over the whole sequence at once, then the last key cache with
    the rotated keys."""
    mistakes = [Mistake(hint, (lambda kw: lambda *a: _cached_step(*a, **kw))(kw))
                for hint, kw in _CACHED_MISTAKES]
    return run_cases(fn, cached_attention_cases(), "check_cached_attention",
                     call=_call_cached, mistakes=mistakes,
                     on_error=_empty_cache_error)
