"""Checker of chapter 13 (Part VI): rotary position embedding (RoPE)."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, _same, run_cases

__all__ = ["rope_cases", "check_rope"]


def _rope_variant(x, positions, base=10000.0, *, interleaved=False,
                  exponent=2, offset=0, sign=1.0, arange=False,
                  repeat_angles=False, consecutive=False):
    """RoPE with one knob turned: the wrong answers the checker recognises.

    arange: positions 0..N-1 whatever was passed; consecutive: positions[0]
    + 0..N-1, as if positions were always consecutive; repeat_angles: the
    angle table laid out (t0, t0, t1, t1, ...) while the halves are rotated."""
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    i = np.arange(d // 2)
    theta = float(base) ** (-exponent * i / d)  # (d/2,)
    pos = np.asarray(positions, dtype=float)
    if arange:
        pos = np.arange(x.shape[-2], dtype=float)
    if consecutive:
        pos = pos.reshape(-1)[0] + np.arange(x.shape[-2], dtype=float)
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
        ("positions that skip: [2, 3, 5, 8, 9] (packed sequences, padding)",
         (x, np.array([2, 3, 5, 8, 9])), {}),
        ("positions as a Python list: [4, 5, 6, 7, 8]",
         (x, [4, 5, 6, 7, 8]), {}),
    ]:
        out.append(Case(label, args, ref.rope(*args, **kwargs), kwargs))
    return out


def _rope_mistakes(case):
    x, pos = case.args
    base = case.kwargs.get("base", 10000.0)
    forms = [
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
        ("you assumed consecutive positions (positions[0] + 0, 1, 2, ...): "
         "use each token's own position as given; they need not be "
         "consecutive (packed sequences, left padding).",
         _rope_variant(x, pos, base, consecutive=True)),
        ("the angles are laid out (t0, t0, t1, t1, ...), the interleaved "
         "layout, while the coordinates are split in halves: with "
         "rotate_half, the angles must be [t0 .. t_{d/2-1}] twice, "
         "np.concatenate([ang, ang], -1).",
         _rope_variant(x, pos, base, repeat_angles=True)),
    ]
    return [Mistake.result(hint, value) for hint, value in forms]


_LIST_HINT = ("right for an array of positions, but a Python list makes your "
              "function raise: convert it first, positions = "
              "np.asarray(positions), before [:, None] or arithmetic.")


def _list_rule(fn, call, cases, index, rtol, atol, want_bool):
    """Positions given as a list make the function raise; as an array, it is right."""
    case = cases[index]
    if not isinstance(case.args[1], list):
        return None
    as_array = Case(case.label, (case.args[0], np.asarray(case.args[1])),
                    case.expected, case.kwargs)
    try:
        got = call(fn, as_array)["output"]
    except Exception:
        return None
    return _LIST_HINT if _same(got, case.expected, rtol, atol) else None


def check_rope(fn: Callable) -> Verdict:
    """Check a learner's ``rope(x, positions, base=10000.0)``: split-halves
    pairing (x[i], x[i + d/2]), as Hugging Face's LLaMA code; x (..., N, d),
    positions (N,), an array or a list. Returns an array of x's shape."""
    return run_cases(fn, rope_cases(), "check_rope", mistakes=_rope_mistakes,
                     rules=[_list_rule])
