"""Checkers of chapter 19b (Part VIII): Gemma 4's key-equals-value layers
and the layers that share an earlier layer's keys and values."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, _copy_args, _unchanged, parts_of, run_cases

__all__ = ["kv_source_cases", "kv_source_mistakes", "check_kv_source_layers",
           "k_eq_v_cases", "k_eq_v_mistakes", "check_k_eq_v_key_value"]

S, F = "sliding_attention", "full_attention"


def kv_source_cases() -> list[Case]:
    """Stacks where the last layers' types differ, where two shared layers
    have the same type, and where the type before the shared ones differs
    from theirs."""
    out = []
    for label, types, shared in [
        ("6 layers: sliding, sliding, full, twice; the last 2 shared",
         [S, S, F] * 2, 2),
        ("8 layers alternating full, sliding, the last 3 shared",
         [F, S] * 4, 3),
        ("12 layers, Gemma's 5:1 pattern twice, the last 5 shared",
         ([S] * 5 + [F]) * 2, 5),
        ("4 layers, none shared", [S, F, S, F], 0),
        ("7 layers: sliding, full, then 5 sliding, the last 4 shared",
         [S, F] + [S] * 5, 4),
    ]:
        out.append(Case(label, (types, shared),
                        np.array(ref.kv_source_layers(types, shared))))
    return out


def kv_source_mistakes() -> list[Mistake]:
    def first_shared(types, shared):
        return len(types) - shared

    def last_of_any_type(types, shared):
        f = first_shared(types, shared)
        return list(range(f)) + [f - 1] * shared

    def first_of_type(types, shared):
        f = first_shared(types, shared)
        return list(range(f)) + [types.index(t) for t in types[f:]]

    def previous_layer(types, shared):
        f = first_shared(types, shared)
        return list(range(f)) + [i - 1 for i in range(f, len(types))]

    def any_earlier(types, shared):  # the last earlier layer of its type, shared or not
        f = first_shared(types, shared)
        out = list(range(f))
        for i in range(f, len(types)):
            out.append(max(j for j in range(i) if types[j] == types[i]))
        return out

    def one_fewer(types, shared):
        return ref.kv_source_layers(types, max(shared - 1, 0))

    def one_more(types, shared):
        return ref.kv_source_layers(types, min(shared + 1, len(types) - 2))

    def no_source(types, shared):
        return list(range(len(types) - shared)) + [-1] * shared

    def one_based(types, shared):
        return [j + 1 for j in ref.kv_source_layers(types, shared)]

    def own_as_minus_one(types, shared):
        f = first_shared(types, shared)
        return [-1] * f + ref.kv_source_layers(types, shared)[f:]

    def shared_only(types, shared):
        return ref.kv_source_layers(types, shared)[first_shared(types, shared):]

    return [
        Mistake("every shared layer read the last non-shared layer whatever "
                "its type: a sliding layer reads a sliding layer's keys and a "
                "full layer a full one's (their widths and windows differ).",
                last_of_any_type),
        Mistake("the FIRST layer of the type was taken: each shared layer "
                "reads the LAST non-shared layer of its type.", first_of_type),
        Mistake("each shared layer read the layer just before it: it reads "
                "the last layer of its own type that computed keys and "
                "values.", previous_layer),
        Mistake("a shared layer read another SHARED layer: shared layers "
                "compute no keys or values; search only the first L - n "
                "layers.", any_earlier),
        Mistake("one layer too few shared: the last num_kv_shared_layers "
                "layers share, so the first shared layer is L - n.", one_fewer),
        Mistake("one layer too many shared: the first shared layer is L - n, "
                "not L - n - 1.", one_more),
        Mistake("a shared layer still reads a layer's keys and values: give "
                "the index of that layer, not -1.", no_source),
        Mistake("the layers were counted from 1: layer indices start at 0, "
                "as in layer_types.", one_based),
        Mistake("a layer that is not shared got -1: it reads its OWN keys "
                "and values, so its entry is its own index i.", own_as_minus_one),
        Mistake("only the shared layers are listed: return one entry for "
                "EVERY layer (L of them), i for the first L - n.", shared_only),
    ]


def check_kv_source_layers(fn: Callable) -> Verdict:
    """Check ``kv_source_layers(layer_types, num_kv_shared_layers)``: a list
    with, for each layer, the index of the layer whose keys and values it
    reads (its own, or the last non-shared layer of its type)."""
    return run_cases(fn, kv_source_cases(), "check_kv_source_layers", rtol=0, atol=0,
                     mistakes=kv_source_mistakes())


# --- a key that is also the value ------------------------------------------------

_PARTS = ("k", "v")


def _rms(x, scale=None, eps=1e-6, axis=-1):  # noqa: D401
    y = x / np.sqrt(np.mean(x * x, axis=axis, keepdims=True) + eps)
    return y if scale is None else y * scale


def _layer_norm(x, scale=None, eps=1e-6):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    return y if scale is None else y * scale


def _rms_eps_outside(x, scale=None, eps=1e-6):
    y = x / (np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) + eps)
    return y if scale is None else y * scale


def k_eq_v_cases() -> list[Case]:
    """Scales far from 1 (a value scaled like the key shows), positions far
    from 0 (a rotated value shows), widths whose rotated part is a quarter."""
    rng = np.random.default_rng(219)
    out = []
    for label, lead, n, d, start in [
        ("one head, 4 tokens, width 8", (), 4, 8, 0),
        ("2 heads, 5 tokens, width 16", (2,), 5, 16, 0),
        ("one head, 3 tokens at positions 7, 8, 9, width 8", (), 3, 8, 7),
        ("one head, 6 tokens, width 12 (one pair of 6 turns)", (), 6, 12, 0),
        ("one head, 3 tokens of tiny size (about 1e-3: RMSNorm's epsilon "
         "counts)", (), 3, 8, 0),
    ]:
        size = 1e-3 if "tiny" in label else 2.0
        raw = np.round(rng.normal(size=lead + (n, d)) * size, 6)
        scale = np.round(rng.uniform(0.3, 2.5, size=d), 3)
        pos = np.arange(start, start + n)
        k = ref.proportional_rope(_rms(raw, scale), pos)
        out.append(Case(label, (raw, scale, pos), {"k": k, "v": _rms(raw)}))
    return out


def _call(fn, case):
    args = _copy_args(case.args)
    result = fn(*args, **case.kwargs)
    _unchanged(args, case.args)
    return parts_of(result, _PARTS)


def k_eq_v_mistakes() -> list[Mistake]:
    def turn(x, pos):
        return ref.proportional_rope(x, pos)

    return [
        Mistake("the value was scaled like the key: v is the projection "
                "RMS-normed with NO learned scale (Gemma 4's v_norm has "
                "none).", lambda r, s, p: (turn(_rms(r, s), p), _rms(r, s))),
        Mistake("the value was rotated: RoPE turns keys (and queries) only; "
                "a rotated value would carry the key's position into the "
                "output.", lambda r, s, p: (turn(_rms(r, s), p), turn(_rms(r), p))),
        Mistake("the value is the key itself, rotated and scaled: the same "
                "projection, but normed without scale and not rotated.",
                lambda r, s, p: (turn(_rms(r, s), p),) * 2),
        Mistake("the value was not normed: v = RMSNorm(raw) without a "
                "scale, not raw.", lambda r, s, p: (turn(_rms(r, s), p), r)),
        Mistake("the key was rotated before it was normed and scaled: norm, "
                "scale, then RoPE (the scale is per channel, so the order "
                "matters).", lambda r, s, p: (_rms(turn(r, p), s), _rms(r))),
        Mistake("the key's learned scale was left out: k = RoPE(RMSNorm(raw) "
                "* k_scale).", lambda r, s, p: (turn(_rms(r), p), _rms(r))),
        Mistake("k and v are swapped: return (k, v), the key first.",
                lambda r, s, p: (_rms(r), turn(_rms(r, s), p))),
        Mistake("RoPE turned every pair: a Gemma 4 global layer turns only a "
                "quarter of them (ref.proportional_rope).",
                lambda r, s, p: (ref.rope(_rms(r, s), p), _rms(r))),
        Mistake("RMSNorm's epsilon (1e-6) was left out: it matters for small "
                "vectors, divide by sqrt(mean(raw**2) + 1e-6).",
                lambda r, s, p: (turn(_rms(r, s, 0.0), p), _rms(r, eps=0.0))),
        Mistake("the key was scaled by (1 + k_scale), as Gemma 2 and 3's "
                "norms do: Gemma 4's key norm multiplies by k_scale itself.",
                lambda r, s, p: (turn(_rms(r, 1 + s), p), _rms(r))),
        Mistake("the RMSNorm ran over the tokens (axis -2): each token's "
                "vector is normed over its d channels, axis -1.",
                lambda r, s, p: (turn(_rms(r, s, axis=-2), p), _rms(r, axis=-2))),
        Mistake("the norm subtracted the mean (a LayerNorm): RMSNorm only "
                "divides by sqrt(mean(raw**2) + eps).",
                lambda r, s, p: (turn(_layer_norm(r, s), p), _layer_norm(r))),
        Mistake("epsilon was added outside the square root: divide by "
                "sqrt(mean(raw**2) + 1e-6), not sqrt(mean(raw**2)) + 1e-6.",
                lambda r, s, p: (turn(_rms_eps_outside(r, s), p), _rms_eps_outside(r))),
    ]


def check_k_eq_v_key_value(fn: Callable) -> Verdict:
    """Check ``k_eq_v_key_value(raw, k_scale, positions)``: raw (..., N, d)
    is the key projection's output; returns ``(k, v)``: k =
    proportional_rope(RMSNorm(raw) * k_scale, positions), v = RMSNorm(raw)."""
    return run_cases(fn, k_eq_v_cases(), "check_k_eq_v_key_value", call=_call,
                     mistakes=k_eq_v_mistakes())
