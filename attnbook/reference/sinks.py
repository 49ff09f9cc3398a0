"""Answer key of chapter 19 (Part VIII): local and global layers, attention
sinks.

:func:`attention_with_sinks` is gpt-oss's attention: one learned logit per
head appended to every row of scores, a softmax over keys and sink together,
the sink's column dropped. :func:`reach_after_layers` is the earliest key a
query reaches through a stack of sliding-window and full layers.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _check_mask, _lines, _whole_number

__all__ = ["attention_with_sinks", "reach_after_layers"]


def attention_with_sinks(q, k, v, sinks, mask=None):
    """Scaled dot-product attention with one sink logit per head (gpt-oss).

    q is (..., H, N_q, d_k), k is (..., H, N_k, d_k), v is (..., H, N_k, d_v)
    and ``sinks`` is (H,): head h's sink logit. Every row of scores
    ``q k^T / sqrt(d_k)`` of head h gets one more entry, ``sinks[h]``; the
    softmax runs over the N_k keys and the sink together, and the sink's
    weight is then dropped: it has no value, so it adds nothing to the
    output. ``mask`` (boolean, True = may attend) broadcasts to the scores
    (..., H, N_q, N_k); it never hides the sink.

    Returns ``(output, weights)``: output (..., H, N_q, d_v), weights
    (..., H, N_q, N_k), whose rows sum to 1 minus the sink's share. A row
    whose every key is masked puts all its weight on the sink: weights 0,
    output 0 (no 0/0).
    """
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    sinks = _as_float_array(sinks, "sinks")
    if q.ndim < 3 or k.ndim < 3 or v.ndim < 3:
        raise ValueError(_lines(
            "q, k and v need a head axis: (..., H, N, d), got",
            f"q {q.shape}, k {k.shape}, v {v.shape}"))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(_lines(
            f"q {q.shape} and k {k.shape} must have the same width d_k",
            "(last axis)"))
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(_lines(
            f"k {k.shape} and v {v.shape} must have the same number of keys",
            "N_k (axis -2)"))
    h = q.shape[-3]
    if k.shape[-3] != h or v.shape[-3] != h:
        raise ValueError(_lines(
            f"q {q.shape}, k {k.shape} and v {v.shape} must have the same",
            "number of heads H (axis -3); repeat grouped KV heads first"))
    if sinks.shape != (h,):
        raise ValueError(_lines(
            f"sinks must have shape (H,) = ({h},), one logit per head, got",
            f"{sinks.shape}"))
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., H, N_q, N_k)
    sink = np.broadcast_to(sinks[:, None, None], scores.shape[:-1] + (1,))
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = np.where(mask, scores, -np.inf)
    both = np.concatenate([scores, sink], axis=-1)  # (..., H, N_q, N_k + 1)
    top = both.max(axis=-1, keepdims=True)  # finite: the sink is never masked
    e = np.exp(both - top)
    p = e / e.sum(axis=-1, keepdims=True)
    weights = p[..., :-1]  # drop the sink's column: (..., H, N_q, N_k)
    return weights @ v, weights


def reach_after_layers(position, layer_types, window):
    """The earliest key position that query ``position`` can reach through a
    stack of layers, each ``"sliding"`` (a window of ``window`` keys, itself
    included) or ``"full"`` (causal, every earlier key).

    One sliding layer reaches back ``window - 1`` positions, so L of them
    reach ``position - L (window - 1)`` (never below 0); one full layer
    anywhere in the stack reaches position 0.
    """
    position = _whole_number(position, "position")
    window = _whole_number(window, "window")
    if position < 0 or window < 1:
        raise ValueError(_lines(
            f"need position >= 0 and window >= 1, got position={position},",
            f"window={window}"))
    types = list(layer_types)
    bad = [t for t in types if t not in ("sliding", "full")]
    if bad:
        raise ValueError(_lines(
            f"layer_types must be 'sliding' or 'full', got {bad[0]!r}"))
    if "full" in types:
        return 0
    return max(0, position - len(types) * (window - 1))
