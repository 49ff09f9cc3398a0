"""Answer key of chapter 13: rotary position embedding (RoPE), in both of the
pairing conventions found in real code (Su et al., RoFormer).
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array

__all__ = ["rope_angles", "rope"]


def rope_angles(positions, d, *, base=10000.0):
    """The rotation angles of RoPE, ``positions[n] * theta_i``, shape (N, d/2).

    ``theta_i = base ** (-2i / d)`` for i = 0 .. d/2 - 1: pair 0 turns fastest
    (one radian per position), the last pair slowest.
    """
    d = int(d)
    if d <= 0 or d % 2:
        raise ValueError(f"RoPE rotates pairs of coordinates: d must be even "
                         f"and > 0, got d = {d}")
    base = float(base)
    if not np.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    pos = _as_float_array(positions, "positions")
    theta = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    return pos[..., None] * theta  # (..., N, d/2)


def rope(x, positions, *, base=10000.0, interleaved=False):
    """Rotate pairs of coordinates of ``x`` by the angle ``position * theta_i``.

    Parameters
    ----------
    x : array (..., N, d), d even; queries or keys (one head or many).
    positions : array (N,) (or any shape that broadcasts to x's (..., N)):
        the position of each of the N rows, usually ``np.arange(N)``, or
        ``np.arange(start, start + N)`` for tokens that come after a cache.
    base : the base of the frequencies, ``theta_i = base ** (-2i / d)``:
        10,000 in RoFormer, 500,000 in LLaMA 3, 1,000,000 in Qwen2.
    interleaved : which coordinates form pair i.
        ``False`` (default): split halves, ``(x[i], x[i + d/2])``, as Hugging
        Face's ``rotate_half`` and GPT-NeoX do.
        ``True``: neighbours, ``(x[2i], x[2i+1])``, as Meta's LLaMA reference
        code (its complex-number form), GPT-J and RoFormer do.

    Each pair (a, b) becomes (a cos φ - b sin φ, a sin φ + b cos φ) with
    φ = position * theta_i. Returns an array of x's shape. Position 0 is the
    identity. The score between a query rotated at m and a key rotated at n
    depends on m - n only.
    """
    x = _as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, d), got shape {x.shape}")
    n, d = x.shape[-2], x.shape[-1]
    pos = np.asarray(positions)
    if pos.ndim == 0 or pos.shape[-1] != n:
        raise ValueError(f"positions must give one position per row of x: x "
                         f"{x.shape} has N = {n}, positions {pos.shape}")
    angles = rope_angles(pos, d, base=base)  # (..., N, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]  # (..., N, d/2) each
        out = np.empty(np.broadcast_shapes(x.shape, cos.shape[:-1] + (d,)))
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    a, b = x[..., : d // 2], x[..., d // 2:]  # (..., N, d/2) each
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


