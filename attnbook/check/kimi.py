"""Checker of chapter 22c (Part VIII): one step of Kimi Delta Attention, the
gated delta rule with one decay per key channel."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases
from .linear import _call, _read, delta_inputs

__all__ = ["kimi_step_cases", "kimi_step_mistakes", "check_kimi_delta_step"]



def _answer(state, q, k, v, g, beta):
    """One step through the answer key: the recurrence over a sequence of 1."""
    o, s = ref.kimi_delta_rule(q[..., None, :], k[..., None, :], v[..., None, :],
                               g[..., None, :], beta[..., None], initial_state=state)
    return o[..., 0, :], s


def kimi_step_cases() -> list[Case]:
    """The channels of g always differ (so one decay per token is caught);
    d_k = d_v in the first case only (so a decay on the value axis runs
    there, and names itself)."""
    rng = np.random.default_rng(33)
    out = []
    for label, lead, d_k, d_v in [
        ("one head, d_k = d_v = 3", (), 3, 3),
        ("one head, d_k = 4, d_v = 2", (), 4, 2),
        ("3 heads at once (a leading axis), d_k = 2, d_v = 5", (3,), 2, 5),
        ("one head, a zero state (the first token), d_k = 3, d_v = 2", (), 3, 2),
    ]:
        state, q, k, v = delta_inputs(rng, lead, d_k, d_v, zero_state="zero state" in label)
        g = np.round(-rng.uniform(0.05, 2.0, size=lead + (d_k,)), 2)   # per channel
        beta = np.round(rng.uniform(0.3, 0.9, size=lead), 2)
        o, s = _answer(state, q, k, v, g, beta)
        out.append(Case(label, (state, q, k, v, g, beta), {"state": s, "output": o}))
    return out


def _read_t(s, x):
    return np.einsum("...kv,...v->...k", s, x)          # S x: needs d_k = d_v


def _step(state, q, k, v, g, beta, *, decay="rows", forget="before", predict="decayed",
          read="new", scale=True, exp=np.exp, correct=True, beta_on=True,
          read_t=False, write_t=False, scale_by="d_k"):
    g = np.asarray(g, float)
    if decay == "rows":
        d = exp(g)[..., :, None]                        # channel i scales row i
    elif decay == "scalar gate":                        # chapter 22's broadcast
        d = exp(g)[..., None, None]
    elif decay == "sum":                                # one number: the sum
        d = exp(g.sum(-1))[..., None, None]
    elif decay == "columns":
        d = exp(g)[..., None, :]                        # broadcast on the value axis
    else:                                               # "token": one number
        d = exp(g.mean(-1))[..., None, None]
    s = d * state if forget == "before" else state
    read_ = _read_t if read_t else _read
    b = beta[..., None] if beta_on else 1.0
    if correct:
        pred = read_(s if predict == "decayed" else state, k)
        delta = b * (v - pred)
    else:
        delta = b * v
    if write_t:                                         # written v k^T
        new = s + delta[..., :, None] * k[..., None, :]
    else:
        new = s + k[..., :, None] * delta[..., None, :]
    if forget == "after":
        new = d * new
    o = read_({"new": new, "decayed": s}[read], q)
    width = q.shape[-1] if scale_by == "d_k" else v.shape[-1]
    return o / np.sqrt(width) if scale else o, new


def kimi_step_mistakes() -> list[Mistake]:
    """The wrong answers a learner plausibly writes, with the hint that names each."""
    def wrong(**switch):
        return lambda *args: _step(*args, **switch)

    return [
        Mistake("the whole state was decayed by ONE number per token (the "
                "mean of g, as Gated DeltaNet would): KDA decays key channel i, "
                "row i of S (d_k, d_v), by exp(g[i]): exp(g)[..., :, None] * S.",
                wrong(decay="token")),
        Mistake("g was broadcast as chapter 22's gate, exp(g)[..., None, None]: "
                "with one g per key channel that makes a state of shape "
                "(..., d_k, d_k, d_v). Scale row i by exp(g[i]): "
                "exp(g)[..., :, None] * S.", wrong(decay="scalar gate")),
        Mistake("the whole state was decayed by a single number per token, "
                "exp of the SUM of g: KDA keeps the channels apart, row i "
                "times exp(g[i]).", wrong(decay="sum")),
        Mistake("exp(g) was applied along the VALUE axis (the columns of S): "
                "g has one entry per KEY channel, so it scales the rows: "
                "exp(g)[..., :, None] * S, not exp(g)[..., None, :] * S.",
                wrong(decay="columns")),
        Mistake("the state was decayed AFTER the update: decay first, "
                "S = diag(exp(g)) S, then predict S^T k and write the "
                "correction, which must not be decayed yet.", wrong(forget="after")),
        Mistake("the state was not decayed at all: multiply row i of S by "
                "exp(g[i]) before the update.", wrong(forget="never")),
        Mistake("the state was multiplied by g itself: g is the LOG of the "
                "decay; multiply by exp(g).", wrong(exp=lambda g: g)),
        Mistake("the prediction S^T k was read from the state before its "
                "decay: decay first, then predict from the decayed state.",
                wrong(predict="old")),
        Mistake("nothing was subtracted: the delta rule writes the correction "
                "beta (v - S^T k), what the decayed state got wrong about k.",
                wrong(correct=False)),
        Mistake("the output was read from the decayed state before this "
                "token's write: read o = S^T q from the new state.",
                wrong(read="decayed")),
        Mistake("the query was not scaled: o = S^T q / sqrt(d_k).", wrong(scale=False)),
        Mistake("the result came back as (new_state, output): return "
                "(output, new_state), the output first.",
                lambda *args: _step(*args)[::-1]),
        Mistake("the output was divided by sqrt(d_v): the scale is "
                "1/sqrt(d_k), the width of q and k (the two differ from the "
                "second case on).", wrong(scale_by="d_v")),
        Mistake("S was read the wrong way round, S x: S is (d_k, d_v), rows "
                "for key channels, so a read sums over the key axis, S^T x = "
                "einsum('...kv,...k->...v', S, x); S x only runs when "
                "d_k = d_v.", wrong(read_t=True)),
        Mistake("the write was v k^T: S is (d_k, d_v), so the write is the "
                "outer product k delta^T, k[..., :, None] * delta[..., None, "
                ":]; v k^T only fits when d_k = d_v.", wrong(write_t=True)),
        Mistake("beta was left out: the write is beta (v - S^T k), the "
                "correction scaled by this token's learning rate.",
                wrong(beta_on=False)),
        Mistake("the decay was exp(-g): g is already the log of the decay, "
                "negative, so exp(g) < 1 shrinks the state; exp(-g) > 1 would "
                "make it grow.", wrong(exp=lambda g: np.exp(-g))),
        Mistake("the decay was sigmoid(g): g is a log-decay, and the decay "
                "is exp(g).", wrong(exp=lambda g: 1 / (1 + np.exp(-g)))),
    ]


def check_kimi_delta_step(fn: Callable) -> Verdict:
    """Check ``kimi_delta_step(state, q, k, v, g, beta)``: state
    (..., d_k, d_v), q, k and g (..., d_k), v (..., d_v), beta (...,).
    Returns ``(output, new_state)``: (..., d_v) and (..., d_k, d_v)."""
    return run_cases(fn, kimi_step_cases(), "check_kimi_delta_step", call=_call,
                     mistakes=kimi_step_mistakes())
