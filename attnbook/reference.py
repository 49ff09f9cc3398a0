"""The answer key: clean, documented reference implementations.

Chapters write the attention math themselves, line by line; at the end they
assert that their version agrees with the functions here. Everything is plain
NumPy.

Conventions used throughout the book
------------------------------------
* Shapes: queries ``(..., Nq, dk)``, keys ``(..., Nk, dk)``, values
  ``(..., Nk, dv)``; any leading batch or head dimensions, broadcast against
  each other.
* Masks are boolean and **True means "may attend"** (the polarity of
  ``torch.nn.functional.scaled_dot_product_attention``). A mask must broadcast
  to the score shape ``(..., Nq, Nk)``.
* A query row whose every key is masked has no softmax (the denominator is a
  sum of nothing). By default that is an error (``fully_masked="raise"``);
  pass ``fully_masked="zeros"`` to get all-zero weights and a zero output for
  such rows instead. The masking chapter explains the choice.
* Multi-head attention takes one mask rule, :func:`mask_for_heads`, shared
  by :func:`multihead_attention`, :func:`multihead_cross_attention` and
  ``attnbook.torch_attention.MultiHeadSelfAttention``.
* Error messages fit in 79 characters per line, ``ValueError: `` included,
  since they appear in the book's outputs.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

__all__ = [
    "softmax",
    "scaled_dot_product_attention",
    "causal_mask",
    "padding_mask",
    "split_heads",
    "merge_heads",
    "multihead_attention",
    "multihead_cross_attention",
    "mask_for_heads",
]

_FULLY_MASKED_CHOICES = ("raise", "zeros")


def _as_float_array(x, name):
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype}")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    return arr


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
            "no softmax (0/0); in attention, a query with every key masked"
        )
    if t == 0:
        hot = (z == zmax).astype(z.dtype)
        return hot / hot.sum(axis=axis, keepdims=True)
    e = np.exp((z - zmax) / t)
    return e / e.sum(axis=axis, keepdims=True)


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


def _check_weight(w, name, shape):
    w = _as_float_array(w, name)
    if w.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {w.shape}")
    return w


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


# The answer key of the later parts lives in modules of their own (one per part of
# the book); chapters import everything from here.
from .reference_learn import attention_backward, cross_entropy  # noqa: E402
from .reference_llm import (  # noqa: E402
    grouped_query_attention, llama_attention, rope, rope_angles, sliding_window_mask)
from .reference_mla import MLAWeights, mla_attention, rms_norm  # noqa: E402
from .reference_fast import (  # noqa: E402
    attention_state, flash_attention, merge_attention_states, online_softmax_state)

__all__ += ["attention_backward", "cross_entropy"]                       # Part V
__all__ += ["rope", "rope_angles", "grouped_query_attention", "llama_attention",
            "sliding_window_mask", "rms_norm", "MLAWeights", "mla_attention"]  # Part VI
__all__ += ["flash_attention", "online_softmax_state", "attention_state",
            "merge_attention_states"]                                    # Part VII
