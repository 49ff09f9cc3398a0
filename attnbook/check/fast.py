"""Checkers of Part VII, "Making attention fast" (chapters 17-18; re-exported
by :mod:`attnbook.check`).

``check_merge_states(fn)`` checks a learner's ``merge(a, b)`` of two partial
attention results ``(m, l, o)`` (see
:func:`attnbook.reference.merge_attention_states`), and names the usual
mistakes when it recognises one: no rescaling, rescaling one side only, the
exponent's sign flipped, the maximum not updated, the output divided too
early, nan from two empty blocks.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import BadResult, Case, Mistake, Verdict, run_cases

__all__ = ["merge_states_cases", "merge_state_mistakes", "check_merge_states"]


_PARTS = ("m (the maximum)", "l (the sum)", "o (the unnormalised output)")


def _state(q, k, v, mask=None):
    return tuple(np.asarray(t) for t in ref.attention_state(q, k, v, mask))


def merge_states_cases() -> list[Case]:
    rng = np.random.default_rng(21)
    q, k, v = rng.normal(size=(3, 4)) * 2, rng.normal(size=(8, 4)) * 2, rng.normal(size=(8, 2))
    big_k = np.concatenate([k[:4], k[4:] * 400])  # second block: scores in the hundreds
    qb, kb, vb = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 6, 2))
    none = np.zeros((3, 4), bool)
    pairs = [
        ("3 queries, keys 0-3 then keys 4-7 (the maxima differ from row to row)",
         _state(q, k[:4], v[:4]), _state(q, k[4:], v[4:])),
        ("the same two blocks in the other order (b before a)",
         _state(q, k[4:], v[4:]), _state(q, k[:4], v[:4])),
        ("the second block's scores are in the hundreds (exp of them overflows)",
         _state(q, big_k[:4], v[:4]), _state(q, big_k[4:], v[4:])),
        ("block b saw no key (every key masked): (-inf, 0, 0) must change nothing",
         _state(q, k[:4], v[:4]), _state(q, k[4:], v[4:], none)),
        ("both blocks saw no key: the result is (-inf, 0, 0), with no nan",
         _state(q, k[:4], v[:4], none), _state(q, k[4:], v[4:], none)),
        ("a batch of 2 sequences, 3 queries each: m and l (2, 3), o (2, 3, 2)",
         _state(qb, kb[:, :2], vb[:, :2]), _state(qb, kb[:, 2:], vb[:, 2:])),
    ]
    return [Case(label, (a, b), dict(zip(_PARTS, ref.merge_attention_states(a, b))))
            for label, a, b in pairs]


def _safe(m):
    return np.where(np.isneginf(m), 0.0, m)


def merge_state_mistakes(a, b):
    """Wrong merges a learner plausibly writes, each with the hint the checker
    prints when the learner's result matches it."""
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    s = _safe(m)
    al, be = np.exp(m_a - s), np.exp(m_b - s)
    right_l, right_o = al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b
    flip_al, flip_be = np.exp(s - m_a), np.exp(s - m_b)
    keep_a = np.exp(m_b - _safe(m_a))
    g = np.max(m)                         # one maximum over every row
    g_al, g_be = np.exp(m_a - _safe(g)), np.exp(m_b - _safe(g))
    return [
        ("nothing is rescaled: l_a + l_b adds sums taken against different maxima; "
         "multiply each side by exp(m_side - m) first",
         (m, l_a + l_b, o_a + o_b)),
        ("only block b is rescaled: block a's sum and output were taken against m_a "
         "and need the factor exp(m_a - m) too",
         (m, l_a + be * l_b, o_a + be[..., None] * o_b)),
        ("only block a is rescaled: block b's sum and output need exp(m_b - m) too",
         (m, al * l_a + l_b, al[..., None] * o_a + o_b)),
        ("the exponent is flipped: the factor is exp(m_side - m), which is at most 1, "
         "not exp(m - m_side)",
         (m, flip_al * l_a + flip_be * l_b, flip_al[..., None] * o_a + flip_be[..., None] * o_b)),
        ("the maximum is not updated: return m = max(m_a, m_b), not m_a",
         (m_a, right_l, right_o)),
        ("the maximum is not updated: l and o are rescaled to m_a instead of max(m_a, m_b)",
         (m_a, l_a + keep_a * l_b, o_a + keep_a[..., None] * o_b)),
        ("the maximum is not updated: return m = max(m_a, m_b), not m_b",
         (m_b, right_l, right_o)),
        ("the minimum was taken: m is the larger of the two maxima",
         (np.minimum(m_a, m_b), right_l, right_o)),
        ("one maximum for all the rows: each query (row) has its own "
         "maximum; take np.maximum(m_a, m_b), elementwise, not max(...)",
         (g, g_al * l_a + g_be * l_b,
          g_al[..., None] * o_a + g_be[..., None] * o_b)),
        ("l and o are rescaled to one maximum for all the rows: each query "
         "(row) has its own maximum, np.maximum(m_a, m_b), elementwise",
         (m, g_al * l_a + g_be * l_b,
          g_al[..., None] * o_a + g_be[..., None] * o_b)),
        ("o is divided by l already: keep o unnormalised until every block is merged "
         "(divide once, at the very end)",
         (m, right_l, right_o / right_l[..., None])),
    ]


def _as_state(result):
    """(m, l, o) as arrays, or a reason why the result is not such a triple."""
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        kind = type(result).__name__
        size = f" of length {len(result)}" if isinstance(result, (tuple, list)) else ""
        return None, f"return a tuple (m, l, o); your function returned a {kind}{size}"
    parts = []
    for name, part in zip(_PARTS, result):
        try:
            parts.append(np.asarray(part, dtype=float))
        except (TypeError, ValueError):
            return None, f"{name} is not an array of numbers (got {type(part).__name__})"
    return parts, None


def _call_merge(fn, case):
    """Call ``fn(a, b)`` on copies of the case's states; its (m, l, o) by name."""
    a, b = (tuple(np.array(t, copy=True) for t in s) for s in case.args)
    parts, problem = _as_state(fn(a, b))
    if problem:
        raise BadResult(problem)
    return dict(zip(_PARTS, parts))


def _merge_mistakes(case):
    return [Mistake.result(hint, wrong) for hint, wrong in merge_state_mistakes(*case.args)
            if not any(np.isnan(w).any() for w in wrong)]


def _nan_rule(fn, call, cases, index, rtol, atol, want_bool):
    """nan where the merged maximum is -inf: exp(-inf - (-inf))."""
    case = cases[index]
    try:
        parts = call(fn, case)
    except Exception:
        return None
    if any(np.isnan(p).any() for p in parts.values()) and np.isneginf(
            case.expected[_PARTS[0]]).any():
        return ("exp(-inf - (-inf)) is nan; where the merged maximum is -inf, "
                "use 0 in its place in the exponents")
    return None


def _broadcast_error(exc, case):
    if "broadcast" in str(exc):
        return ("m and l have shape (..., Nq) and o has shape (..., Nq, dv): give "
                "a factor a last axis before it multiplies o, alpha[..., None] "
                "(with [:, None] the new axis lands in the wrong place when "
                "there is a batch axis)")
    return None


def check_merge_states(fn: Callable) -> Verdict:
    """Check a learner's ``merge(a, b)``: a and b are ``(m, l, o)``; return the
    merged ``(m, l, o)``, with ``o`` still unnormalised."""
    return run_cases(fn, merge_states_cases(), "check_merge_states", call=_call_merge,
                     mistakes=_merge_mistakes, rules=[_nan_rule],
                     on_error=_broadcast_error)


# --- counting the work of attention ---------------------------------------

def attention_flops_reference(B, H, N, d, causal=False):
    """FLOPs of the two matrix products of attention, QK^T and PV (d_v = d):
    2 B H N^2 d each. With ``causal=True`` only the N(N+1)/2 allowed
    (query, key) pairs of each head are counted."""
    pairs = N * (N + 1) // 2 if causal else N * N
    return 4 * B * H * pairs * d


_FLOP_CASES = [(1, 1, 4, 3, False), (3, 5, 5, 4, False), (1, 1, 4, 3, True),
               (2, 8, 16, 8, True), (1, 2, 1, 3, True), (4, 16, 1024, 64, False)]


def attention_flops_mistakes(B, H, N, d, causal):
    pairs = N * (N + 1) // 2 if causal else N * N
    return [
        ("half the answer: count both products (Q K^T and P V), and count a "
         "multiply-add as two operations: each product costs 2 B H N^2 d",
         2 * B * H * pairs * d),
        ("a quarter of the answer: count both products (Q K^T and P V), "
         "and a multiply-add as two operations (a multiply and an add)",
         B * H * pairs * d),
        ("twice the answer: each of the two products costs 2 B H N^2 d, "
         "so 4 B H N^2 d in all",
         8 * B * H * pairs * d),
        ("the width d is missing: each (query, key) pair costs a dot "
         "product of length d in Q K^T, and d multiply-adds in P V",
         4 * B * H * pairs),
        ("the batch B is missing", 4 * H * pairs * d),
        ("the heads H are missing", 4 * B * pairs * d),
        ("with a causal mask, query i sees i + 1 keys: N(N+1)/2 pairs per "
         "head, not N^2", 4 * B * H * N * N * d),
        ("with a causal mask the pairs are N(N+1)/2 (the diagonal counts), "
         "not N^2 / 2", 4 * B * H * N * N * d / 2),
        ("with a causal mask the pairs are N(N+1)/2 (the diagonal counts), "
         "not N(N-1)/2", 4 * B * H * N * (N - 1) // 2 * d),
    ]


def _call_flops(fn, case):
    got = fn(*case.args[:4], causal=case.args[4])
    try:
        if isinstance(got, (str, bytes)):
            raise TypeError(type(got).__name__)
        return {"output": float(got)}
    except (TypeError, ValueError):
        raise BadResult("return one number; your function returned a "
                        f"{type(got).__name__}") from None


def _causal_keyword_error(exc, case):
    if isinstance(exc, TypeError) and "causal" in str(exc):
        return "the checker calls flops(B, H, N, d, causal=...): name the last parameter causal"
    return None


def check_attention_flops(fn: Callable) -> Verdict:
    """Check a learner's ``attention_flops(B, H, N, d, causal=False)``."""
    cases = [Case("B, H, N, d = {}, {}, {}, {}, causal={}".format(*args), args,
                  float(attention_flops_reference(*args))) for args in _FLOP_CASES]
    return run_cases(fn, cases, "check_attention_flops", rtol=0, atol=0.5,
                     call=_call_flops, on_error=_causal_keyword_error,
                     mistakes=lambda case: [Mistake.result(hint, wrong) for hint, wrong
                                            in attention_flops_mistakes(*case.args)])


__all__ += ["attention_flops_reference", "check_attention_flops"]
