"""FlashAttention's backward pass, tile by tile (the answer key of chapter 17c).

:func:`flash_attention_backward` computes the gradients of scaled dot-product
attention with respect to q, k and v from what the forward pass of
FlashAttention stores, the output ``o`` and one log-sum-exp ``lse`` per
query, without ever forming the (..., Nq, Nk) scores or weights: each tile of
scores is recomputed from q and k, its weights are ``exp(s - lse)``, and the
softmax's backward uses ``D = rowsum(d_out * o)`` in place of the full row of
weights (FlashAttention-2, Dao 2023, Algorithm 2; key blocks outside, query
blocks inside).

Conventions are those of :mod:`attnbook.reference`: masks are boolean with
True = may attend; ``causal=True`` is aligned bottom-right like
:func:`attnbook.reference.causal_mask`; a query with every key masked has
``lse = -inf``, a zero output, and contributes no gradient to anything.
"""

from __future__ import annotations

import numpy as np

from .reference import _as_float_array, _check_mask

__all__ = ["flash_attention_backward", "log_sum_exp"]


def _sum_to_shape(grad, shape):
    """Sum ``grad`` over the axes broadcasting added or stretched."""
    extra = grad.ndim - len(shape)
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    return grad


def _block(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def log_sum_exp(q, k, mask=None, *, causal=False):
    """The log-sum-exp of each query's scaled scores, plainly: (..., Nq).

    ``log(sum_j exp(q_i . k_j / sqrt(dk)))`` over the keys the query may
    attend to; ``-inf`` for a query that may attend to none. This forms the
    (..., Nq, Nk) scores: it is what a test or a page compares the tiled
    forward pass's ``lse`` with, not a way to compute it for long sequences.
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    s = q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1])  # (..., Nq, Nk)
    nq, nk = s.shape[-2:]
    keep = np.ones((nq, nk), bool)
    if causal:
        keep = np.arange(nk)[None, :] <= nk - nq + np.arange(nq)[:, None]
    if mask is not None:
        keep = keep & _check_mask(mask, s.shape)
    s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1, initial=-np.inf)  # (..., Nq)
    safe = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(divide="ignore"):  # log(0) = -inf for a fully masked row
        return m + np.log(np.exp(s - safe[..., None]).sum(axis=-1))


def flash_attention_backward(q, k, v, o, lse, d_out, mask=None, *, causal=False,
                             block_q=64, block_k=64):
    """Gradients of attention from the forward pass's output and log-sum-exp.

    Parameters
    ----------
    q : array (..., Nq, dk); k : array (..., Nk, dk); v : array (..., Nk, dv)
        The forward pass's inputs; leading (batch, head) axes broadcast.
    o : array (..., Nq, dv)
        The forward pass's output, ``softmax(q k^T / sqrt(dk)) v``.
    lse : array (..., Nq)
        The log-sum-exp of each query's scaled, masked scores,
        ``log(sum_j exp(s_ij))``; ``-inf`` for a query with every key masked.
    d_out : array (..., Nq, dv)
        The gradient of the loss with respect to the output.
    mask : bool array broadcastable to (..., Nq, Nk), optional; True = may
        attend. Read one tile at a time (a slice of a broadcast view).
    causal : bool. Query i sits at position ``Nk - Nq + i`` and may attend to
        keys up to it (bottom-right). Query blocks wholly before a key block
        are skipped, not computed. Combined with ``mask`` by "and".
    block_q, block_k : positive ints; need not divide Nq or Nk.

    Returns
    -------
    (dq, dk, dv) of the shapes of q, k and v (summed over broadcast axes).

    The steps, for each tile (i, j), with ``D_i = rowsum(dO_i * O_i)``::

        S_ij  = Q_i K_j^T / sqrt(dk)       recomputed
        P_ij  = exp(S_ij - lse_i)          the weights, already normalised
        dV_j += P_ij^T dO_i
        dP_ij = dO_i V_j^T
        dS_ij = P_ij * (dP_ij - D_i)
        dQ_i += dS_ij K_j / sqrt(dk)
        dK_j += dS_ij^T Q_i / sqrt(dk)

    Memory beyond the inputs and the gradients is a few (..., block_q,
    block_k) tiles and (..., Nq) for D: it does not grow with Nq * Nk.
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    o = _as_float_array(o, "o")
    lse = _as_float_array(lse, "lse")
    d_out = _as_float_array(d_out, "d_out")
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim < 2:
            raise ValueError(f"{name} must be (..., N, d), got shape {a.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension dk: "
                         f"q {q.shape} vs k {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions Nk: "
                         f"k {k.shape} vs v {v.shape}")
    if q.shape[-1] == 0:
        raise ValueError(f"dk is 0 (q {q.shape}): no scale 1/sqrt(dk)")
    try:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"leading (batch/head) dimensions do not broadcast: "
                         f"q {q.shape}, k {k.shape}, v {v.shape}") from None
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    block_q, block_k = _block(block_q, "block_q"), _block(block_k, "block_k")
    nq, nk, dk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    out_shape = (*lead, nq, dv)
    for name, a in (("o", o), ("d_out", d_out)):
        if a.shape != out_shape:
            raise ValueError(f"{name} must have the output's shape (..., Nq, dv) = "
                             f"{out_shape} (q {q.shape}, k {k.shape}, v {v.shape}), "
                             f"got {a.shape}")
    if lse.shape != out_shape[:-1]:
        raise ValueError(f"lse must have one number per query, shape (..., Nq) = "
                         f"{out_shape[:-1]}, got {lse.shape}")
    if np.isnan(lse).any() or np.isposinf(lse).any():
        raise ValueError("lse contains nan or +inf: pass the forward pass's "
                         "log-sum-exp (-inf only for a fully masked query)")
    score_shape = (*lead, nq, nk)
    if mask is not None:
        mask = np.broadcast_to(_check_mask(mask, score_shape), score_shape)  # a view

    dtype = np.result_type(q, k, v, o, d_out, np.float32)
    scale = 1.0 / float(np.sqrt(dk))
    d_rows = (d_out * o).sum(axis=-1)  # D (..., Nq): rowsum(dO * O)
    safe_lse = np.where(np.isneginf(lse), 0.0, lse)  # a fully masked row
    dq = np.zeros((*lead, nq, dk), dtype=dtype)
    dk_ = np.zeros((*lead, nk, dk), dtype=dtype)
    dv_ = np.zeros((*lead, nk, dv), dtype=dtype)
    for j0 in range(0, nk, block_k):  # key blocks, outside
        j1 = min(j0 + block_k, nk)
        kj, vj = k[..., j0:j1, :], v[..., j0:j1, :]  # (..., bk, dk), (..., bk, dv)
        # causal: query i (position nk - nq + i) sees key j0 when nk - nq + i >= j0
        first_i = max(0, j0 - (nk - nq)) if causal else 0
        start = first_i // block_q * block_q  # the query block holding that row
        for i0 in range(start, nq, block_q):  # query blocks, inside
            i1 = min(i0 + block_q, nq)
            qi = q[..., i0:i1, :]  # (..., bq, dk)
            s = qi @ np.swapaxes(kj, -2, -1) * scale  # (..., bq, bk), recomputed
            keep = None
            if causal and j1 - 1 > nk - nq + i0:  # the tile crosses the diagonal
                pos = nk - nq + np.arange(i0, i1)[:, None]  # (bq, 1)
                keep = np.arange(j0, j1)[None, :] <= pos  # (bq, bk)
            if mask is not None:
                tile = mask[..., i0:i1, j0:j1]
                keep = tile if keep is None else keep & tile
            if keep is not None:
                s = np.where(keep, s, -np.inf)
            p = np.exp(s - safe_lse[..., i0:i1, None])  # (..., bq, bk): weights
            do_i = d_out[..., i0:i1, :]  # (..., bq, dv)
            dv_[..., j0:j1, :] += np.swapaxes(p, -2, -1) @ do_i
            dp = do_i @ np.swapaxes(vj, -2, -1)  # (..., bq, bk)
            ds = p * (dp - d_rows[..., i0:i1, None])  # (..., bq, bk)
            dq[..., i0:i1, :] += ds @ kj * scale
            dk_[..., j0:j1, :] += np.swapaxes(ds, -2, -1) @ qi * scale
    return (_sum_to_shape(dq, q.shape), _sum_to_shape(dk_, k.shape),
            _sum_to_shape(dv_, v.shape))
