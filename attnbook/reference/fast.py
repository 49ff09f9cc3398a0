"""The answer key of the part "Making attention fast".

Chapters import these names from :mod:`attnbook.reference`; they live here so
that the answer key of each part of the book stays a file of its own.

* :func:`online_softmax_state`: the running maximum and running sum of one
  pass over a row (Milakov and Gimelshein 2018).
* :func:`attention_state` and :func:`merge_attention_states`: the partial
  result ``(m, l, o)`` of attention over one block of keys, and how two such
  results combine into the result over both blocks.
* :func:`flash_attention`: exact attention computed tile by tile, never
  forming the (Nq, Nk) score matrix (FlashAttention, Dao et al. 2022, in the
  form of FlashAttention-2, Dao 2023: normalise once at the end); with
  ``return_lse=True`` it also returns the log-sum-exp of each query's scores.
* :func:`flash_attention_backward`: the gradients with respect to q, k and v
  from the output and the log-sum-exp, the scores recomputed tile by tile
  (FlashAttention-2's backward pass, Dao 2023, Algorithm 2).

Conventions are those of :mod:`attnbook.reference`: masks are boolean with
True = may attend; ``causal=True`` is aligned bottom-right like
:func:`attnbook.reference.causal_mask`. A query with every key masked gets a
zero output (the ``fully_masked="zeros"`` behaviour of the plain version).
"""

from __future__ import annotations

import operator

import numpy as np

from ..validate import _as_float_array, _check_mask
from .learn import _sum_to_shape

__all__ = [
    "online_softmax_state",
    "attention_state",
    "merge_attention_states",
    "flash_attention",
    "flash_attention_backward",
]


def online_softmax_state(x, axis=-1):
    """One pass over ``x`` along ``axis``: the running (max, sum) at the end.

    Returns ``(m, l)`` with ``m = max(x)`` and ``l = sum(exp(x - m))`` over
    the axis, computed element by element as the online softmax does: when a
    new element raises the maximum, the sum so far is multiplied by
    ``exp(m_old - m_new)``. ``softmax(x) = exp(x - m) / l``. ``-inf`` entries
    (masked) add nothing; a slice of nothing but ``-inf`` gives
    ``(-inf, 0)``. A Python loop: for teaching and testing, not for speed.
    """
    z = _as_float_array(x, "x")
    if z.ndim == 0:
        raise ValueError("online_softmax_state needs at least one axis; got a scalar")
    z = np.moveaxis(z, axis, -1)
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("online_softmax_state input contains nan or +inf")
    m = np.full(z.shape[:-1], -np.inf)
    s = np.zeros(z.shape[:-1])
    for j in range(z.shape[-1]):
        xj = z[..., j]
        m_new = np.maximum(m, xj)
        safe = np.where(np.isneginf(m_new), 0.0, m_new)
        s = s * np.exp(m - safe) + np.exp(xj - safe)
        m = m_new
    return m, s


def attention_state(q, k, v, mask=None):
    """The partial result of attention over the keys given, unnormalised.

    q : (..., Nq, dk); k : (..., Nk, dk); v : (..., Nk, dv); mask : bool,
    True = may attend, broadcasting to (..., Nq, Nk).

    Returns ``(m, l, o)``: ``m`` (..., Nq) the largest visible scaled score
    of each query, ``l`` (..., Nq) the sum of ``exp(score - m)``, and ``o``
    (..., Nq, dv) the sum of ``exp(score - m) * v``. The attention output
    over these keys is ``o / l``. A query that sees no key gets
    ``(-inf, 0, 0)``. This builds the (..., Nq, Nk) scores: it is meant for
    one block of keys.
    """
    q, k, v, lead = _check_qkv(q, k, v)
    nq, nk = q.shape[-2], k.shape[-2]
    s = q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1])  # (..., Nq, Nk)
    s = np.broadcast_to(s, (*lead, nq, nk))
    if mask is not None:
        s = np.where(_check_mask(mask, s.shape), s, -np.inf)
    m = s.max(axis=-1, initial=-np.inf)  # (..., Nq)
    safe = np.where(np.isneginf(m), 0.0, m)
    p = np.exp(s - safe[..., None])  # (..., Nq, Nk); masked -> 0
    return m, p.sum(axis=-1), p @ v


def merge_attention_states(a, b):
    """Combine two partial results ``(m, l, o)`` over disjoint sets of keys.

    Each state is ``(m, l, o)`` as returned by :func:`attention_state`.
    The merged maximum is ``m = max(m_a, m_b)``; each side is rescaled to it
    by ``exp(m_side - m)`` (at most 1, so nothing overflows):
    ``l = exp(m_a - m) l_a + exp(m_b - m) l_b`` and the same for ``o``.
    Nothing is divided: the output is ``o / l`` once every block is merged.
    A side that saw no key, ``(-inf, 0, 0)``, changes nothing; two such
    sides give ``(-inf, 0, 0)``, not nan.
    """
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m_a, l_a, o_a, m_b, l_b, o_b = (
        np.asarray(t, dtype=float) for t in (m_a, l_a, o_a, m_b, l_b, o_b))
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isneginf(m), 0.0, m)
    alpha, beta = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, alpha * l_a + beta * l_b, alpha[..., None] * o_a + beta[..., None] * o_b


def _check_qkv(q, k, v):
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim < 2:
            raise ValueError(f"{name} must be (..., N, d), got shape {a.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension dk: "
                         f"q {q.shape} vs k {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of positions Nk: "
                         f"k {k.shape} vs v {v.shape}")
    try:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            f"leading (batch/head) dimensions do not broadcast: "
            f"q {q.shape}, k {k.shape}, v {v.shape}"
        ) from None
    if q.shape[-1] == 0:
        raise ValueError(f"dk is 0 (q {q.shape}): nothing to compare, "
                         "and no scale 1/sqrt(dk)")
    return q, k, v, lead


def _block_size(value, name):
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    try:
        size = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a positive integer, got {value!r}") from None
    if size < 1:
        raise ValueError(f"{name} must be a positive integer, got {size}")
    return size


def _masked_tile(s, mask, causal, nq, nk, i0, i1, j0, j1):
    """A tile of scores (queries i0:i1, keys j0:j1) with its hidden entries at -inf:
    the causal mask (bottom-right: query i at position nk - nq + i) where the tile
    crosses the diagonal, and the given mask's tile."""
    keep = None
    if causal and j1 - 1 > nk - nq + i0:  # the tile crosses the diagonal
        pos = nk - nq + np.arange(i0, i1)[:, None]  # (bq, 1)
        keep = np.arange(j0, j1)[None, :] <= pos  # (bq, bk)
    if mask is not None:
        tile = mask[..., i0:i1, j0:j1]
        keep = tile if keep is None else keep & tile
    return s if keep is None else np.where(keep, s, -np.inf)


def flash_attention(q, k, v, mask=None, *, causal=False, block_q=64, block_k=64,
                    return_lse=False):
    """Exact scaled dot-product attention, one (block_q, block_k) tile at a time.

    The same result as ``scaled_dot_product_attention(q, k, v, mask,
    fully_masked="zeros")``, without ever forming the (..., Nq, Nk) score
    matrix: each block of ``block_q`` queries keeps a running maximum ``m``,
    a running sum ``l`` and an unnormalised running output ``o``; each block of
    ``block_k`` keys rescales them by ``exp(m_old - m_new)`` and adds its
    share; the output is divided by ``l`` once, at the end
    (FlashAttention-2's order of loops: queries outside, keys inside).

    Parameters
    ----------
    q : array (..., Nq, dk); k : array (..., Nk, dk); v : array (..., Nk, dv)
    mask : bool array broadcastable to (..., Nq, Nk), optional, True = may
        attend. It is read one tile at a time (a slice of a broadcast view),
        so a mask of shape (Nk,) or (..., 1, Nk) costs no (Nq, Nk) memory.
    causal : bool. Query i sits at position ``Nk - Nq + i`` and may attend to
        keys 0 .. Nk - Nq + i (bottom-right, as ``causal_mask(Nq, Nk)``).
        Tiles wholly above that diagonal are skipped, not computed; the
        causal test is made from indices, tile by tile. Combined with
        ``mask`` by "and".
    block_q, block_k : positive ints; they need not divide Nq or Nk, and may
        exceed them (one block then holds everything).
    return_lse : bool, default False. When true, return the log-sum-exp of
        each query's scaled, masked scores in place of the weights: what
        FlashAttention's forward pass keeps for its backward pass
        (:func:`flash_attention_backward`).

    Returns
    -------
    (output, None), or (output, lse) with ``return_lse=True``: output
    (..., Nq, dv); no weights are formed; lse (..., Nq), ``m + log(l)``,
    ``-inf`` for a query that may attend to no key. A query that
    may attend to no key gets a zero output. ``Nq == 0`` gives an empty
    output; ``Nk == 0`` gives zeros; ``dk == 0`` raises.

    Peak memory beyond the inputs and output is O(lead * block_q * block_k)
    plus O(lead * block_q * dv): it does not grow with Nq * Nk.
    """
    q, k, v, lead = _check_qkv(q, k, v)
    block_q = _block_size(block_q, "block_q")
    block_k = _block_size(block_k, "block_k")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    if not isinstance(return_lse, (bool, np.bool_)):
        raise TypeError(f"return_lse must be True or False, got {return_lse!r}")
    nq, nk, dk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    score_shape = (*lead, nq, nk)
    if mask is not None:
        mask = np.broadcast_to(_check_mask(mask, score_shape), score_shape)  # a view
    dtype = np.result_type(q, k, v, np.float32)
    out = np.zeros((*lead, nq, dv), dtype=dtype)
    lse = np.full((*lead, nq), -np.inf, dtype=dtype) if return_lse else None
    scale = 1.0 / float(np.sqrt(dk))
    kt = np.swapaxes(k, -2, -1)  # (..., dk, Nk), a view
    for i0 in range(0, nq, block_q):
        i1 = min(i0 + block_q, nq)
        qi = q[..., i0:i1, :] * scale  # (..., bq, dk)
        m = np.full((*lead, i1 - i0), -np.inf, dtype=dtype)  # running max
        l = np.zeros((*lead, i1 - i0), dtype=dtype)  # running sum
        o = np.zeros((*lead, i1 - i0, dv), dtype=dtype)  # unnormalised running output
        last_pos = nk - nq + (i1 - 1)  # position of this block's last query
        for j0 in range(0, nk, block_k):
            if causal and j0 > last_pos:
                break  # this tile and every one to its right is in the future
            j1 = min(j0 + block_k, nk)
            s = qi @ kt[..., j0:j1]  # (..., bq, bk)
            s = _masked_tile(s, mask, causal, nq, nk, i0, i1, j0, j1)
            m_new = np.maximum(m, s.max(axis=-1))  # (..., bq)
            safe = np.where(np.isneginf(m_new), 0.0, m_new)
            alpha = np.exp(m - safe)  # rescales what came before; 0 at the start
            p = np.exp(s - safe[..., None])  # (..., bq, bk)
            l = alpha * l + p.sum(axis=-1)
            o = alpha[..., None] * o + p @ v[..., j0:j1, :]  # (..., bq, dv)
            m = m_new
        seen = (l > 0)[..., None]
        np.divide(o, l[..., None], out=out[..., i0:i1, :], where=seen)
        if return_lse:
            with np.errstate(divide="ignore"):  # log(0) = -inf: a query that sees nothing
                lse[..., i0:i1] = m + np.log(l)
    return out, lse


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
    q, k, v, lead = _check_qkv(q, k, v)
    o = _as_float_array(o, "o")
    lse = _as_float_array(lse, "lse")
    d_out = _as_float_array(d_out, "d_out")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    block_q = _block_size(block_q, "block_q")
    block_k = _block_size(block_k, "block_k")
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
            s = _masked_tile(s, mask, causal, nq, nk, i0, i1, j0, j1)
            p = np.exp(s - safe_lse[..., i0:i1, None])  # (..., bq, bk): weights
            do_i = d_out[..., i0:i1, :]  # (..., bq, dv)
            dv_[..., j0:j1, :] += np.swapaxes(p, -2, -1) @ do_i
            dp = do_i @ np.swapaxes(vj, -2, -1)  # (..., bq, bk)
            ds = p * (dp - d_rows[..., i0:i1, None])  # (..., bq, bk)
            dq[..., i0:i1, :] += ds @ kj * scale
            dk_[..., j0:j1, :] += np.swapaxes(ds, -2, -1) @ qi * scale
    return (_sum_to_shape(dq, q.shape), _sum_to_shape(dk_, k.shape),
            _sum_to_shape(dv_, v.shape))
