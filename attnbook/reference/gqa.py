"""Answer key of chapter 15: grouped-query attention, and a whole attention
layer as in LLaMA 3, Qwen2 and Mistral.

* :func:`grouped_query_attention`: multi-head, grouped-query and multi-query
  attention in one function, through the number of key/value heads.
* :func:`llama_attention`: projections (with Qwen2's optional q/k/v biases),
  RoPE on queries and keys, grouped-query attention with a causal mask,
  output projection.

Masks are boolean with True = may attend; a fully masked query raises unless
``fully_masked="zeros"``.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _check_mask
from .attention import causal_mask, scaled_dot_product_attention
from .kv_cache import sliding_window_mask  # noqa: F401
from .multihead import merge_heads, split_heads
from .rope import rope

__all__ = ["grouped_query_attention", "llama_attention"]


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
