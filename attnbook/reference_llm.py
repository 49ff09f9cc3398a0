"""The answer key of the part "Attention in today's LLMs".

Chapters import these names from :mod:`attnbook.reference`; they live here so
that the answer key of each part of the book stays a file of its own.

* :func:`rope`: rotary position embedding (Su et al., RoFormer), in both of
  the pairing conventions found in real code.
* :func:`grouped_query_attention`: multi-head, grouped-query and multi-query
  attention in one function, through the number of key/value heads.
* :func:`llama_attention`: a whole attention layer as in LLaMA 3, Qwen2 and
  Mistral: projections (with Qwen2's optional q/k/v biases), RoPE on queries
  and keys, grouped-query attention with a causal mask, output projection.

Conventions are those of :mod:`attnbook.reference`: masks are boolean with
True = may attend, and a fully masked query raises unless
``fully_masked="zeros"``.
"""

from __future__ import annotations

import numpy as np

from .reference import (
    _as_float_array,
    _check_mask,
    causal_mask,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)

__all__ = ["rope_angles", "rope", "grouped_query_attention", "llama_attention"]


def rope_angles(positions, d, *, base=10000.0):
    """The rotation angles of RoPE, ``positions[n] * theta_i``, shape (N, d/2).

    ``theta_i = base ** (-2i / d)`` for i = 0 .. d/2 - 1: pair 0 turns fastest
    (one radian per position), the last pair slowest.
    """
    d = int(d)
    if d <= 0 or d % 2:
        raise ValueError(f"RoPE rotates pairs of coordinates: d must be even "
                         f"and > 0, got d = {d}")
    base = float(base)
    if not np.isfinite(base) or base <= 1:
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    pos = _as_float_array(positions, "positions")
    theta = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)  # (d/2,)
    return pos[..., None] * theta  # (..., N, d/2)


def rope(x, positions, *, base=10000.0, interleaved=False):
    """Rotate pairs of coordinates of ``x`` by the angle ``position * theta_i``.

    Parameters
    ----------
    x : array (..., N, d), d even; queries or keys (one head or many).
    positions : array (N,) (or any shape that broadcasts to x's (..., N)):
        the position of each of the N rows, usually ``np.arange(N)``, or
        ``np.arange(start, start + N)`` for tokens that come after a cache.
    base : the base of the frequencies, ``theta_i = base ** (-2i / d)``:
        10,000 in RoFormer, 500,000 in LLaMA 3, 1,000,000 in Qwen2.
    interleaved : which coordinates form pair i.
        ``False`` (default): split halves, ``(x[i], x[i + d/2])``, as Hugging
        Face's ``rotate_half`` and GPT-NeoX do.
        ``True``: neighbours, ``(x[2i], x[2i+1])``, as Meta's LLaMA reference
        code (its complex-number form), GPT-J and RoFormer do.

    Each pair (a, b) becomes (a cos φ - b sin φ, a sin φ + b cos φ) with
    φ = position * theta_i. Returns an array of x's shape. Position 0 is the
    identity. The score between a query rotated at m and a key rotated at n
    depends on m - n only.
    """
    x = _as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, d), got shape {x.shape}")
    n, d = x.shape[-2], x.shape[-1]
    pos = np.asarray(positions)
    if pos.ndim == 0 or pos.shape[-1] != n:
        raise ValueError(f"positions must give one position per row of x: x "
                         f"{x.shape} has N = {n}, positions {pos.shape}")
    angles = rope_angles(pos, d, base=base)  # (..., N, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    if interleaved:
        a, b = x[..., 0::2], x[..., 1::2]  # (..., N, d/2) each
        out = np.empty(np.broadcast_shapes(x.shape, cos.shape[:-1] + (d,)))
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    a, b = x[..., : d // 2], x[..., d // 2:]  # (..., N, d/2) each
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def grouped_query_attention(q, k, v, mask=None, *, fully_masked="raise"):
    """Attention with fewer key/value heads than query heads.

    Parameters
    ----------
    q : array (..., H_q, N_q, d_k)
    k : array (..., H_kv, N_k, d_k)
    v : array (..., H_kv, N_k, d_v)
        H_q must be a multiple of H_kv. H_kv == H_q is multi-head attention,
        1 < H_kv < H_q grouped-query attention (GQA), H_kv == 1 multi-query
        attention (MQA). Query head h reads key/value head
        ``h // (H_q // H_kv)``: consecutive query heads share one KV head, as
        in LLaMA, Qwen2 and Mistral (``repeat_interleave``, not ``repeat``).
    mask : bool, True = may attend, broadcastable to the scores'
        (..., H_q, N_q, N_k), as in
        :func:`~attnbook.reference.scaled_dot_product_attention`.
    fully_masked : "raise" or "zeros", as there.

    Returns
    -------
    output : (..., H_q, N_q, d_v)
    weights : (..., H_q, N_q, N_k)

    The KV heads are never copied: q is reshaped to
    (..., H_kv, group, N_q, d_k) and k, v get a size-1 group axis that
    broadcasting stretches.
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, a in (("q", q), ("k", k), ("v", v)):
        if a.ndim < 3:
            raise ValueError(f"{name} must be (..., heads, N, d), got shape "
                             f"{a.shape}")
    h_q, h_kv = q.shape[-3], k.shape[-3]
    if v.shape[-3] != h_kv:
        raise ValueError(f"k and v must have the same number of heads: "
                         f"k {k.shape}, v {v.shape}")
    if h_kv == 0 or h_q % h_kv:
        raise ValueError(f"the number of query heads H_q = {h_q} must be a "
                         f"multiple of the number of key/value heads "
                         f"H_kv = {h_kv}")
    try:
        lead = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
    except ValueError:
        raise ValueError(f"leading (batch) dimensions do not broadcast: "
                         f"q {q.shape}, k {k.shape}, v {v.shape}") from None
    group = h_q // h_kv
    n_q, n_k = q.shape[-2], k.shape[-2]
    # (..., H_kv, group, N_q, d_k): query heads g*group .. g*group+group-1
    # share KV head g
    q5 = q.reshape(*q.shape[:-3], h_kv, group, n_q, q.shape[-1])
    k5, v5 = k[..., None, :, :], v[..., None, :, :]  # (..., H_kv, 1, N_k, d)
    m5 = None
    if mask is not None:
        score_shape = (*lead, h_q, n_q, n_k)
        m = np.broadcast_to(_check_mask(mask, score_shape), score_shape)
        empty = ~m.any(axis=-1)  # (..., H_q, N_q)
        if fully_masked == "raise" and n_q and empty.any():
            where = tuple(int(i) for i in np.argwhere(empty)[0])
            raise ValueError(
                f"query {where} (index into (..., H_q, N_q)) has every key "
                "masked, so its softmax is 0/0; pass fully_masked='zeros' to "
                "give such rows zero weight and zero output")
        m5 = m.reshape(*lead, h_kv, group, n_q, n_k)
    out, w = scaled_dot_product_attention(q5, k5, v5, m5, fully_masked=fully_masked)
    # back to one head axis: (..., H_q, N_q, d_v) and (..., H_q, N_q, N_k)
    out = out.reshape(*out.shape[:-4], h_q, n_q, out.shape[-1])
    w = w.reshape(*w.shape[:-4], h_q, n_q, n_k)
    return out, w


# --- The KV cache chapter (14): sliding-window attention -------------------
# (a section of its own, so that it merges cleanly with the other chapters'
# additions to this module)

import operator  # noqa: E402

__all__ += ["sliding_window_mask"]


def _whole_number(value, name):
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None


def sliding_window_mask(n_q, n_k, window):
    """Boolean sliding-window causal mask (n_q, n_k), True = may attend.

    Aligned bottom-right like :func:`~attnbook.reference.causal_mask`: query
    i sits at position ``p = n_k - n_q + i`` and may attend to the ``window``
    keys at positions ``p - window + 1 .. p``, itself included (fewer near
    the start). This is the mask of Mistral 7B (``"sliding_window": 4096``)
    and of Hugging Face's ``sliding_window_causal_mask_function``
    (``q_idx - window < kv_idx <= q_idx``), and what a rolling-buffer cache
    of ``window`` slots can hold.

    ``window >= n_k`` gives the plain causal mask. ``window`` must be an
    integer >= 1 (a window of 0 would hide every key). When n_q > n_k, the
    first n_q - n_k rows sit before the first key and are all False.
    """
    n_q, n_k = _whole_number(n_q, "n_q"), _whole_number(n_k, "n_k")
    window = _whole_number(window, "window")
    if n_q < 0 or n_k < 0:
        raise ValueError(f"sequence lengths must be >= 0, got n_q={n_q}, "
                         f"n_k={n_k}")
    if window < 1:
        raise ValueError(f"window must be >= 1 (the query sees itself), got "
                         f"window={window}")
    pos = n_k - n_q + np.arange(n_q)[:, None]  # (n_q, 1): position of query i
    key = np.arange(n_k)[None, :]  # (1, n_k)
    return (key <= pos) & (key > pos - window)  # (n_q, n_k)
def llama_attention(x, w_q, w_k, w_v, w_o, n_heads, n_kv_heads, positions=None,
                    *, base=10000.0, b_q=None, b_k=None, b_v=None, causal=True,
                    mask=None, interleaved=False, fully_masked="raise"):
    """One attention layer of a LLaMA-style decoder (LLaMA 3, Qwen2, Mistral).

    Parameters
    ----------
    x : (..., N, D) the layer's input (after its RMSNorm, which is not here).
    w_q : (D, H_q * hd); w_k, w_v : (D, H_kv * hd); w_o : (H_q * hd, D).
        The book's convention ``x @ W``: PyTorch's ``nn.Linear`` stores the
        transpose, so ``w_q = q_proj.weight.T``.
    n_heads, n_kv_heads : H_q and H_kv; H_q a multiple of H_kv. The head
        size hd is ``w_q.shape[1] // n_heads``.
    positions : (N,) the token positions for RoPE; default ``arange(N)``.
    base : RoPE's base (``rope_theta`` in a model's config.json).
    b_q, b_k, b_v : optional biases of the three projections, shapes
        (H_q * hd,), (H_kv * hd,), (H_kv * hd,) (Qwen2 has them; LLaMA and
        Mistral do not). The output projection has no bias.
    causal : apply the causal mask (bottom-right aligned, as in
        :func:`~attnbook.reference.causal_mask`); default True.
    mask : an extra boolean mask (True = may attend), broadcastable to
        (..., N, N) and the same for every head; combined with the causal
        mask by "and".
    interleaved : RoPE pairing; False (split halves) is what Hugging Face's
        checkpoints expect.
    fully_masked : as in :func:`grouped_query_attention`.

    Steps: q, k, v = x W (+ b); split into heads, (..., H, N, hd); RoPE on q
    and k; grouped-query attention (query head h reads KV head
    ``h // (H_q // H_kv)``), scaled by 1/sqrt(hd); merge the heads; @ w_o.
    Returns (..., N, D).
    """
    x = _as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, D), got shape {x.shape}")
    n, d = x.shape[-2], x.shape[-1]
    n_heads, n_kv_heads = int(n_heads), int(n_kv_heads)
    if n_heads < 1 or n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"the number of query heads H_q = {n_heads} must be "
                         f"a multiple of the number of key/value heads "
                         f"H_kv = {n_kv_heads}")
    w_q = _as_float_array(w_q, "w_q")
    if w_q.ndim != 2 or w_q.shape[0] != d or w_q.shape[1] % n_heads:
        raise ValueError(f"w_q must be (D, H_q * hd) = ({d}, {n_heads} * hd),"
                         f" got {w_q.shape}")
    hd = w_q.shape[1] // n_heads
    shapes = {"w_k": (d, n_kv_heads * hd), "w_v": (d, n_kv_heads * hd),
              "w_o": (n_heads * hd, d)}
    ws = {}
    for name, w in (("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        ws[name] = _as_float_array(w, name)
        if ws[name].shape != shapes[name]:
            raise ValueError(f"{name} must have shape {shapes[name]} (D = {d},"
                             f" hd = {hd}, H_q = {n_heads}, H_kv = "
                             f"{n_kv_heads}), got {ws[name].shape}")
    q, k, v = x @ w_q, x @ ws["w_k"], x @ ws["w_v"]  # (..., N, H * hd)
    for name, b, t in (("b_q", b_q, q), ("b_k", b_k, k), ("b_v", b_v, v)):
        if b is not None:
            b = _as_float_array(b, name)
            if b.shape != t.shape[-1:]:
                raise ValueError(f"{name} must have shape {t.shape[-1:]}, got"
                                 f" {b.shape}")
            t += b
    q = split_heads(q, n_heads)  # (..., H_q, N, hd)
    k = split_heads(k, n_kv_heads)  # (..., H_kv, N, hd)
    v = split_heads(v, n_kv_heads)  # (..., H_kv, N, hd)
    pos = np.arange(n) if positions is None else np.asarray(positions)
    q = rope(q, pos, base=base, interleaved=interleaved)
    k = rope(k, pos, base=base, interleaved=interleaved)
    m = causal_mask(n) if causal else None
    if mask is not None:
        extra = _check_mask(mask, (*x.shape[:-2], n, n))
        m = extra if m is None else (extra & m)
    if m is not None:
        m = np.asarray(m)[..., None, :, :]  # the same for every head
    out, _ = grouped_query_attention(q, k, v, m, fully_masked=fully_masked)
    return merge_heads(out) @ ws["w_o"]  # (..., N, D)
