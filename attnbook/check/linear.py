"""Checkers of chapter 22 (Part VIII): one step of the gated delta rule
(Gated DeltaNet)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, _copy_args, _unchanged, parts_of, run_cases

__all__ = ["delta_step_cases", "delta_step_mistakes", "check_delta_rule_step"]

_PARTS = ("output", "state")


def delta_step_cases() -> list[Case]:
    """d_k and d_v differ from the second case on; g, beta and the state are
    never trivial except where a label says so."""
    rng = np.random.default_rng(22)
    out = []
    for label, lead, d_k, d_v, g in [
        ("one head, d_k = d_v = 3", (), 3, 3, -0.4),
        ("one head, d_k = 4, d_v = 2", (), 4, 2, -1.2),
        ("3 heads at once (a leading axis), d_k = 2, d_v = 5, a g per head",
         (3,), 2, 5, None),
        ("one head, g = 0 (nothing forgotten), d_k = 3, d_v = 2", (), 3, 2, 0.0),
        ("one head, a zero state (the first token), d_k = 2, d_v = 3",
         (), 2, 3, -0.7),
    ]:
        state = rng.normal(size=lead + (d_k, d_v))
        if "zero state" in label:
            state = np.zeros_like(state)
        q, k = rng.normal(size=(2,) + lead + (d_k,))
        k = k / np.linalg.norm(k, axis=-1, keepdims=True)
        v = rng.normal(size=lead + (d_v,))
        g_ = np.round(-rng.uniform(0.2, 1.5, size=lead), 2) if g is None else np.float64(g)
        beta = np.round(rng.uniform(0.3, 0.9, size=lead), 2)
        o, s = ref.delta_rule_step(state, q, k, v, g_, beta)
        out.append(Case(label, (state, q, k, v, g_, beta), {"state": s, "output": o}))
    return out


def _call(fn, case):
    args = _copy_args(case.args)
    result = fn(*args, **case.kwargs)
    _unchanged(args, case.args)
    return parts_of(result, _PARTS, order=("state", "output"))


def _read(s, x):
    return np.einsum("...kv,...k->...v", s, x)          # S^T x: (..., d_v)


def _step(state, q, k, v, g, beta, *, forget="before", decay=np.exp,
          delta="right", read="new", scale=True):
    g = np.asarray(g, float)
    s = decay(g)[..., None, None] * state if forget == "before" else state
    if delta == "right":
        d = beta[..., None] * (v - _read(s, k))
    elif delta == "beta on v":
        d = beta[..., None] * v - _read(s, k)
    else:                                               # "no correction"
        d = beta[..., None] * v
    new = s + k[..., :, None] * d[..., None, :]
    if forget == "after":
        new = decay(g)[..., None, None] * new
    o = _read(new if read == "new" else state, q)
    return o / np.sqrt(q.shape[-1]) if scale else o, new


def delta_step_mistakes() -> list[Mistake]:
    """The wrong answers a learner plausibly writes, with the hint that names each."""
    def wrong(**switch):
        return lambda *args: _step(*args, **switch)

    return [
        Mistake("the state was not decayed: multiply it by exp(g) before the "
                "update (the gate: g <= 0 forgets a little of everything).",
                wrong(forget="never")),
        Mistake("the state was decayed AFTER the update: Gated DeltaNet "
                "decays first, S = exp(g) S, then predicts S^T k and writes "
                "the correction, which must not be decayed yet.",
                wrong(forget="after")),
        Mistake("the state was multiplied by g itself: g is the LOG of the "
                "decay; multiply by exp(g).", wrong(decay=lambda g: g)),
        Mistake("beta multiplied the value only: the correction is "
                "beta * (v - S^T k), so beta scales the prediction too.",
                wrong(delta="beta on v")),
        Mistake("nothing was subtracted: that is plain linear attention "
                "(S + beta k v^T). The delta rule writes the correction "
                "v - S^T k, what the state got wrong about k.",
                wrong(delta="no correction")),
        Mistake("the output was read from the state BEFORE this token's "
                "update: read o = S^T q from the new state.", wrong(read="old")),
        Mistake("the query was not scaled: o = S^T q / sqrt(d_k).",
                wrong(scale=False)),
    ]


def check_delta_rule_step(fn: Callable) -> Verdict:
    """Check ``delta_rule_step(state, q, k, v, g, beta)``: state
    (..., d_k, d_v), q and k (..., d_k), v (..., d_v), g and beta (...,).
    Returns ``(output, new_state)``: (..., d_v) and (..., d_k, d_v)."""
    return run_cases(fn, delta_step_cases(), "check_delta_rule_step", call=_call,
                     mistakes=delta_step_mistakes())
