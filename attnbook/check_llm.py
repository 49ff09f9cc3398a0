"""Exercise checkers of the part "Attention in today's LLMs" (RoPE, the KV cache, GQA).

Re-exported by :mod:`attnbook.check`, so chapters call ``check.check_rope``
and so on. Each checker runs the learner's function on several cases with
:func:`attnbook.check.run_cases`; after a failure it also compares the result
with the wrong answers learners plausibly write (the other RoPE pairing, a
flipped sine, ``np.tile`` instead of ``np.repeat`` ...) and names the mistake
when one matches.
"""

from __future__ import annotations

from typing import Callable

import textwrap

import numpy as np

from . import reference as ref
from .check import Case, Verdict, _compare, run_cases


def _first_if_tuple(result):
    """The output of an (output, weights) tuple or list; anything else as it is."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0]
    return result

__all__ = ["check_rope", "check_gqa", "check_kv_cache_bytes"]


def _call(fn, case, pick=None):
    """Run fn on a copy of the case's arguments; None if it raises."""
    args = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a
                 for a in case.args)
    try:
        with np.errstate(all="ignore"):
            got = fn(*args, **case.kwargs)
        if pick is not None:
            got = pick(got)
        return np.asarray(got, dtype=float)
    except Exception:
        return None


def _hint(fn, cases, wrong_forms, pick=None):
    """After a failure: print a hint if the first failing case matches a known
    wrong answer. wrong_forms(case) -> [(hint, wrong_result), ...]."""
    for case in cases:
        got = _call(fn, case, pick)
        if got is None:
            return
        exp = np.asarray(case.expected, dtype=float)
        if got.shape == exp.shape and np.allclose(got, exp, rtol=1e-6,
                                                  atol=1e-9):
            continue
        for hint, wrong in wrong_forms(case):
            wrong = np.asarray(wrong, dtype=float)
            if (got.shape == wrong.shape
                    and np.allclose(got, wrong, rtol=1e-6, atol=1e-9)):
                print(textwrap.fill(hint, 79, initial_indent="    hint: ",
                                    subsequent_indent="    "))
                return
        return


# --- RoPE -------------------------------------------------------------------

def _rope_variant(x, positions, base=10000.0, *, interleaved=False,
                  exponent=2, offset=0, sign=1.0, arange=False,
                  repeat_angles=False):
    """RoPE with one knob turned: the wrong answers the checker recognises.

    arange: positions 0..N-1 whatever was passed; repeat_angles: the angle
    table laid out (t0, t0, t1, t1, ...) while the halves are rotated."""
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    i = np.arange(d // 2)
    theta = float(base) ** (-exponent * i / d)  # (d/2,)
    pos = np.asarray(positions, dtype=float)
    if arange:
        pos = np.arange(x.shape[-2], dtype=float)
    ang = (pos + offset)[..., None] * theta
    cos, sin = np.cos(ang), sign * np.sin(ang)
    if repeat_angles:  # rotate_half with np.repeat(ang, 2) instead of [ang, ang]
        cos2, sin2 = np.repeat(cos, 2, -1), np.repeat(sin, 2, -1)
        half = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], axis=-1)
        return x * cos2 + half * sin2
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty(np.broadcast_shapes(x.shape, cos.shape[:-1] + (d,)))
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def rope_cases() -> list[Case]:
    # d = 4 (two pairs) keeps a failure report within 79 columns
    rng = np.random.default_rng(13)
    x = rng.normal(size=(5, 4))
    heads = rng.normal(size=(2, 3, 6, 2))
    out = []
    for label, args, kwargs in [
        ("x (5, 4) at positions 0..4, base 10000", (x, np.arange(5)), {}),
        ("one head of 3 tokens with d = 2 (a single pair)",
         (x[:3, :2], np.arange(3)), {}),
        ("x (2, 3, 6, 2): batch and heads in front",
         (heads, np.arange(6)), {}),
        ("tokens after a cache: positions 7..11, not 0..4",
         (x, np.arange(7, 12)), {}),
        ("base = 500000.0 (LLaMA 3), passed as base=...",
         (x, np.arange(5)), {"base": 500000.0}),
        ("position 0 only: RoPE is the identity",
         (x[:1], np.array([0])), {}),
    ]:
        out.append(Case(label, args, ref.rope(*args, **kwargs), kwargs))
    return out


def check_rope(fn: Callable) -> Verdict:
    """Check a learner's ``rope(x, positions, base=10000.0)``: split-halves
    pairing (x[i], x[i + d/2]), as Hugging Face's LLaMA code; x (..., N, d),
    positions (N,). Returns an array of x's shape."""
    cases = rope_cases()
    verdict = run_cases(fn, cases, "check_rope")

    def wrong_forms(case):
        x, pos = case.args
        base = case.kwargs.get("base", 10000.0)
        return [
            ("you paired neighbours (x[2i], x[2i+1]), the interleaved "
             "convention of Meta's reference code; this exercise pairs "
             "x[i] with x[i + d/2], as Hugging Face's rotate_half does.",
             _rope_variant(x, pos, base, interleaved=True)),
            ("the frequencies use base ** (-i / d); RoPE's are "
             "base ** (-2i / d) for pair i = 0 .. d/2 - 1.",
             _rope_variant(x, pos, base, exponent=1)),
            ("the frequencies use base ** (+2i / d): theta_i must shrink "
             "with i, base ** (-2i / d).",
             _rope_variant(x, pos, base, exponent=-2)),
            ("the positions are off by one: the first token sits at "
             "position 0 (the identity), so use the positions as given.",
             _rope_variant(x, pos, base, offset=1)),
            ("the sine has the wrong sign: (a, b) turns to "
             "(a cos - b sin, a sin + b cos), a rotation by +angle.",
             _rope_variant(x, pos, base, sign=-1.0)),
            ("the base is ignored: pass base through to the frequencies.",
             _rope_variant(x, pos, 10000.0)),
            ("the positions argument is ignored: you used 0, 1, ..., N-1. "
             "Tokens after a cache start later; use the positions given.",
             _rope_variant(x, pos, base, arange=True)),
            ("the angles are laid out (t0, t0, t1, t1, ...), the interleaved "
             "layout, while the coordinates are split in halves: with "
             "rotate_half, the angles must be [t0 .. t_{d/2-1}] twice, "
             "np.concatenate([ang, ang], -1).",
             _rope_variant(x, pos, base, repeat_angles=True)),
        ]

    if not verdict:
        _hint(fn, cases, wrong_forms)
    return verdict


# --- grouped-query attention -----------------------------------------------

def _gqa_variant(q, k, v, *, mapping="repeat", scale_by="k", axis=-1):
    """Grouped-query attention by copying KV heads, with one knob turned."""
    group = q.shape[-3] // k.shape[-3]
    if mapping == "repeat":  # query head h reads KV head h // group
        k2, v2 = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    else:  # tile: query head h reads KV head h % H_kv
        reps = (1,) * (k.ndim - 3) + (group, 1, 1)
        k2, v2 = np.tile(k, reps), np.tile(v, reps)
    d = {"k": q.shape[-1], "v": v.shape[-1], "none": 1}[scale_by]
    s = q @ np.swapaxes(k2, -1, -2) / np.sqrt(d)
    return ref.softmax(s, axis=axis) @ v2


def gqa_cases() -> list[Case]:
    rng = np.random.default_rng(15)
    out = []
    for label, b, h_q, h_kv, n_q, n_k, d_k, d_v in [
        ("GQA: 4 query heads, 2 KV heads, N = 2, d = 2", 1, 4, 2, 2, 2, 2, 2),
        ("GQA: 6 query heads, 3 KV heads (groups of 2)", 1, 6, 3, 4, 4, 3, 3),
        ("8 query heads, 2 KV heads, a batch of 2", 2, 8, 2, 3, 3, 3, 3),
        ("MQA: 4 query heads, 1 KV head", 1, 4, 1, 3, 3, 3, 3),
        ("MHA: 3 query heads, 3 KV heads", 1, 3, 3, 3, 3, 3, 3),
        ("2 queries against 5 keys, d_k = 2, d_v = 3", 1, 4, 2, 2, 5, 2, 3),
    ]:
        q = rng.normal(size=(b, h_q, n_q, d_k))
        k = rng.normal(size=(b, h_kv, n_k, d_k))
        v = rng.normal(size=(b, h_kv, n_k, d_v))
        expected = ref.grouped_query_attention(q, k, v)[0]
        out.append(Case(label, (q, k, v), expected))
    return out


def check_gqa(fn: Callable) -> Verdict:
    """Check a learner's ``gqa(q, k, v)``: q (B, H_q, N_q, d_k), k
    (B, H_kv, N_k, d_k), v (B, H_kv, N_k, d_v); query head h reads KV head
    h // (H_q // H_kv). Returns the output (B, H_q, N_q, d_v), or an
    ``(output, weights)`` tuple."""
    cases = gqa_cases()
    verdict = run_cases(fn, cases, "check_gqa", pick=_first_if_tuple)

    def wrong_forms(case):
        q, k, v = case.args
        return [
            ("query head h read KV head h % H_kv (np.tile, or torch's "
             ".repeat): LLaMA, Qwen2 and Mistral give each KV head a block "
             "of consecutive query heads, h // (H_q // H_kv): np.repeat, "
             "torch's repeat_interleave, or a reshape to "
             "(B, H_kv, group, N, d).", _gqa_variant(q, k, v, mapping="tile")),
            ("the scores are divided by sqrt(d_v); the scale is "
             "1 / sqrt(d_k), the width of the queries and keys.",
             _gqa_variant(q, k, v, scale_by="v")),
            ("the scores are not scaled: divide them by sqrt(d_k).",
             _gqa_variant(q, k, v, scale_by="none")),
            ("the softmax ran over the queries (axis -2): each query's "
             "weights over the keys must sum to 1, softmax over axis -1.",
             _gqa_variant(q, k, v, axis=-2)),
        ]

    if not verdict:
        _hint(fn, cases, wrong_forms, pick=_first_if_tuple)
    return verdict


# --- KV cache size ----------------------------------------------------------

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


def check_kv_cache_bytes(fn: Callable) -> Verdict:
    """Check ``kv_cache_bytes(layers, kv_heads, head_dim, n_tokens,
    bytes_per_number)``: the bytes a KV cache holds (keys and values)."""
    cases = kv_cache_bytes_cases()
    verdict = run_cases(fn, cases, "check_kv_cache_bytes", rtol=0, atol=0.5)

    def wrong_forms(case):
        layers, h, hd, n, b = case.args
        return [
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

    if not verdict:
        _hint(fn, cases, wrong_forms)
    return verdict



# --- The KV cache chapter (14): sliding window and rolling buffer ----------

__all__ += ["check_sliding_window_mask", "check_rolling_attention"]


def _print_hint(fn, cases, wrong_forms, *, prepare=None):
    """After a failure: name the mistake if the learner's result on the first
    failing case equals a known wrong answer.

    ``wrong_forms(*args)`` returns (hint, wrong_result, rows) triples; rows is
    a slice of the rows to compare (None = all of them). Never raises.
    """
    for case in cases:
        args = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a
                     for a in case.args)
        try:
            with np.errstate(all="ignore"):
                got = fn(*args)
                got = prepare(got) if prepare else got
                got = np.asarray(got, dtype=float)
        except Exception:
            return
        if _compare(case.expected, got, 1e-6, 1e-9) is None:
            continue  # this case passed: the hint is about the first failure
        for hint, wrong, rows in wrong_forms(*case.args):
            wrong = np.asarray(wrong, dtype=float)
            if got.shape != wrong.shape:
                continue
            a, b = (got, wrong) if rows is None else (got[rows], wrong[rows])
            if np.allclose(a, b, rtol=1e-6, atol=1e-9):
                print(textwrap.fill(hint, 79, initial_indent="    hint: ",
                                    subsequent_indent="          "))
                return
        return


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


def check_sliding_window_mask(fn: Callable) -> Verdict:
    """Check ``sliding_window_mask(n_q, n_k, window)``: boolean (n_q, n_k),
    True = may attend; query i at position n_k - n_q + i sees the ``window``
    keys ending at its own position."""
    cases = sliding_window_mask_cases()
    verdict = run_cases(fn, cases, "check_sliding_window_mask", want_bool=True)
    if not verdict:

        def wrong_forms(n_q, n_k, w):
            return [
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

        _print_hint(fn, cases, wrong_forms)
    return verdict


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


def _index_hint(fn):
    """Add a hint to the errors that two ring-buffer mistakes raise."""
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except IndexError as exc:
            raise IndexError(
                f"{exc} (hint: a buffer of `window` slots stores position p "
                f"in slot p % window)") from None
        except ValueError as exc:
            if "zero-size" not in str(exc):
                raise
            raise ValueError(
                f"{exc} (hint: at the first token the buffer is still empty; "
                f"store k[p] and v[p] BEFORE attending)") from None
    return wrapped


def check_rolling_attention(fn: Callable) -> Verdict:
    """Check ``rolling_attention(q, k, v, window)``: q, k (N, d_k), v (N, d_v),
    one token at a time with a ring buffer of ``window`` slots; returns the N
    outputs (N, d_v), or a tuple or list ``(outputs, anything)``."""
    cases = rolling_attention_cases()
    verdict = run_cases(_index_hint(fn), cases, "check_rolling_attention",
                        pick=_pick_output)
    if not verdict:

        def wrong_forms(q, k, v, w):
            n = len(q)

            def masked(mask):
                return ref.scaled_dot_product_attention(
                    q, k, v, mask, fully_masked="zeros")[0]

            def masked_unscaled(mask):
                d_k = q.shape[-1]  # undo the 1/sqrt(d_k) of the answer key
                return ref.scaled_dot_product_attention(
                    q * np.sqrt(d_k), k, v, mask, fully_masked="zeros")[0]

            return [
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

        _print_hint(fn, cases, wrong_forms, prepare=_pick_output)
    return verdict
