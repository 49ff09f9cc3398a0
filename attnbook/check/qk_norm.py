"""Checkers of chapter 20: QK-norm, soft-capping, the output gate.

Chapters import them from :mod:`attnbook.check`.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["check_soft_cap", "check_qk_norm_queries", "check_gated_output",
           "soft_cap_cases", "qk_norm_queries_cases", "gated_output_cases"]

EPS = 1e-6


# --- soft-capping -----------------------------------------------------------

def soft_cap_cases() -> list[Case]:
    """Scores on both sides of the cap, a batch of scores, a small cap."""
    rng = np.random.default_rng(20)
    cases = []
    for label, s, cap in [
        ("eight scores, cap 50 (Gemma 2's attn_logit_softcapping)",
         np.array([-120.0, -30.0, -2.0, 0.0, 0.5, 3.0, 45.0, 200.0]), 50.0),
        ("a (2, 3, 4) batch of scores, cap 5", 8 * rng.normal(size=(2, 3, 4)), 5.0),
        ("small scores, cap 1.5", rng.normal(size=(3, 3)), 1.5),
    ]:
        cases.append(Case(label, (s, cap), ref.soft_cap(s, cap)))
    return cases


_SOFT_CAP_MISTAKES = [
    Mistake("this is a hard clip, np.clip(s, -c, c): it is flat beyond c, so "
            "no gradient reaches a capped score. Soft-capping is c * tanh(s / c)",
            lambda s, c: np.clip(s, -c, c)),
    Mistake("c * tanh(s) without the division: tanh saturates at |s| of about "
            "3 whatever c is. Divide first: c * tanh(s / c)",
            lambda s, c: c * np.tanh(s)),
    Mistake("tanh(s / c) is in (-1, 1): multiply by c to bring it back to the "
            "scores' scale, c * tanh(s / c)", lambda s, c: np.tanh(s / c)),
    Mistake("c * tanh(s * c) multiplies by c inside: divide, c * tanh(s / c)",
            lambda s, c: c * np.tanh(s * c)),
]


def check_soft_cap(fn: Callable) -> Verdict:
    """Check ``fn(s, cap)``: ``cap * tanh(s / cap)``, elementwise, any shape."""
    return run_cases(fn, soft_cap_cases(), "check_soft_cap",
                     mistakes=_SOFT_CAP_MISTAKES)


# --- QK-norm on the queries ---------------------------------------------------

def _rms(t, axis=-1, eps="inside"):
    ms = np.mean(t * t, axis=axis, keepdims=True)
    if eps == "left out":
        return t / np.sqrt(ms)
    if eps == "outside":
        return t / (np.sqrt(ms) + EPS)
    if eps == "1e-5":
        return t / np.sqrt(ms + 1e-5)
    if eps == "l2":
        return t / np.sqrt(np.sum(t * t, axis=axis, keepdims=True))
    if eps == "layernorm":
        c = t - t.mean(axis=axis, keepdims=True)
        return c / np.sqrt(np.mean(c * c, axis=axis, keepdims=True) + EPS)
    return t / np.sqrt(ms + EPS)


def _queries(x, w_q, g, n_heads, positions, order="norm-rope", span="head",
             eps="inside"):
    q = x @ w_q                                       # (..., N, H * hd)
    if span == "projection":
        q = _rms(q) * np.tile(g, n_heads)
    q = ref.split_heads(q, n_heads)                   # (..., H, N, hd)
    if span == "head" and order != "rope-norm":
        q = _rms(q, eps=eps) * g
    elif span == "positions":
        q = _rms(q, axis=-2) * g
    elif span == "no weight":
        q = _rms(q)
    if order == "no rope":
        return q
    q = ref.rope(q, positions)
    if order == "rope-norm":
        q = _rms(q) * g
    return q


def qk_norm_queries_cases() -> list[Case]:
    """One sequence; a batch with positions that do not start at 0; four
    heads; tiny inputs. Norm weights far from 1, so that the order norm / RoPE
    shows. In the last case a head's mean square is about 1e-6, as large as
    eps, so an epsilon left out (or added outside the root) changes the
    queries by about a third, far beyond the tolerance; with inputs of order
    1 it would change them by less than 1e-6 and pass unseen."""
    rng = np.random.default_rng(21)
    cases = []
    for label, lead, n, d, h, hd, start, size in [
        ("one sequence: N = 5, D = 8, 2 heads of hd = 4", (), 5, 8, 2, 4, 0, 1.0),
        ("a batch of 2, N = 4, positions 3 .. 6, 2 heads of hd = 6",
         (2,), 4, 10, 2, 6, 3, 1.0),
        ("N = 3, D = 12, 4 heads of hd = 2", (), 3, 12, 4, 2, 0, 1.0),
        ("tiny inputs (x of order 3e-4, a head's mean square near eps = "
         "1e-6): N = 4, D = 6, 2 heads of hd = 4", (), 4, 6, 2, 4, 0, 3e-4),
    ]:
        x = size * rng.normal(size=(*lead, n, d))
        w_q = rng.normal(size=(d, h * hd))
        g = rng.uniform(0.2, 3.0, size=hd)
        pos = np.arange(start, start + n)
        args = (x, w_q, g, h, pos)
        cases.append(Case(label, args, _queries(*args)))
    return cases


_QK_NORM_MISTAKES = [
    Mistake("the norm comes after RoPE here: Qwen3 normalises q (and k) "
            "first, then rotates. With a norm weight of 1 the order would not "
            "matter (a rotation keeps the RMS); with a learned weight it does",
            lambda *a: _queries(*a, order="rope-norm")),
    Mistake("this is one norm over the whole projection (H * hd entries, "
            "OLMo 2's QK-norm). Qwen3 normalises each head on its own: split "
            "the heads first, then RMSNorm over the last axis, hd",
            lambda *a: _queries(*a, span="projection")),
    Mistake("the mean of the squares runs over the positions (axis -2): "
            "RMSNorm normalises each query vector, over its hd entries "
            "(axis -1)", lambda *a: _queries(*a, span="positions")),
    Mistake("the norm's weight is missing: multiply the normalised heads by "
            "q_norm (one weight per entry of a head)",
            lambda *a: _queries(*a, span="no weight")),
    Mistake("eps is missing: RMSNorm divides by sqrt(mean(q ** 2) + eps), "
            "eps = 1e-6. Inputs this small have a mean square near eps, and "
            "there it changes the result (it also keeps a zero vector from "
            "giving 0 / 0)", lambda *a: _queries(*a, eps="left out")),
    Mistake("eps was added outside the square root, sqrt(mean(q ** 2)) + eps: "
            "RMSNorm (Qwen3's, transformers') adds it inside, "
            "sqrt(mean(q ** 2) + eps)", lambda *a: _queries(*a, eps="outside")),
    Mistake("eps = 1e-5 (Llama's rms_norm_eps): Qwen3's is 1e-6, as the "
            "exercise says", lambda *a: _queries(*a, eps="1e-5")),
    Mistake("each head was divided by its length (an L2 norm), not by its "
            "root MEAN square: the two differ by sqrt(hd). Use "
            "sqrt(mean(q ** 2) + eps)", lambda *a: _queries(*a, eps="l2")),
    Mistake("the mean was subtracted first: that is LayerNorm. RMSNorm only "
            "divides by the root mean square, q / sqrt(mean(q ** 2) + eps)",
            lambda *a: _queries(*a, eps="layernorm")),
    Mistake("the queries are not normalised at all (only rotated)",
            lambda *a: _queries(*a, span="none")),
    Mistake("RoPE is missing: rotate the normalised queries by their "
            "positions", lambda *a: _queries(*a, order="no rope")),
]


def check_qk_norm_queries(fn: Callable) -> Verdict:
    """Check ``fn(x, w_q, q_norm, n_heads, positions)``: Qwen3's queries,
    ``rope(rms_norm(split_heads(x @ w_q), q_norm), positions)``, shape
    (..., H, N, hd), RMSNorm with eps = 1e-6."""
    return run_cases(fn, qk_norm_queries_cases(), "check_qk_norm_queries",
                     rtol=1e-5, atol=1e-8, mistakes=_QK_NORM_MISTAKES)


# --- the output gate ------------------------------------------------------------

def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _gate_per_head(qg, h):
    return ref.split_query_gate(qg, h)[1]


def gated_output_cases() -> list[Case]:
    """Two heads with D = H * hd (so that a gate after o_proj runs), a batch,
    three heads with D != H * hd."""
    rng = np.random.default_rng(22)
    cases = []
    for label, lead, n, h, hd, d in [
        ("N = 3, 2 heads of hd = 3, D = 6", (), 3, 2, 3, 6),
        ("a batch of 2, N = 4, 2 heads of hd = 2, D = 4", (2,), 4, 2, 2, 4),
        ("N = 2, 3 heads of hd = 2, D = 5", (), 2, 3, 2, 5),
    ]:
        o = rng.normal(size=(*lead, n, h * hd))
        qg = 2 * rng.normal(size=(*lead, n, h * 2 * hd))
        w_o = rng.normal(size=(h * hd, d))
        args = (o, qg, w_o, h)
        expected = ref.gated_attention_output(o, _gate_per_head(qg, h), w_o)
        cases.append(Case(label, args, expected))
    return cases


def _half(qg, h):
    return qg[..., qg.shape[-1] // 2:]


_GATE_MISTAKES = [
    Mistake("the gate acts after o_proj here: Qwen3-Next multiplies the heads' "
            "output by sigmoid(gate) first, then applies o_proj",
            lambda o, qg, w, h: _sigmoid(_gate_per_head(qg, h)) * (o @ w)),
    Mistake("the gate is the second half of the whole q_proj output: q_proj "
            "holds, head after head, hd query columns then hd gate columns; "
            "view it as (..., N, H, 2 * hd) and take [..., hd:] of each head",
            lambda o, qg, w, h: (o * _sigmoid(_half(qg, h))) @ w),
    Mistake("that is the query half of each head: the gate is the second half, "
            "[..., hd:] of each head's 2 * hd columns",
            lambda o, qg, w, h: (o * _sigmoid(ref.split_query_gate(qg, h)[0])) @ w),
    Mistake("the gate's logits multiply the output without the sigmoid",
            lambda o, qg, w, h: (o * _gate_per_head(qg, h)) @ w),
    Mistake("1 - sigmoid(gate): the gate passes sigmoid(gate) of the output",
            lambda o, qg, w, h: (o * (1 - _sigmoid(_gate_per_head(qg, h)))) @ w),
    Mistake("o_proj is missing: return (o * sigmoid(gate)) @ w_o",
            lambda o, qg, w, h: o * _sigmoid(_gate_per_head(qg, h))),
]


def check_gated_output(fn: Callable) -> Verdict:
    """Check ``fn(o, qg, w_o, n_heads)``: the gated output of Qwen3-Next's
    attention, ``(o * sigmoid(gate)) @ w_o``, with the gate the second half
    of each head's 2 * hd columns of ``qg`` (q_proj's output); shape (..., N, D)."""
    return run_cases(fn, gated_output_cases(), "check_gated_output",
                     mistakes=_GATE_MISTAKES)
