"""Exercise checkers of the part "Attention in today's LLMs".

Chapters import them from :mod:`attnbook.check`, which re-exports every name
here. Each chapter's checkers sit in a section of their own.
"""

from __future__ import annotations

import textwrap
from typing import Callable

import numpy as np

from . import reference as ref
from .check import Case, Verdict, _compare, _require_bool, run_cases

__all__: list[str] = []


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
    verdict = run_cases(_require_bool(fn), cases, "check_sliding_window_mask")
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
