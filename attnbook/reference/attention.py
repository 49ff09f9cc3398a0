"""Answer key of Parts I and II (chapters 02-07): softmax, scaled dot-product
attention, the causal and padding masks.

Conventions: see :mod:`attnbook.reference`.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..validate import FULLY_MASKED_CHOICES as _FULLY_MASKED_CHOICES
from ..validate import _as_float_array, _check_mask, _lines  # noqa: F401

__all__ = ["softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask"]


def softmax(x, axis=-1, temperature=1.0):
    """Numerically stable softmax of ``x / temperature`` along ``axis``.

    ``softmax(z)_i = exp(z_i) / sum_j exp(z_j)``, the sum running over *every*
    element j of the slice. The maximum of each slice is subtracted before
    ``exp``; softmax is unchanged by adding a constant to a whole slice, so
    this changes nothing but avoids overflow.

    Behaviour at the edges (all tested):

    * ``-inf`` entries get weight exactly 0.
    * A slice whose entries are all ``-inf`` has no softmax: ``ValueError``.
    * ``+inf`` or ``nan`` entries: ``ValueError``.
    * ``temperature`` must be >= 0. ``temperature=0`` returns the limit
      t -> 0+: all the weight on the maximum, split equally between ties
      (a one-hot vector when the maximum is unique).
    * An axis of length 0 returns an empty array of the same shape.
    """
    z = _as_float_array(x, "x")
    t = float(temperature)
    if not np.isfinite(t) or t < 0:
        raise ValueError(
            f"temperature must be a finite number >= 0, got {temperature!r}")
    if z.ndim == 0:
        raise ValueError("softmax needs at least one axis; got a scalar")
    axis = normalize_axis_index(axis, z.ndim)
    if z.shape[axis] == 0:
        return z.copy()
    if np.isnan(z).any() or np.isposinf(z).any():
        raise ValueError("softmax input contains nan or +inf")
    zmax = np.max(z, axis=axis, keepdims=True)
    if np.isneginf(zmax).any():
        raise ValueError(
            "a slice of the softmax input is entirely -inf, so it has\n"
            "no softmax (0/0). In attention, that is a query with every key\n"
            "masked: check the mask (True = may attend)."
        )
    if t == 0:
        hot = (z == zmax).astype(z.dtype)
        return hot / hot.sum(axis=axis, keepdims=True)
    e = np.exp((z - zmax) / t)
    return e / e.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(q, k, v, mask=None, *, fully_masked="raise"):
    """Scaled dot-product attention, ``softmax(q k^T / sqrt(dk)) v``.

    Parameters
    ----------
    q : array (..., Nq, dk)
    k : array (..., Nk, dk)
    v : array (..., Nk, dv)      dv may differ from dk
    mask : bool array broadcastable to (..., Nq, Nk), optional.
        True means the query may attend to that key.
    fully_masked : "raise" (default) or "zeros"
        What to do with a query whose every key is masked: raise
        ``ValueError`` naming the first such query, or give it all-zero
        weights and a zero output.

    Returns
    -------
    output : array (..., Nq, dv)
    weights : array (..., Nq, Nk); each row sums to 1 (or is all zero for a
        fully masked row under ``fully_masked="zeros"``).

    Empty inputs: ``Nq == 0`` returns empty arrays; ``Nk == 0`` means every
    query is fully masked and follows ``fully_masked``; ``dk == 0`` raises.
    """
    if fully_masked not in _FULLY_MASKED_CHOICES:
        raise ValueError(f"fully_masked must be one of {_FULLY_MASKED_CHOICES},\n"
                         f"got {fully_masked!r}")
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., N, d),\n"
                             f"got shape {a.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            "q and k must have the same last dimension dk:\n"
            f"q {q.shape} vs k {k.shape}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "k and v must have the same number of positions Nk:\n"
            f"k {k.shape} vs v {v.shape}"
        )
    try:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(
            "leading (batch/head) dimensions do not broadcast:\n"
            f"q {q.shape}, k {k.shape}, v {v.shape}"
        ) from None
    dk = q.shape[-1]
    if dk == 0:
        raise ValueError(f"dk is 0 (q {q.shape}): there is nothing to compare\n"
                         "and no scale 1/sqrt(dk)")
    nq, nk, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    score_shape = (*lead, nq, nk)

    scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(dk)  # (..., Nq, Nk)
    keep = np.ones(score_shape, dtype=bool)
    if mask is not None:
        keep = np.broadcast_to(_check_mask(mask, score_shape), score_shape)
    empty_rows = ~keep.any(axis=-1)  # (..., Nq)
    if nq and empty_rows.any():
        if fully_masked == "raise":
            where = tuple(int(i) for i in np.argwhere(empty_rows)[0])
            raise ValueError(_lines(
                f"query {where} (index into (..., Nq)) has every key masked,",
                "so its softmax is 0/0;", "pass fully_masked='zeros' to give such rows",
                "zero weight and zero output"))
    if nq == 0:
        return np.zeros((*lead, 0, dv)), np.zeros(score_shape)
    masked = np.where(keep, scores, -np.inf)
    # Fully masked rows: compute on a dummy row of zeros, then zero them out.
    safe = np.where(empty_rows[..., None], 0.0, masked)
    weights = softmax(safe, axis=-1) if nk else np.zeros(score_shape)
    weights = np.where(empty_rows[..., None], 0.0, weights)
    output = weights @ v  # (..., Nq, dv)
    return output, weights


def causal_mask(n_q, n_k=None):
    """Boolean causal mask, True = may attend.

    ``causal_mask(n)`` is the (n, n) lower triangle: query i may attend to
    keys 0..i.

    ``causal_mask(n_q, n_k)`` is (n_q, n_k) and aligned **bottom-right**: the
    queries are the *last* n_q of the n_k positions, so query i sits at
    position ``n_k - n_q + i`` and may attend to keys 0..n_k-n_q+i. This is
    the mask of decoding with a KV cache (one new query against every cached
    key: a row of all True) and of chunked prefill. PyTorch's
    ``scaled_dot_product_attention(is_causal=True)`` aligns top-left instead
    (query i sees keys 0..i whatever n_k is); the two agree only when
    n_q == n_k. When n_q > n_k, the first n_q - n_k queries sit before the
    first key and see nothing: their rows are all False (fully masked).
    """
    n_q = int(n_q)
    n_k = n_q if n_k is None else int(n_k)
    if n_q < 0 or n_k < 0:
        raise ValueError(
            f"sequence lengths must be >= 0, got n_q={n_q}, n_k={n_k}")
    return np.tri(n_q, n_k, k=n_k - n_q, dtype=bool)


def padding_mask(lengths, n):
    """Boolean (B, 1, n) mask hiding key positions at or past each length.

    ``lengths[b]`` real tokens are followed by padding; the result broadcasts
    over queries (the middle axis of size 1) because padding hides *keys*,
    that is, columns of the score matrix.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError("lengths must be 1-D (one per sequence),\n"
                         f"got shape {lengths.shape}")
    if (lengths < 0).any() or (lengths > n).any():
        raise ValueError(f"every length must lie in [0, {n}],\n"
                         f"got {lengths.tolist()}")
    return (np.arange(n)[None, :] < lengths[:, None])[:, None, :]


