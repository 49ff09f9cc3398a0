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
from ..checking import BadResult, Case, Mistake, Verdict, parts_of, run_cases
from ._rules import order_rule

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
    """Wrong counts, each with its hint. The checker's first two cases have no
    mask, so a count that is off only on a causal case is off in its causal
    branch: there, twice the answer is N(N+1) pairs, not a product counted
    twice (the two give the same number)."""
    pairs = N * (N + 1) // 2 if causal else N * N
    per_pair = ("each of the two products costs 2 B H d per (query, key) pair: "
                + ("2 B H d N(N+1)/2 with a causal mask" if causal else "2 B H N^2 d"))
    if causal:
        twice = ("with a causal mask the pairs are N(N+1)/2 per head, not N(N+1): "
                 "query i sees i + 1 keys, and the sum of i + 1 over N queries is "
                 "N(N+1)/2", 8 * B * H * pairs * d)
    else:
        twice = ("twice the answer: " + per_pair + ", so 4 B H N^2 d in all",
                 8 * B * H * pairs * d)
    causal_only = [
        ("with a causal mask, query i sees i + 1 keys: N(N+1)/2 pairs per "
         "head, not N^2", 4 * B * H * N * N * d),
        ("with a causal mask the pairs are N(N+1)/2 (the diagonal counts), "
         "not N^2 / 2", 4 * B * H * N * N * d / 2),
        ("with a causal mask the pairs are N(N+1)/2 (the diagonal counts), "
         "not N(N-1)/2", 4 * B * H * N * (N - 1) // 2 * d),
    ] if causal else []  # without a mask these hints would name a mask that is not there
    return [
        ("half the answer: count both products (Q K^T and P V), and count a "
         "multiply-add as two operations: " + per_pair,
         2 * B * H * pairs * d),
        ("a quarter of the answer: count both products (Q K^T and P V), "
         "and a multiply-add as two operations (a multiply and an add)",
         B * H * pairs * d),
        twice,
        ("the width d is missing: each (query, key) pair costs a dot "
         "product of length d in Q K^T, and d multiply-adds in P V",
         4 * B * H * pairs),
        ("the batch B is missing", 4 * H * pairs * d),
        ("the heads H are missing", 4 * B * pairs * d),
    ] + causal_only


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


# --- counting the tiles a causal tiled version computes (page 17b) ----------

def causal_tiles_reference(n_q, n_k, block_q, block_k):
    """How many (block_q, block_k) tiles a causal tiled attention computes:
    for each query block, the key blocks that start at or before the
    position of its last query (bottom-right: query i sits at n_k - n_q + i);
    none when that position is negative."""
    total = 0
    for i0 in range(0, n_q, block_q):
        last = n_k - n_q + min(i0 + block_q, n_q) - 1
        if last >= 0:
            total += min(last // block_k + 1, -(-n_k // block_k))
    return total


# Chosen (by a search over small sizes) so that where each wrong count of
# causal_tiles_mistakes first fails, no other wrong count gives the same number.
_TILE_CASES = [(8, 8, 4, 4), (9, 5, 2, 4), (9, 9, 4, 5), (4, 9, 3, 7), (13, 9, 4, 5),
               (13, 3, 2, 2)]


def causal_tiles_mistakes(n_q, n_k, block_q, block_k):
    """Wrong counts a learner plausibly writes, each with its hint."""
    t_r, t_c = -(-n_q // block_q), -(-n_k // block_k)

    def count(last_of, stop=lambda j0, last: j0 > last, blocks=t_r, guard=True):
        total = 0
        for b in range(blocks):
            i0 = b * block_q
            last = last_of(i0)
            if guard and last < 0:
                continue
            total += sum(1 for j0 in range(0, n_k, block_k) if not stop(j0, last)) \
                if guard else last // block_k + 1
        return total

    bottom_right = lambda i0: n_k - n_q + min(i0 + block_q, n_q) - 1  # noqa: E731
    right = causal_tiles_reference(n_q, n_k, block_q, block_k)
    return [
        ("T(T+1)/2 holds only for N_q = N_k cut into equal tiles that divide N; "
         "count, for each query block, the key blocks that start at or before "
         "its last query's position", t_r * (t_r + 1) // 2),
        ("that is every tile, T_r * T_c: the causal version skips the key blocks "
         "that start after a query block's last position", t_r * t_c),
        ("that is the number of tiles skipped; the question asks for the tiles "
         "computed", t_r * t_c - right),
        ("the causal mask is bottom-right: query i sits at position N_k - N_q + i, "
         "not i (it matters when N_q and N_k differ)",
         count(lambda i0: min(i0 + block_q, n_q) - 1)),
        ("a key block that starts exactly at the last query's position is still "
         "needed: skip only blocks that start after it (j0 > last, not j0 >= last)",
         count(bottom_right, stop=lambda j0, last: j0 >= last)),
        ("the stop depends on the block's last query, not its first: a key block "
         "that starts after the first query can still be seen by the later ones",
         count(lambda i0: n_k - n_q + i0)),
        ("the number of blocks rounds up: a last, shorter block still counts "
         "(ceil(N / B), or -(-N // B), not N // B)",
         count(bottom_right, blocks=n_q // block_q)),
        ("a query block whose last position is negative (more queries than keys) "
         "computes no tile: last // block_k + 1 is then 0 or negative",
         count(bottom_right, guard=False)),
    ]


def _call_tiles(fn, case):
    got = fn(*case.args)
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, np.integer, float,
                                                                  np.floating)):
        raise BadResult("return one whole number (a count of tiles); your function "
                        f"returned a {type(got).__name__}")
    return {"output": float(got)}


def check_causal_tiles(fn: Callable) -> Verdict:
    """Check a learner's ``causal_tiles(n_q, n_k, block_q, block_k)``."""
    cases = [Case("N_q, N_k = {}, {}; blocks of {} queries and {} keys".format(*args),
                  args, float(causal_tiles_reference(*args))) for args in _TILE_CASES]
    return run_cases(fn, cases, "check_causal_tiles", rtol=0, atol=0.25, call=_call_tiles,
                     mistakes=lambda case: [Mistake.result(hint, float(wrong)) for hint, wrong
                                            in causal_tiles_mistakes(*case.args)])


# --- FlashAttention's backward pass (page 17c) ------------------------------

_GRADS = ("dq", "dk", "dv")


def flash_backward_rows(q, k, v, o, lse, d_out, block_q, block_k, causal=False, *,
                        no_d=False, weights="lse", scale=None, stop="last",
                        guard=True):
    """The backward pass of one head with the query blocks outside, as the
    exercise asks; the keyword arguments switch on one mistake each (the
    checker's wrong answers). Not the answer key: see
    :func:`attnbook.reference.flash_attention_backward`."""
    n_q, d = q.shape
    n_k = len(k)
    g_scale = 1 / np.sqrt(d) if scale is None else scale
    D = (d_out * o).sum(axis=1)  # (Nq,)
    lse = np.where(np.isneginf(lse), 0.0, lse) if guard else lse
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for i in range(0, n_q, block_q):
        i1 = min(i + block_q, n_q)
        pos = (n_k - n_q if stop != "top-left" else 0) + np.arange(i, i1)
        for j in range(0, n_k, block_k):
            j1 = min(j + block_k, n_k)
            if causal and (j > pos[-1] or (stop == "first" and j > pos[0])
                           or (stop == "whole" and j > 0 and j1 - 1 > pos[-1])):
                break
            s = q[i:i1] @ k[j:j1].T / np.sqrt(d)  # (Bq, Bk)
            if causal:
                s = np.where(np.arange(j, j1) <= pos[:, None], s, -np.inf)
            if weights == "lse":
                p = np.exp(s - lse[i:i1, None])
            elif weights == "raw":
                p = np.exp(s)
            else:  # the tile's own row maximum
                m = s.max(axis=1, keepdims=True)
                p = np.exp(s - np.where(np.isneginf(m), 0.0, m))
            dv[j:j1] += p.T @ d_out[i:i1]
            dp = d_out[i:i1] @ v[j:j1].T  # (Bq, Bk)
            ds = p * dp if no_d else p * (dp - D[i:i1, None])
            dq[i:i1] += ds @ k[j:j1] * g_scale
            dk[j:j1] += ds.T @ q[i:i1] * g_scale
    return dq, dk, dv


def flash_backward_cases() -> list[Case]:
    rng = np.random.default_rng(1717)
    specs = [
        ("10 queries, 13 keys, d = 4, dv = 3, blocks of 4 queries and 5 keys",
         10, 13, 4, 5, False, 1.0),
        ("causal, 10 queries and keys, blocks 2 x 4 (a key block crosses the "
         "diagonal)", 10, 10, 2, 4, True, 1.0),
        ("causal, 12 queries and keys, blocks 4 x 2", 12, 12, 4, 2, True, 1.0),
        ("causal, a chunk: 6 queries at positions 7-12, 13 keys, blocks 4 x 5",
         6, 13, 4, 5, True, 1.0),
        ("causal, 7 queries and 4 keys: queries 0-2 see no key (lse = -inf), "
         "blocks 4 x 2", 7, 4, 4, 2, True, 1.0),
        ("scores in the tens (q times 8): exp of a raw score is huge", 6, 6, 4, 4,
         False, 8.0),
    ]
    cases = []
    for label, n_q, n_k, b_q, b_k, causal, size in specs:
        q = rng.normal(size=(n_q, 4)) * size
        k, v = rng.normal(size=(n_k, 4)), rng.normal(size=(n_k, 3))
        d_out = rng.normal(size=(n_q, 3))
        o, lse = ref.flash_attention(q, k, v, causal=causal, return_lse=True)
        want = ref.flash_attention_backward(q, k, v, o, lse, d_out, causal=causal,
                                            block_q=b_q, block_k=b_k)
        cases.append(Case(label, (q, k, v, o, lse, d_out, b_q, b_k),
                          dict(zip(_GRADS, want)), kwargs={"causal": causal}))
    return cases


_BACKWARD_MISTAKES = [
    ("D is missing: dS = P * (dP - D), with D = rowsum(dO * O), the softmax's "
     "row sum; without it the gradient of every row's weights is wrong",
     dict(no_d=True)),
    ("the weights are not normalised: P = exp(s - lse), with the log-sum-exp "
     "of the whole row; exp(s) alone is off by the row's sum",
     dict(weights="raw")),
    ("the weights are exp(s - lse), normalised over the whole row; exp(s - the "
     "tile's own maximum) is normalised over nothing", dict(weights="tile")),
    ("the scale is missing in dq and dk: the scores were divided by sqrt(d), so "
     "dq = dS K / sqrt(d) and dk = dS^T Q / sqrt(d)", dict(scale=1.0)),
    ("dq and dk are divided by d: the scale is 1 / sqrt(d)", dict(scale=0.25)),
    ("the causal stop is one block early: a key block is wholly in the future "
     "only when it starts after the block's LAST query position, "
     "N_k - N_q + i1 - 1, not its first", dict(stop="first")),
    ("a key block that crosses the diagonal is still needed: stop only at a "
     "block that starts after the last query's position (not one that ends "
     "after it)", dict(stop="whole")),
    ("the causal mask is bottom-right: query i sits at position N_k - N_q + i, "
     "not i (it matters when N_q and N_k differ)", dict(stop="top-left")),
]


def _backward_mistakes(case):
    q, k, v, o, lse, d_out, b_q, b_k = case.args
    found = []
    for hint, switch in _BACKWARD_MISTAKES:
        wrong = flash_backward_rows(q, k, v, o, lse, d_out, b_q, b_k,
                                    case.kwargs["causal"], **switch)
        found.append(Mistake.result(hint, dict(zip(_GRADS, wrong))))
    return found


def _call_flash_backward(fn, case):
    args = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in case.args]
    result = fn(*args, **case.kwargs)
    if isinstance(result, dict):  # a Mistake.result's value
        return result
    return parts_of(result, _GRADS, order=("dv", "dq", "dk"))


def _backward_nan_rule(fn, call, cases, index, rtol, atol, want_bool):
    case = cases[index]
    try:
        parts = call(fn, case)
    except Exception:
        return None
    if any(np.isnan(np.asarray(p, dtype=float)).any() for p in parts.values()) \
            and np.isneginf(case.args[4]).any():
        return ("a query that sees no key has lse = -inf, and exp(-inf - (-inf)) "
                "is nan: use 0 in place of its lse (all its scores are -inf, so "
                "its weights are then 0)")
    return None


_backward_order_rule = order_rule(
    _GRADS, "the gradients are right but in another order: return (dq, dk, dv)")


def check_flash_backward(fn: Callable) -> Verdict:
    """Check a learner's ``flash_backward_rows(q, k, v, o, lse, d_out, block_q,
    block_k, causal=False)`` for one head: ``(dq, dk, dv)``."""
    cases = flash_backward_cases()
    return run_cases(fn, cases, "check_flash_backward", call=_call_flash_backward,
                     mistakes=_backward_mistakes,
                     rules=[_backward_nan_rule, _backward_order_rule],
                     passed=f"check_flash_backward: dq, dk and dv right in all "
                            f"{len(cases)} cases.")


__all__ += ["causal_tiles_mistakes", "check_causal_tiles", "flash_backward_cases",
            "check_flash_backward"]
