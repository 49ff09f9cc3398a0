"""Answer key of chapter 20b (Part VIII): differential attention (Ye et al.,
"Differential Transformer", 2024; transformers' ``DiffLlamaAttention``).

A differential head computes two softmax attention maps from two query
halves and two key halves, and subtracts the second, scaled by a learned
number lambda, from the first:

    A = softmax(Q1 K1^T / sqrt(d)) - lambda softmax(Q2 K2^T / sqrt(d))
    O = (1 - lambda_init) RMSNorm(A V)         (RMSNorm per head, no weight)

lambda is re-parametrised as exp(lq1 . lk1) - exp(lq2 . lk2) + lambda_init,
with lambda_init = 0.8 - 0.6 exp(-0.3 l) for the layer of index l (0 for
the first layer).
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _lines, _whole_number
from .attention import scaled_dot_product_attention

__all__ = ["differential_lambda_init", "differential_lambda", "differential_attention"]


def differential_lambda_init(layer_idx):
    """lambda_init = 0.8 - 0.6 exp(-0.3 layer_idx): 0.2 for the first layer
    (index 0), rising towards 0.8 in deep layers (the paper's schedule,
    with its depth l - 1 = layer_idx)."""
    layer_idx = _whole_number(layer_idx, "layer_idx")
    if layer_idx < 0:
        raise ValueError(f"layer_idx counts layers from 0, got {layer_idx}")
    return 0.8 - 0.6 * np.exp(-0.3 * layer_idx)


def differential_lambda(lambda_q1, lambda_k1, lambda_q2, lambda_k2, lambda_init):
    """lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2)
    + lambda_init: four learned vectors (d,) of one layer, one lambda for
    all its heads. At initialisation (the vectors near 0) lambda is close
    to lambda_init."""
    vecs = [_as_float_array(a, n) for a, n in ((lambda_q1, "lambda_q1"), (lambda_k1, "lambda_k1"),
                                               (lambda_q2, "lambda_q2"), (lambda_k2, "lambda_k2"))]
    if any(a.ndim != 1 or a.shape != vecs[0].shape for a in vecs):
        raise ValueError(_lines(
            "lambda_q1, lambda_k1, lambda_q2, lambda_k2 must be vectors of",
            f"one length (d,), got {[a.shape for a in vecs]}"))
    q1, k1, q2, k2 = vecs
    return float(np.exp(q1 @ k1) - np.exp(q2 @ k2) + float(lambda_init))


def differential_attention(q1, k1, q2, k2, v, lam, *, lambda_init=None, mask=None, eps=1e-5):
    """Differential attention of one layer's heads.

    q1, q2 (..., Nq, d), k1, k2 (..., Nk, d): the two halves of each head's
    queries and keys; v (..., Nk, d_v): the value, shared by both maps
    (in DiffLlama d_v = 2d). ``lam``: a number, or an array that
    broadcasts against the leading axes (...). ``mask`` (..., Nq, Nk),
    True = may attend, applied to both maps.

    Returns ``(output, weights)``: ``weights`` = softmax_1 - lam softmax_2
    (..., Nq, Nk), the differential map (its rows sum to 1 - lam), and
    ``output`` = weights @ v (..., Nq, d_v). With ``lambda_init`` given,
    the output is also normalised per head over d_v, as DiffLlama does:
    (1 - lambda_init) * x / sqrt(mean(x**2) + eps), with no learned weight.
    """
    q1, k1, q2, k2 = (_as_float_array(a, n) for a, n in
                      ((q1, "q1"), (k1, "k1"), (q2, "q2"), (k2, "k2")))
    if q1.shape != q2.shape or k1.shape != k2.shape:
        raise ValueError(_lines(
            f"q1 {q1.shape} and q2 {q2.shape} must have one shape (..., Nq, d),",
            f"k1 {k1.shape} and k2 {k2.shape} one shape (..., Nk, d)"))
    lam = _as_float_array(lam, "lam")
    _, w1 = scaled_dot_product_attention(q1, k1, v, mask)
    _, w2 = scaled_dot_product_attention(q2, k2, v, mask)
    try:
        weights = w1 - lam[..., None, None] * w2                  # (..., Nq, Nk)
    except ValueError:
        raise ValueError(_lines(
            f"lam {lam.shape} must broadcast against the leading axes",
            f"{w1.shape[:-2]} (one lambda per layer, or per head)")) from None
    out = weights @ _as_float_array(v, "v")                       # (..., Nq, d_v)
    if lambda_init is not None:
        out = out / np.sqrt(np.mean(out * out, axis=-1, keepdims=True) + eps)
        out = (1 - float(lambda_init)) * out
    return out, weights
