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
  form of FlashAttention-2, Dao 2023: normalise once at the end).

Conventions are those of :mod:`attnbook.reference`: masks are boolean with
True = may attend; ``causal=True`` is aligned bottom-right like
:func:`attnbook.reference.causal_mask`. A query with every key masked gets a
zero output (the ``fully_masked="zeros"`` behaviour of the plain version).
"""

from __future__ import annotations

import operator

import numpy as np

from ..validate import _as_float_array, _check_mask

__all__ = [
    "online_softmax_state",
    "attention_state",
    "merge_attention_states",
    "flash_attention",
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


def flash_attention(q, k, v, mask=None, *, causal=False, block_q=64, block_k=64):
    """Exact scaled dot-product attention, one (block_q, block_k) tile at a time.

    The same result as ``scaled_dot_product_attention(q, k, v, mask,
    fully_masked="zeros")``, without ever forming the (..., Nq, Nk) score
    matrix: each block of ``block_q`` queries keeps a running maximum ``m``,
    a running sum ``l`` and an unnormalised output ``acc``; each block of
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

    Returns
    -------
    (output, None): output (..., Nq, dv); no weights are formed. A query that
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
    nq, nk, dk, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    score_shape = (*lead, nq, nk)
    if mask is not None:
        mask = np.broadcast_to(_check_mask(mask, score_shape), score_shape)  # a view
    dtype = np.result_type(q, k, v, np.float32)
    out = np.zeros((*lead, nq, dv), dtype=dtype)
    scale = 1.0 / float(np.sqrt(dk))
    kt = np.swapaxes(k, -2, -1)  # (..., dk, Nk), a view
    for i0 in range(0, nq, block_q):
        i1 = min(i0 + block_q, nq)
        qi = q[..., i0:i1, :] * scale  # (..., bq, dk)
        m = np.full((*lead, i1 - i0), -np.inf, dtype=dtype)  # running max
        l = np.zeros((*lead, i1 - i0), dtype=dtype)  # running sum
        acc = np.zeros((*lead, i1 - i0, dv), dtype=dtype)  # unnormalised output
        last_pos = nk - nq + (i1 - 1)  # position of this block's last query
        for j0 in range(0, nk, block_k):
            if causal and j0 > last_pos:
                break  # this tile and every one to its right is in the future
            j1 = min(j0 + block_k, nk)
            s = qi @ kt[..., j0:j1]  # (..., bq, bk)
            keep = None
            if causal and j1 - 1 > nk - nq + i0:  # the tile crosses the diagonal
                pos = nk - nq + np.arange(i0, i1)[:, None]  # (bq, 1)
                keep = np.arange(j0, j1)[None, :] <= pos  # (bq, bk)
            if mask is not None:
                tile = mask[..., i0:i1, j0:j1]
                keep = tile if keep is None else keep & tile
            if keep is not None:
                s = np.where(keep, s, -np.inf)
            m_new = np.maximum(m, s.max(axis=-1))  # (..., bq)
            safe = np.where(np.isneginf(m_new), 0.0, m_new)
            alpha = np.exp(m - safe)  # rescales what came before; 0 at the start
            p = np.exp(s - safe[..., None])  # (..., bq, bk)
            l = alpha * l + p.sum(axis=-1)
            acc = alpha[..., None] * acc + p @ v[..., j0:j1, :]  # (..., bq, dv)
            m = m_new
        seen = (l > 0)[..., None]
        np.divide(acc, l[..., None], out=out[..., i0:i1, :], where=seen)
    return out, None
