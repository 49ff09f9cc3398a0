"""The answer key of the part "Attention that learns".

Chapters import these names from :mod:`attnbook.reference`; they live here so
that the answer key of each part of the book stays a file of its own.

* :func:`attention_backward`: the gradients of scaled dot-product attention
  with respect to its queries, keys and values, given the gradient of the
  output (backpropagation through one attention call).
* :func:`self_attention_backward`: the same for one head of self-attention,
  back to its input and its three projections.
* :func:`cross_entropy`: the mean cross-entropy of a softmax over logits
  against integer targets, and its gradient with respect to the logits.

Conventions are those of :mod:`attnbook.reference`: masks are boolean with
True = may attend, and a fully masked query raises unless
``fully_masked="zeros"``.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array
from .attention import scaled_dot_product_attention

__all__ = ["attention_backward"]


def _sum_to_shape(grad, shape):
    """Sum ``grad`` over the axes that broadcasting added or stretched.

    An input of shape (1, Nk, dk) used against a batch of 3 received the
    same keys three times; its gradient is the sum of the three.
    """
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape)
                      if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def attention_backward(q, k, v, d_out, mask=None, *, fully_masked="raise"):
    """Gradients of ``softmax(q k^T / sqrt(dk)) v`` with respect to q, k and v.

    Parameters
    ----------
    q : array (..., Nq, dk)
    k : array (..., Nk, dk)
    v : array (..., Nk, dv)
        As in :func:`~attnbook.reference.scaled_dot_product_attention`: the
        leading (batch, head) dimensions broadcast against each other.
    d_out : array of the output's shape, (..., Nq, dv) with the broadcast
        leading dimensions: the gradient of the loss with respect to the
        output, dL/dO, coming from the layers above.
    mask : bool array broadcastable to (..., Nq, Nk), optional.
        True means the query may attend to that key.
    fully_masked : "raise" (default) or "zeros"
        A query whose every key is masked raises ``ValueError``, as in the
        forward pass. With ``"zeros"`` its output is the constant 0 whatever
        q, k and v are, so that row contributes zero gradient to everything.

    Returns
    -------
    dq : array of q's shape
    dk : array of k's shape
    dv : array of v's shape
        Where an input was broadcast (a size-1 or missing leading axis), its
        gradient is summed over the copies, so each gradient has exactly the
        shape of its input.

    The steps, with S the scaled scores and A the weights::

        dV = A^T dO                       (..., Nk, dv)
        dA = dO V^T                       (..., Nq, Nk)
        dS = A * (dA - rowsum(dA * A))    softmax, row by row
        dQ = dS K / sqrt(dk)              (..., Nq, dk)
        dK = dS^T Q / sqrt(dk)            (..., Nk, dk)

    A masked query-key pair has A = 0, hence dS = 0: no gradient flows
    through it. Empty inputs (Nq == 0 or Nk == 0) give zero gradients of the
    inputs' shapes (Nk == 0 makes every query fully masked, which follows
    ``fully_masked``).
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    # The forward pass checks the shapes, the mask and fully_masked.
    out, a = scaled_dot_product_attention(q, k, v, mask,
                                          fully_masked=fully_masked)
    d_out = _as_float_array(d_out, "d_out")
    if d_out.shape != out.shape:
        raise ValueError(
            f"d_out must have the output's shape (..., Nq, dv) = {out.shape} "
            f"(q {q.shape}, k {k.shape}, v {v.shape}), got {d_out.shape}")
    scale = 1.0 / np.sqrt(q.shape[-1])
    d_v = np.swapaxes(a, -2, -1) @ d_out             # (..., Nk, dv)
    d_a = d_out @ np.swapaxes(v, -2, -1)             # (..., Nq, Nk)
    d_s = a * (d_a - (d_a * a).sum(axis=-1, keepdims=True))  # (..., Nq, Nk)
    d_q = d_s @ k * scale                            # (..., Nq, dk)
    d_k = np.swapaxes(d_s, -2, -1) @ q * scale       # (..., Nk, dk)
    return (_sum_to_shape(d_q, q.shape), _sum_to_shape(d_k, k.shape),
            _sum_to_shape(d_v, v.shape))


def cross_entropy(logits, targets):
    """Mean cross-entropy of softmax(logits) against targets, and its gradient.

    Parameters
    ----------
    logits : array (..., V): one row of V class scores per position.
    targets : int array of shape ``logits.shape[:-1]``: the right class of
        each position, in ``0 .. V-1``.

    Returns
    -------
    loss : float, ``-mean(log softmax(logits)[target])`` over every position.
    d_logits : array (..., V), ``(softmax(logits) - onehot(targets)) / M``
        with M the number of positions: the gradient of the mean loss.

    The log-softmax subtracts each row's maximum first, so large logits do
    not overflow. No positions (M == 0) raises: the mean of nothing.
    """
    z = _as_float_array(logits, "logits")
    t = np.asarray(targets)
    if z.ndim < 1 or z.shape[-1] == 0:
        raise ValueError(f"logits must be (..., V) with V >= 1 classes, got "
                         f"shape {z.shape}")
    if t.shape != z.shape[:-1]:
        raise ValueError(f"targets must have the shape of logits without its "
                         f"last axis: logits {z.shape}, so targets "
                         f"{z.shape[:-1]}, got {t.shape}")
    if not np.issubdtype(t.dtype, np.integer):
        raise TypeError(f"targets must be integer class indices, got dtype "
                        f"{t.dtype}")
    n_classes = z.shape[-1]
    if t.size and (t.min() < 0 or t.max() >= n_classes):
        raise ValueError(f"targets must lie in 0 .. {n_classes - 1}, got "
                         f"values from {t.min()} to {t.max()}")
    m = t.size
    if m == 0:
        raise ValueError("no positions: the mean cross-entropy of nothing "
                         "is undefined")
    shifted = z - z.max(axis=-1, keepdims=True)                # (..., V)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(log_p, t[..., None], axis=-1)  # (..., 1)
    loss = float(-picked.mean())
    d_logits = np.exp(log_p)                                   # (..., V)
    np.put_along_axis(d_logits, t[..., None],
                      np.take_along_axis(d_logits, t[..., None], -1) - 1, -1)
    return loss, d_logits / m


__all__ += ["cross_entropy"]


def self_attention_backward(x, w_q, w_k, w_v, d_out):
    """Gradients of one head of self-attention with respect to its input and
    its three projections.

    The forward pass is ``softmax(Q K^T / sqrt(dk)) V`` with ``Q = x w_q``,
    ``K = x w_k``, ``V = x w_v`` (no mask). ``x`` is (..., N, D), ``w_q`` and
    ``w_k`` (D, dk), ``w_v`` (D, dv), ``d_out`` (..., N, dv), the gradient of
    the loss with respect to the output.

    Returns ``(dx, dw_q, dw_k, dw_v)``: ``dx`` of x's shape, the sum of the
    three paths ``dQ w_q^T + dK w_k^T + dV w_v^T``; ``dw_q = x^T dQ`` and so
    on, summed over every leading (batch) axis, so each has its weight's
    shape: the same weights serve every sequence.
    """
    x = _as_float_array(x, "x")
    w_q, w_k, w_v = (_as_float_array(w, name) for w, name in
                     ((w_q, "w_q"), (w_k, "w_k"), (w_v, "w_v")))
    d_out = _as_float_array(d_out, "d_out")
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, D), got shape {x.shape}")
    big_d = x.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if w.ndim != 2 or w.shape[0] != big_d:
            raise ValueError(f"{name} must be (D, width) with D = {big_d}, "
                             f"the width of x {x.shape}; got {w.shape}")
    if w_q.shape != w_k.shape:
        raise ValueError(f"w_q and w_k must have the same shape (D, dk): got "
                         f"{w_q.shape} and {w_k.shape}")
    want = x.shape[:-1] + (w_v.shape[1],)
    if d_out.shape != want:
        raise ValueError(f"d_out must have the output's shape {want} (x "
                         f"{x.shape}, w_v {w_v.shape}); got {d_out.shape}")
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    dq, dk, dv = attention_backward(q, k, v, d_out)
    dx = dq @ w_q.T + dk @ w_k.T + dv @ w_v.T             # (..., N, D)
    flat_x = x.reshape(-1, big_d)                         # (B * N, D)
    dws = tuple(flat_x.T @ g.reshape(-1, g.shape[-1]) for g in (dq, dk, dv))
    return (dx,) + dws


__all__ += ["self_attention_backward"]
