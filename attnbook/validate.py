"""Validation shared by the answer key and the PyTorch code: arrays, masks, weights.

The lowest module of the package: it imports nothing of attnbook, so every
part's answer key can use it without an import cycle. Error messages fit in
79 characters per line, ``ValueError: `` included.
"""

from __future__ import annotations

import operator

import numpy as np

FULLY_MASKED_CHOICES = ("raise", "zeros")


def _as_float_array(x, name):
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


def _lines(*parts, prefix="ValueError: "):
    """Join message parts with spaces, breaking lines to fit 79 columns (prefix included)."""
    lines = [prefix]
    for part in parts:
        if len(lines[-1]) + 1 + len(part) <= 79 or lines[-1] in ("", prefix):
            lines[-1] = f"{lines[-1]} {part}" if lines[-1] not in ("", prefix) else lines[-1] + part
        else:
            lines.append(part)
    return "\n".join(lines)[len(prefix):]


def _check_mask_shape(mask_shape, score_shape):
    """Raise ValueError unless a mask of ``mask_shape`` broadcasts to
    ``score_shape`` without enlarging it (shared with the PyTorch code)."""
    mask_shape, score_shape = tuple(mask_shape), tuple(score_shape)
    try:
        shape = np.broadcast_shapes(mask_shape, score_shape)
    except ValueError:
        raise ValueError(_lines(
            f"mask of shape {mask_shape}", "does not broadcast to",
            f"the scores {score_shape}", "(..., Nq, Nk)")) from None
    if shape != score_shape:
        raise ValueError(_lines(
            f"mask of shape {mask_shape}", "would enlarge", f"the scores {score_shape};",
            "give the batch/head axes", "to q, k and v instead"))


def _check_mask(mask, score_shape):
    m = np.asarray(mask)
    if m.dtype != bool:
        raise TypeError(
            f"mask must be boolean (True = may attend), got {m.dtype};\n"
            "for a 0/1 keep-matrix use mask == 1, for an additive\n"
            "0/-inf matrix use mask == 0"
        )
    _check_mask_shape(m.shape, score_shape)
    return m


def _check_weight(w, name, shape):
    w = _as_float_array(w, name)
    if w.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {w.shape}")
    return w




def _whole_number(value, name):
    """``value`` as an int (not a bool), or a TypeError naming ``name``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
