"""Answer key of chapter 21 (Part VIII): DeepSeek Sparse Attention (DSA).

DeepSeek-V3.2 keeps its MLA attention but lets each query read only
``top_k`` keys (2,048 in the released model). A cheap *lightning indexer*
picks them: a few small heads score every earlier token,

    I[i, j] = sum_h w[i, h] * ReLU(q_I[i, h] . k_I[j]) / sqrt(d_I),

and each query keeps its ``top_k`` allowed keys with the highest index
score (all its allowed keys if it has fewer). The causal mask is applied to
the index scores *before* the top-k, so a query never spends its budget on
future keys.

:func:`indexer_scores` computes I; :func:`topk_mask` the keys each query
keeps; :func:`topk_sparse_attention` the attention over those keys alone.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _check_mask, _lines, _whole_number
from .attention import scaled_dot_product_attention

__all__ = ["indexer_scores", "topk_mask", "topk_sparse_attention"]


def indexer_scores(q, k, w, mask=None):
    """The lightning indexer's scores (DeepSeek-V3.2).

    q is (..., N_q, H_I, d_I): the indexer's H_I query heads of width d_I
    for each query; k is (..., N_k, d_I): ONE indexer key per token, shared
    by the heads; w is (..., N_q, H_I): each query's weight for each head
    (in DeepSeek-V3.2 computed from the token, ``weights_proj(x)`` times
    H_I^-1/2). Returns (..., N_q, N_k):

        sum_h w[..., i, h] * ReLU(q[..., i, h, :] . k[..., j, :]) / sqrt(d_I)

    ``mask`` (boolean, True = may attend) broadcasts to (..., N_q, N_k);
    a hidden key's score is -inf.
    """
    q, k, w = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (w, "w")))
    if q.ndim < 3 or k.ndim < 2:
        raise ValueError(_lines(
            "q needs (..., N_q, H_I, d_I) and k (..., N_k, d_I), got",
            f"q {q.shape}, k {k.shape}"))
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(_lines(
            f"q {q.shape} and k {k.shape} must have the same width d_I",
            "(last axis)"))
    if w.shape[-2:] != q.shape[-3:-1]:
        raise ValueError(_lines(
            f"w must end in (N_q, H_I) = {q.shape[-3:-1]}, one weight per",
            f"query and head, got {w.shape}"))
    # (..., N_q, H_I, d_I) @ (..., 1, d_I, N_k) -> (..., N_q, H_I, N_k)
    dots = q @ np.swapaxes(k, -1, -2)[..., None, :, :]
    relu = np.maximum(dots, 0.0) / np.sqrt(q.shape[-1])
    scores = (w[..., None, :] @ relu)[..., 0, :]  # (..., N_q, N_k)
    if mask is not None:
        mask = _check_mask(mask, scores.shape)
        scores = np.where(mask, scores, -np.inf)
    return scores


def topk_mask(index_scores, top_k, mask=None):
    """The keys each query keeps: a boolean (..., N_q, N_k), True for the
    ``top_k`` allowed keys with the highest index scores in each row (every
    allowed key if the row has fewer). ``mask`` (True = may attend) is
    applied first. Ties go to the earlier key."""
    s = _as_float_array(index_scores, "index_scores")
    top_k = _whole_number(top_k, "top_k")
    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if s.ndim < 2:
        raise ValueError(_lines(
            f"index_scores must be (..., N_q, N_k), got shape {s.shape}"))
    allowed = np.ones(s.shape, dtype=bool)
    if mask is not None:
        allowed = np.broadcast_to(_check_mask(mask, s.shape), s.shape)
    s = np.where(allowed, s, -np.inf)
    order = np.argsort(-s, axis=-1, kind="stable")        # best first
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(s.shape[-1]), axis=-1)
    return allowed & (rank < top_k)


def topk_sparse_attention(q, k, v, index_scores, top_k, mask=None):
    """Attention over each query's ``top_k`` keys alone (DeepSeek Sparse
    Attention).

    q (..., N_q, d_k), k (..., N_k, d_k), v (..., N_k, d_v) as in
    :func:`scaled_dot_product_attention` (heads, if any, on a leading
    axis); ``index_scores`` broadcasts to (..., N_q, N_k) (one row of index
    scores per query, shared by the heads: (..., 1, N_q, N_k) with a head
    axis). A query attends to its ``top_k`` allowed keys with the highest
    index scores, or to all its allowed keys if it has fewer
    (:func:`topk_mask`). Returns ``(output, weights)``: (..., N_q, d_v) and
    (..., N_q, N_k), a weight 0 on every key the query did not keep.
    """
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    score_shape = np.broadcast_shapes(q.shape[:-1], k.shape[:-2] + (1,)) + (k.shape[-2],)
    s = _as_float_array(index_scores, "index_scores")
    try:
        s = np.broadcast_to(s, score_shape)
    except ValueError:
        raise ValueError(_lines(
            f"index_scores {s.shape} must broadcast to the scores",
            f"{score_shape} (..., N_q, N_k)")) from None
    keep = topk_mask(s, top_k, mask)
    return scaled_dot_product_attention(q, k, v, mask=keep)
