"""Part VIII: keeping attention well-behaved (chapter 20).

* :func:`soft_cap`: Gemma 2's logit soft-capping, ``cap * tanh(s / cap)``.
* :func:`split_query_gate`: Qwen3-Next's ``q_proj`` output, per head
  ``[query | gate]``, split into the queries and the gate.
* :func:`gated_attention_output`: ``(o * sigmoid(gate)) @ w_o``, the gate
  applied *before* the output projection.
* :func:`qk_norm_attention`: one attention layer with QK-norm (RMSNorm on
  q and k before RoPE, per head as in Qwen3, or over the whole projection
  as in OLMo 2), optionally with the output gate of Qwen3-Next and with
  soft-capped scores.

Conventions as in :func:`attnbook.reference.llama_attention`: ``x @ W``
(PyTorch's ``nn.Linear`` stores the transpose), split-half RoPE.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array
from .attention import causal_mask, softmax
from .mla import rms_norm
from .multihead import merge_heads, split_heads
from .rope import rope

__all__ = ["soft_cap", "split_query_gate", "gated_attention_output",
           "qk_norm_attention"]


def soft_cap(s, cap):
    """Soft-capping: ``cap * tanh(s / cap)``, elementwise.

    Near 0 it is the identity (slope 1); it never leaves [-cap, cap]. Gemma 2
    applies it to the attention scores (``attn_logit_softcapping`` = 50 in
    its config.json) and to the final logits (30). ``cap`` must be > 0.
    """
    s = _as_float_array(s, "s")
    cap = float(cap)
    if not cap > 0 or not np.isfinite(cap):
        raise ValueError(f"cap must be a finite number > 0, got {cap!r}")
    return cap * np.tanh(s / cap)


def split_query_gate(qg, n_heads):
    """Split Qwen3-Next's ``q_proj`` output into queries and gate.

    ``qg`` is (..., N, H * 2 * hd): for each head, hd query columns then hd
    gate columns (``view(..., H, 2 * hd)`` then ``chunk(2, -1)``, as in
    ``Qwen3NextAttention``). Returns ``(q, gate)``, each (..., N, H * hd),
    heads side by side as the other projections have them.
    """
    qg = _as_float_array(qg, "qg")
    n_heads = int(n_heads)
    if qg.ndim < 2 or n_heads < 1 or qg.shape[-1] % (2 * n_heads):
        raise ValueError(f"qg must be (..., N, H * 2 * hd) with H = {n_heads},"
                         f" got shape {qg.shape}")
    hd = qg.shape[-1] // (2 * n_heads)
    per_head = qg.reshape(*qg.shape[:-1], n_heads, 2 * hd)
    q, gate = per_head[..., :hd], per_head[..., hd:]
    return (q.reshape(*qg.shape[:-1], n_heads * hd),
            gate.reshape(*qg.shape[:-1], n_heads * hd))


def gated_attention_output(o, gate, w_o):
    """Qwen3-Next's output gate: ``(o * sigmoid(gate)) @ w_o``.

    o, gate : (..., N, H * hd), the merged heads' outputs and the gate's
        logits (one per output entry, so each head and each of its columns
        has its own gate, computed from the token's own input).
    w_o : (H * hd, D), the output projection. The gate acts before it.
    """
    o = _as_float_array(o, "o")
    gate = _as_float_array(gate, "gate")
    w_o = _as_float_array(w_o, "w_o")
    if gate.shape != o.shape:
        raise ValueError(f"gate {gate.shape} must have the shape of o {o.shape}")
    if w_o.ndim != 2 or w_o.shape[0] != o.shape[-1]:
        raise ValueError(f"w_o must be (H * hd, D) with H * hd = {o.shape[-1]},"
                         f" got {w_o.shape}")
    sigmoid = 0.5 * (1.0 + np.tanh(0.5 * gate))  # 1/(1+e^-g), no overflow
    return (o * sigmoid) @ w_o


def qk_norm_attention(x, w_q, w_k, w_v, w_o, q_norm, k_norm, n_heads,
                      n_kv_heads, positions=None, *, base=10000.0, eps=1e-6,
                      per_head=True, gated=False, cap=None, causal=True):
    """One attention layer with QK-norm: Qwen3, OLMo 2, Qwen3-Next.

    Parameters
    ----------
    x : (..., N, D) the layer's input.
    w_q : (D, H_q * hd), or (D, H_q * 2 * hd) when ``gated`` (per head
        ``[query | gate]``, see :func:`split_query_gate`).
    w_k, w_v : (D, H_kv * hd).  w_o : (H_q * hd, D).
    q_norm, k_norm : the RMSNorms' weights: (hd,) when ``per_head`` (Qwen3,
        Qwen3-Next: one norm over each head's hd entries), else
        (H_q * hd,) and (H_kv * hd,) (OLMo 2: one norm over the whole
        projection). Qwen3-Next stores ``weight`` and multiplies by
        ``1 + weight``: pass ``1 + weight``.
    n_heads, n_kv_heads : H_q and H_kv, H_q a multiple of H_kv.
    positions : (N,) RoPE positions, default ``arange(N)``; ``base`` is
        RoPE's base (``rope_theta``). RoPE rotates the whole head.
    cap : if given, the scaled scores are soft-capped, ``cap*tanh(s/cap)``,
        before the mask and the softmax (Gemma 2's order).

    Steps: q, k, v = x W; RMSNorm on q and k (per head or whole); RoPE on
    q and k; scores q k^T / sqrt(hd) (query head h reads KV head
    ``h // (H_q // H_kv)``), optionally capped; causal mask; softmax;
    weights @ v; merge heads; times sigmoid(gate) if ``gated``; @ w_o.
    Returns ``(output (..., N, D), weights (..., H_q, N, N))``.
    """
    x = _as_float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must be (..., N, D), got shape {x.shape}")
    n, d = x.shape[-2:]
    n_heads, n_kv_heads = int(n_heads), int(n_kv_heads)
    if n_heads < 1 or n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"H_q = {n_heads} must be a multiple of H_kv = "
                         f"{n_kv_heads}")
    w_q = _as_float_array(w_q, "w_q")
    width = n_heads * (2 if gated else 1)
    if w_q.ndim != 2 or w_q.shape[0] != d or w_q.shape[1] % width:
        what = "H_q * 2 * hd" if gated else "H_q * hd"
        raise ValueError(f"w_q must be (D, {what}) with D = {d}, H_q = "
                         f"{n_heads}, got {w_q.shape}")
    hd = w_q.shape[1] // width
    want = {"w_k": (d, n_kv_heads * hd), "w_v": (d, n_kv_heads * hd),
            "w_o": (n_heads * hd, d),
            "q_norm": (hd,) if per_head else (n_heads * hd,),
            "k_norm": (hd,) if per_head else (n_kv_heads * hd,)}
    ws = {}
    for name, w in (("w_k", w_k), ("w_v", w_v), ("w_o", w_o),
                    ("q_norm", q_norm), ("k_norm", k_norm)):
        ws[name] = _as_float_array(w, name)
        if ws[name].shape != want[name]:
            raise ValueError(f"{name} must have shape {want[name]} (hd = {hd},"
                             f" H_q = {n_heads}, H_kv = {n_kv_heads}), got "
                             f"{ws[name].shape}")
    q = x @ w_q                                   # (..., N, H_q * hd [* 2])
    gate = None
    if gated:
        q, gate = split_query_gate(q, n_heads)    # (..., N, H_q * hd) each
    k, v = x @ ws["w_k"], x @ ws["w_v"]           # (..., N, H_kv * hd)
    if not per_head:                              # OLMo 2: whole projection
        q = rms_norm(q, ws["q_norm"], eps)
        k = rms_norm(k, ws["k_norm"], eps)
    q, k, v = (split_heads(q, n_heads), split_heads(k, n_kv_heads),
               split_heads(v, n_kv_heads))        # (..., H, N, hd)
    if per_head:                                  # Qwen3: each head alone
        q = rms_norm(q, ws["q_norm"], eps)
        k = rms_norm(k, ws["k_norm"], eps)
    pos = np.arange(n) if positions is None else np.asarray(positions)
    q, k = rope(q, pos, base=base), rope(k, pos, base=base)
    group = n_heads // n_kv_heads
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(hd)  # (..., H_q, N, N)
    if cap is not None:
        s = soft_cap(s, cap)
    if causal:
        s = np.where(causal_mask(n), s, -np.inf)
    weights = softmax(s)
    o = merge_heads(weights @ v)                  # (..., N, H_q * hd)
    if gated:
        return gated_attention_output(o, gate, ws["w_o"]), weights
    return o @ ws["w_o"], weights
