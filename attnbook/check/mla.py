"""Checkers of the chapter on multi-head latent attention (MLA).

Chapters import them from :mod:`attnbook.check`.
"""

from __future__ import annotations

import functools

from typing import Callable

import numpy as np

from ..checking import Case, Mistake, Verdict, _copy_args, run_cases
from ._memory import MemoryCase, within_memory

__all__ = ["absorbed_scores_cases", "check_absorbed_scores"]


def _right(q_nope, q_rope, c_kv, k_rope, w_uk):
    q_lat = q_nope @ np.swapaxes(w_uk, -1, -2)  # (..., N, r_kv)
    d = q_nope.shape[-1] + q_rope.shape[-1]
    return (q_lat @ c_kv.T + q_rope @ k_rope.T) / np.sqrt(d)


def _wrong_forms(q_nope, q_rope, c_kv, k_rope, w_uk):
    """(hint, result) for the mistakes a learner plausibly makes."""
    q_lat = q_nope @ np.swapaxes(w_uk, -1, -2)
    nope, pos = q_lat @ c_kv.T, q_rope @ k_rope.T
    dn, dr, r = q_nope.shape[-1], q_rope.shape[-1], c_kv.shape[-1]
    out = [
        ("the RoPE part q_rope . k_rope is missing", nope / np.sqrt(dn + dr)),
        ("only the RoPE part: q_nope must meet the latent through W_uk",
         pos / np.sqrt(dn + dr)),
        ("the scores are not scaled: divide by sqrt(d_nope + d_rope)",
         nope + pos),
        ("scaled by sqrt(d_nope) only: the key head size is "
         "d_nope + d_rope", (nope + pos) / np.sqrt(dn)),
        ("scaled by sqrt(r_kv + d_rope), the width of the latent: the "
         "scale is that of the full head, d_nope + d_rope",
         (nope + pos) / np.sqrt(r + dr)),
        ("divided by d_nope + d_rope, not by its square root",
         (nope + pos) / (dn + dr)),
        ("scaled by sqrt(d_rope) only: the key head size is "
         "d_nope + d_rope", (nope + pos) / np.sqrt(dr)),
        ("scaled by sqrt(r_kv), the width of the latent: the scale is that "
         "of the full head, d_nope + d_rope", (nope + pos) / np.sqrt(r)),
        ("each part scaled by its own width: one score, one scale, "
         "sqrt(d_nope + d_rope), for the sum of both parts",
         nope / np.sqrt(dn) + pos / np.sqrt(dr)),
        ("only the latent part is scaled: divide the whole sum, "
         "RoPE part included, by sqrt(d_nope + d_rope)",
         nope / np.sqrt(dn + dr) + pos),
        ("these are softmax weights: return the scores, before any softmax",
         _softmax(_right(q_nope, q_rope, c_kv, k_rope, w_uk))),
    ]
    if w_uk.shape[-1] == w_uk.shape[-2]:
        q_bad = q_nope @ w_uk  # W_uk not transposed (possible when square)
        out.append(("W_uk is (r_kv, d_nope): q_nope meets it transposed, "
                    "q_nope @ W_uk.T",
                    (q_bad @ c_kv.T + pos) / np.sqrt(dn + dr)))
    return out


def _softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _head_axis_error(exc, case):
    """The error a 3-D ``w_uk.T`` raises in the heads case, named."""
    if isinstance(exc, ValueError) and np.ndim(case.args[-1]) >= 3 and "matmul" in str(exc):
        return ("with a head axis in front, w_uk.T reverses ALL the axes; "
                "np.swapaxes(w_uk, -1, -2) transposes the last two")
    return None


def _first(result):
    """The scores of a tuple ``(scores, ...)``; anything else as it is."""
    if isinstance(result, (tuple, list)) and result and not np.isscalar(result[0]):
        return result[0]
    return result


def _rebuild_message(h, n, t, dn, peak):
    return (f"your function held {peak / 2**20:.1f} MiB at once, while "
            f"rebuilding one head's keys from the latents (c_kv @ W_uk) "
            f"takes {t * dn * 8 / 2**20:.1f} MiB, all {h} heads' "
            f"{h * t * dn * 8 / 2**20:.0f} MiB, and the absorbed scores "
            f"{h * n * t * 8 / 2**20:.2f} MiB.\n"
            "hint: this is the naive form: it rebuilds the keys. Absorb "
            "W_uk into the query instead, q_nope @ W_uk^T (r_kv numbers "
            "per query and head), and score that against c_kv directly.")


def _rebuild_report(h, n, t, dn):
    """report(peak): the message; a partial, so a student kit can carry it as data."""
    return functools.partial(_rebuild_message, h, n, t, dn)


def absorbed_scores_cases() -> list[Case]:
    """Four cases of values, then one that also measures memory: decoding
    with 16 heads against 2048 cached latents, where d_nope = 256 is much
    wider than r_kv = 8, so that rebuilding even one head's keys (the naive
    form, which gives the same numbers) holds far more than the absorbed
    form needs."""
    rng = np.random.default_rng(14)
    cases = []
    for label, n, t, dn, dr, r, lead in [
        ("one head: 3 queries, 5 cached tokens, d_nope 6, d_rope 4, "
         "r_kv 8", 3, 5, 6, 4, 8, ()),
        ("a square W_uk (r_kv = d_nope = 6): a missing transpose shows",
         2, 4, 6, 2, 6, ()),
        ("one new query against 7 cached tokens (decoding)", 1, 7, 4, 2, 10,
         ()),
        ("4 heads at once: q_nope (4, 3, 6), W_uk (4, 8, 6), a shared "
         "cache", 3, 5, 6, 4, 8, (4,)),
        ("absorbed, not rebuilt: 16 heads, 1 query against 2048 cached "
         "latents, d_nope 256, r_kv 8 (the memory your function holds is "
         "measured)", 1, 2048, 256, 4, 8, (16,)),
    ]:
        args = (rng.normal(size=(*lead, n, dn)), rng.normal(size=(*lead, n, dr)),
                rng.normal(size=(t, r)), rng.normal(size=(t, dr)),
                rng.normal(size=(*lead, r, dn)))
        if t < 1000:
            cases.append(Case(label, args, _right(*args)))
        else:  # one head's rebuilt keys, (t, dn), is the limit
            cases.append(MemoryCase(label, args, _right(*args), limit=t * dn * 8,
                                    report=_rebuild_report(lead[0], n, t, dn)))
    return cases


def _call_first(fn, case):
    return {"output": _first(fn(*_copy_args(case.args), **case.kwargs))}


def check_absorbed_scores(fn: Callable) -> Verdict:
    """Check ``fn(q_nope, q_rope, c_kv, k_rope, w_uk)``: the scaled scores of
    absorbed MLA, ``((q_nope W_uk^T) c_kv^T + q_rope k_rope^T) /
    sqrt(d_nope + d_rope)``, shape (..., N, T). A tuple ``(scores, ...)``
    is accepted too (its first element is checked). The last case also
    measures the memory the function holds: the naive form, which rebuilds
    the keys, gives the same numbers."""
    return run_cases(fn, absorbed_scores_cases(), "check_absorbed_scores",
                     call=within_memory(_call_first),
                     mistakes=lambda case: [Mistake.result(hint, value)
                                            for hint, value in _wrong_forms(*case.args)],
                     on_error=_head_axis_error)
