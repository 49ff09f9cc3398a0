"""Checkers of chapter 22 (Part VIII): one step of the gated delta rule
(Gated DeltaNet); the bytes a hybrid stack keeps per sequence."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, _copy_args, _unchanged, parts_of, run_cases

__all__ = ["delta_step_cases", "delta_step_mistakes", "check_delta_rule_step",
           "hybrid_cases", "hybrid_mistakes", "check_hybrid_bytes"]

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
        state, q, k, v = delta_inputs(rng, lead, d_k, d_v, zero_state="zero state" in label)
        g_ = np.round(-rng.uniform(0.2, 1.5, size=lead), 2) if g is None else np.float64(g)
        beta = np.round(rng.uniform(0.3, 0.9, size=lead), 2)
        o, s = ref.delta_rule_step(state, q, k, v, g_, beta)
        out.append(Case(label, (state, q, k, v, g_, beta), {"state": s, "output": o}))
    return out


def delta_inputs(rng, lead, d_k, d_v, *, zero_state=False):
    """A case's state (..., d_k, d_v), query and unit-norm key (..., d_k), value (..., d_v)."""
    state = rng.normal(size=lead + (d_k, d_v))
    if zero_state:
        state = np.zeros_like(state)
    q, k = rng.normal(size=(2,) + lead + (d_k,))
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=lead + (d_v,))
    return state, q, k, v


def _call(fn, case):
    args = _copy_args(case.args)
    result = fn(*args, **case.kwargs)
    _unchanged(args, case.args)
    return parts_of(result, _PARTS, order=("state", "output"))


def _read(s, x):
    return np.einsum("...kv,...k->...v", s, x)          # S^T x: (..., d_v)


def _step(state, q, k, v, g, beta, *, forget="before", decay=np.exp,
          delta="right", read="new", scale=True, by="d_k"):
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
    o = _read({"new": new, "old": state, "decayed": s}[read], q)
    width = q.shape[-1] if by == "d_k" else v.shape[-1]
    return o / np.sqrt(width) if scale else o, new


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
        Mistake("the output was read from the decayed state, before the "
                "correction was written: read o = S^T q after both steps, "
                "exp(g) S and then + beta k (v - S^T k)^T.",
                wrong(read="decayed")),
        Mistake("the query was not scaled: o = S^T q / sqrt(d_k).",
                wrong(scale=False)),
        Mistake("the output was divided by sqrt(d_v): the query's scale is "
                "1 / sqrt(d_k), the width of q and k (q.shape[-1]).",
                wrong(by="d_v")),
    ]


def check_delta_rule_step(fn: Callable) -> Verdict:
    """Check ``delta_rule_step(state, q, k, v, g, beta)``: state
    (..., d_k, d_v), q and k (..., d_k), v (..., d_v), g and beta (...,).
    Returns ``(output, new_state)``: (..., d_v) and (..., d_k, d_v)."""
    return run_cases(fn, delta_step_cases(), "check_delta_rule_step", call=_call,
                     mistakes=delta_step_mistakes())


# --- the bytes of a hybrid stack --------------------------------------------------

def _hybrid(n, layer_types, kv_per_token, state_bytes):
    full = sum(t == "full" for t in layer_types)
    return full * kv_per_token * n + (len(layer_types) - full) * state_bytes


def hybrid_cases() -> list[Case]:
    """Qwen3-Next's layout and sizes, other ratios, all full, all linear."""
    qwen = ["linear"] * 3 + ["full"]
    out = []
    for label, args in [
        ("Qwen3-Next: 12 x (3 linear + 1 full), 4,096 tokens",
         (4096, qwen * 12, 2048, 1_114_112)),
        ("Qwen3-Next's layout at 1,048,576 tokens", (2**20, qwen * 12, 2048, 1_114_112)),
        ("one full layer in 2, 8 layers, 1,000 tokens", (1000, ["linear", "full"] * 4,
                                                          512, 65_536)),
        ("4 full layers only, 100 tokens", (100, ["full"] * 4, 1024, 4096)),
        ("3 linear layers only, 50,000 tokens", (50_000, ["linear"] * 3, 1024, 8192)),
    ]:
        out.append(Case(label, args, np.int64(_hybrid(*args))))
    return out


def hybrid_mistakes() -> list[Mistake]:
    def counts(t):
        full = sum(x == "full" for x in t)
        return full, len(t) - full

    def grows(n, t, kv, st):
        f, lin = counts(t)
        return f * kv * n + lin * st * n

    def no_state(n, t, kv, st):
        return counts(t)[0] * kv * n

    def every_cache(n, t, kv, st):
        return len(t) * kv * n + counts(t)[1] * st

    def all_full(n, t, kv, st):
        return len(t) * kv * n

    def swapped(n, t, kv, st):
        f, lin = counts(t)
        return lin * kv * n + f * st

    return [
        Mistake("the state was multiplied by the context: a linear layer's "
                "state has a fixed size, whatever n is.", grows),
        Mistake("the linear layers' states are missing: each keeps its "
                "state_bytes, even though they do not grow.", no_state),
        Mistake("every layer got a KV cache: only the full-attention layers "
                "keep one; a linear layer keeps its state instead.", every_cache),
        Mistake("every layer was counted as a full layer: that is the dense "
                "model; count the 'full' entries of layer_types.", all_full),
        Mistake("full and linear were swapped: the 'full' layers keep the "
                "cache that grows, the 'linear' ones the fixed state.", swapped),
    ]


def check_hybrid_bytes(fn: Callable) -> Verdict:
    """Check ``hybrid_bytes(n, layer_types, kv_per_token, state_bytes)``:
    the bytes a sequence of n tokens keeps in a stack whose layers are
    "full" (a KV cache of kv_per_token bytes per token) or "linear" (a
    state of state_bytes, fixed)."""
    return run_cases(fn, hybrid_cases(), "check_hybrid_bytes", rtol=0, atol=0,
                     mistakes=hybrid_mistakes())
