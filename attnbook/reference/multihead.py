"""Answer key of Part III (chapters 08-09): heads split and merged, the one
mask rule of multi-head attention, multi-head self- and cross-attention.

Conventions: see :mod:`attnbook.reference`.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _check_mask, _check_mask_shape, _check_weight, _lines
from .attention import scaled_dot_product_attention

__all__ = ["split_heads", "merge_heads", "mask_for_heads", "multihead_attention",
           "multihead_cross_attention"]


def split_heads(x, n_heads):
    """(..., N, D) -> (..., NH, N, HS) with HS = D // NH: reshape, then swap N and NH."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, D), got shape {x.shape}")
    d = x.shape[-1]
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"D = {d} (x {x.shape}) is not divisible\n"
                         f"by n_heads = {n_heads}")
    x = x.reshape(*x.shape[:-1], n_heads, d // n_heads)  # (..., N, NH, HS)
    return np.swapaxes(x, -3, -2)  # (..., NH, N, HS)


def merge_heads(x):
    """(..., NH, N, HS) -> (..., N, NH*HS): the inverse of :func:`split_heads`."""
    x = np.asarray(x)
    if x.ndim < 3:
        raise ValueError(f"x must be (..., NH, N, HS), got shape {x.shape}")
    x = np.swapaxes(x, -3, -2)  # (..., N, NH, HS)
    return x.reshape(*x.shape[:-2], x.shape[-2] * x.shape[-1])


_MASK_RULE = (
    "a multi-head mask is one head's (..., Nq, Nk), e.g. (Nq, Nk),\n"
    "(B, Nq, Nk), (B, 1, Nk), or per head (..., NH, Nq, Nk), e.g.\n"
    "(B, 1, 1, Nk), (B, 1, Nq, Nk), (B, NH, Nq, Nk)"
)


def mask_for_heads(mask, batch_shape, n_heads, n_q, n_k):
    """The one mask rule of multi-head attention, NumPy and PyTorch alike.

    Used by :func:`multihead_attention`, :func:`multihead_cross_attention`
    and ``attnbook.torch_attention.MultiHeadSelfAttention``. The scores have
    shape ``(*batch, NH, Nq, Nk)``; the mask is boolean, True = may attend,
    and is given in one of two forms, told apart by its number of axes:

    * **one head's form**, at most ``len(batch) + 2`` axes, broadcasting to
      ``(*batch, Nq, Nk)``: ``(Nq, Nk)`` (a causal mask), ``(B, Nq, Nk)``,
      ``(B, 1, Nk)`` (a padding mask), ``(B, Nq, 1)``. The same mask is used
      for every head: a head axis is inserted before ``Nq``, so a
      ``(B, 1, Nk)`` mask can never be read as one mask per head, even when
      B == NH.
    * **the multi-head form**, exactly ``len(batch) + 3`` axes, broadcasting
      to ``(*batch, NH, Nq, Nk)``: ``(B, 1, 1, Nk)`` (a padding mask, as the
      masking chapter builds it), ``(B, 1, Nq, Nk)``, or one mask per head,
      ``(B, NH, Nq, Nk)``.

    With no batch axis (x of shape ``(N, D)``), ``(Nq, Nk)`` is one head's
    form and ``(NH, Nq, Nk)`` the per-head form. Any other shape raises
    ``ValueError`` quoting the mask's shape as the caller gave it.

    Works on NumPy arrays and on torch tensors (only ``.ndim``, ``.shape``
    and indexing are used); returns a view that broadcasts to the scores.
    """
    if mask is None:
        return None
    batch_shape = tuple(batch_shape)
    target = (*batch_shape, int(n_heads), int(n_q), int(n_k))
    given = tuple(mask.shape)
    if len(given) > len(batch_shape) + 3:
        raise ValueError(_lines(f"mask of shape {given}", "has too many axes",
                                f"for the scores {target};") + "\n" + _MASK_RULE)
    one_head = len(given) <= len(batch_shape) + 2
    shaped = mask[..., None, :, :] if one_head and len(given) >= 2 else mask
    try:
        fits = np.broadcast_shapes(tuple(shaped.shape), target) == target
    except ValueError:
        fits = False
    if not fits:
        form = "one head's" if one_head else "per-head"
        raise ValueError(_lines(f"mask of shape {given}", f"({form} form)", "does not fit",
                                f"the scores {target};") + "\n" + _MASK_RULE)
    return shaped


def _as_mask(mask):
    if mask is None:
        return None
    m = np.asarray(mask)
    _check_mask(m, m.shape)  # boolean, with the book's message otherwise
    return m


def multihead_attention(x, w_qkv, w_o, n_heads, mask=None, *, fully_masked="raise"):
    """Multi-head self-attention, vectorised across heads.

    x : (..., N, D); w_qkv : (D, 3D), the q, k and v projections side by side
    in that order; w_o : (D, D); D must be divisible by ``n_heads``.
    mask : bool, True = may attend; the shapes of :func:`mask_for_heads`:
    one head's (N, N), (B, N, N), (B, 1, N) (``causal_mask(N)``,
    ``padding_mask(lengths, N)``), the same for every head; or the
    multi-head (B, 1, 1, N), (B, 1, N, N), (B, NH, N, N).
    Returns (..., N, D).
    """
    x = _as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, D), got shape {x.shape}")
    d = x.shape[-1]
    w_qkv = _check_weight(w_qkv, "w_qkv", (d, 3 * d))
    w_o = _check_weight(w_o, "w_o", (d, d))
    q, k, v = np.split(x @ w_qkv, 3, axis=-1)  # 3 x (..., N, D)
    q, k, v = (split_heads(t, n_heads) for t in (q, k, v))  # (..., NH, N, HS)
    m = mask_for_heads(_as_mask(mask), x.shape[:-2], n_heads, x.shape[-2], x.shape[-2])
    out, _ = scaled_dot_product_attention(q, k, v, m, fully_masked=fully_masked)
    return merge_heads(out) @ w_o  # (..., N, D)


def multihead_cross_attention(x_q, x_kv, w_q, w_kv, w_o, n_heads, mask=None, *, fully_masked="raise"):
    """Multi-head cross-attention: queries from ``x_q``, keys and values from ``x_kv``.

    x_q : (..., Nq, D); x_kv : (..., Nk, D); w_q : (D, D); w_kv : (D, 2D), the
    k and v projections side by side in that order; w_o : (D, D).
    mask : bool, True = may attend; the shapes of :func:`mask_for_heads`:
    one head's (Nq, Nk), (B, Nq, Nk), (B, 1, Nk), the same for every head;
    or the multi-head (B, 1, 1, Nk), (B, 1, Nq, Nk), (B, NH, Nq, Nk).
    Returns (..., Nq, D).
    """
    x_q = _as_float_array(x_q, "x_q")
    x_kv = _as_float_array(x_kv, "x_kv")
    if x_q.ndim < 2 or x_kv.ndim < 2:
        raise ValueError("x_q and x_kv must be (..., N, D),\n"
                         f"got {x_q.shape} and {x_kv.shape}")
    d = x_q.shape[-1]
    if x_kv.shape[-1] != d:
        raise ValueError("x_q and x_kv must have the same width D:\n"
                         f"{x_q.shape} vs {x_kv.shape}")
    w_q = _check_weight(w_q, "w_q", (d, d))
    w_kv = _check_weight(w_kv, "w_kv", (d, 2 * d))
    w_o = _check_weight(w_o, "w_o", (d, d))
    q = split_heads(x_q @ w_q, n_heads)  # (..., NH, Nq, HS)
    k, v = (split_heads(t, n_heads) for t in np.split(x_kv @ w_kv, 2, axis=-1))  # (..., NH, Nk, HS)
    try:
        batch = np.broadcast_shapes(x_q.shape[:-2], x_kv.shape[:-2])
    except ValueError:
        raise ValueError("the batch axes of x_q and x_kv do not broadcast:\n"
                         f"{x_q.shape} vs {x_kv.shape}") from None
    m = mask_for_heads(_as_mask(mask), batch, n_heads, x_q.shape[-2], x_kv.shape[-2])
    out, _ = scaled_dot_product_attention(q, k, v, m, fully_masked=fully_masked)
    return merge_heads(out) @ w_o  # (..., Nq, D)


