"""Answer key of chapter 21b (Part VIII): DeepSeek-V4's compressed attention.

DeepSeek-V4 keeps ONE key-value head per layer, read as both key and value,
and adds to a sliding window of recent tokens a *compressed* history:

* Heavily Compressed Attention (HCA): every ``rate`` tokens (m' = 128) are
  pooled into one entry, per channel, by a softmax over the window of learned
  gate logits plus a position bias: :func:`compress_kv`.
* Compressed Sparse Attention (CSA): windows of ``rate`` = 4 tokens that
  overlap their predecessor (each entry pools 2 * rate tokens:
  :func:`compress_kv_overlapping`), and a lightning indexer (chapter 21)
  that keeps each query's top-k entries.

Query t may read entry w once the whole window w lies at or before t:
:func:`compressed_causal_mask`. :func:`deepseek_v4_attention` is one whole
attention layer, tested equal to ``transformers``' ``DeepseekV4Attention``.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _lines, _whole_number
from .mla import rms_norm
from .kv_cache import sliding_window_mask
from .rope import rope
from .sinks import attention_with_sinks
from .sparse import indexer_scores, topk_mask

__all__ = ["compress_kv", "compress_kv_overlapping", "compressed_causal_mask",
           "rope_tail", "grouped_output_projection", "deepseek_v4_attention"]


def _rate(rate):
    rate = _whole_number(rate, "rate")
    if rate < 1:
        raise ValueError(f"rate must be >= 1 (tokens per entry), got {rate}")
    return rate


def _window_softmax(z):
    """Softmax over axis -2 (the tokens of a window), channel by channel."""
    z = z - z.max(axis=-2, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-2, keepdims=True)


def compress_kv(kv, gate_logits, position_bias, rate):
    """DeepSeek-V4's compressor: one entry per window of ``rate`` tokens.

    kv and gate_logits are (..., N, d); position_bias is (rate, d), one
    learned bias per slot of the window and channel. For window w (tokens
    w*rate .. w*rate + rate - 1) and channel c:

        p[j, c] = softmax over j of (gate_logits[w*rate + j, c]
                                     + position_bias[j, c])
        out[w, c] = sum_j p[j, c] * kv[w*rate + j, c]

    The softmax runs over the window's tokens, separately for each channel.
    A last incomplete window is dropped. Returns (..., N // rate, d).
    """
    rate = _rate(rate)
    kv = _as_float_array(kv, "kv")
    z = _as_float_array(gate_logits, "gate_logits")
    bias = _as_float_array(position_bias, "position_bias")
    if kv.ndim < 2:
        raise ValueError(f"kv must be (..., N, d), got shape {kv.shape}")
    if z.shape != kv.shape:
        raise ValueError(_lines(
            f"gate_logits {z.shape} must have kv's shape {kv.shape}:",
            "one gate logit per token and channel"))
    if bias.shape != (rate, kv.shape[-1]):
        raise ValueError(_lines(
            f"position_bias must be (rate, d) = ({rate}, {kv.shape[-1]}),",
            f"got {bias.shape}"))
    n_win = kv.shape[-2] // rate
    lead = kv.shape[:-2]
    shape = lead + (n_win, rate, kv.shape[-1])
    kv_w = kv[..., : n_win * rate, :].reshape(shape)  # (..., W, rate, d)
    z_w = z[..., : n_win * rate, :].reshape(shape) + bias  # (..., W, rate, d)
    return (_window_softmax(z_w) * kv_w).sum(axis=-2)  # (..., W, d)


def compress_kv_overlapping(kv, gate_logits, position_bias, rate):
    """CSA's compressor: windows of stride ``rate`` and width 2 * rate.

    kv and gate_logits are (..., N, 2d): each token gives two series, Ca =
    ``[..., :d]`` (for the NEXT window's entry) and Cb = ``[..., d:]`` (for
    its own window's); position_bias is (rate, 2d). Entry w pools window
    w - 1's Ca and window w's Cb, 2 * rate slots, with one softmax per
    channel over all of them (entry 0 has no previous window: Cb only).
    A last incomplete window is dropped. Returns (..., N // rate, d).
    """
    rate = _rate(rate)
    kv = _as_float_array(kv, "kv")
    z = _as_float_array(gate_logits, "gate_logits")
    bias = _as_float_array(position_bias, "position_bias")
    if kv.ndim < 2 or kv.shape[-1] % 2:
        raise ValueError(_lines(
            "kv must be (..., N, 2d): two series of width d, got",
            f"shape {kv.shape}"))
    if z.shape != kv.shape or bias.shape != (rate, kv.shape[-1]):
        raise ValueError(_lines(
            f"gate_logits must have kv's shape {kv.shape} and position_bias",
            f"(rate, 2d) = ({rate}, {kv.shape[-1]}); got {z.shape} and",
            f"{bias.shape}"))
    d = kv.shape[-1] // 2
    n_win = kv.shape[-2] // rate
    shape = kv.shape[:-2] + (n_win, rate, 2 * d)
    kv_w = kv[..., : n_win * rate, :].reshape(shape)
    z_w = z[..., : n_win * rate, :].reshape(shape) + bias
    # previous window's Ca: zeros and -inf (weight 0) before window 0
    prev_kv = np.zeros(shape[:-1] + (d,))
    prev_z = np.full(shape[:-1] + (d,), -np.inf)
    prev_kv[..., 1:, :, :] = kv_w[..., :-1, :, :d]
    prev_z[..., 1:, :, :] = z_w[..., :-1, :, :d]
    both_kv = np.concatenate([prev_kv, kv_w[..., d:]], axis=-2)  # 2*rate slots
    both_z = np.concatenate([prev_z, z_w[..., d:]], axis=-2)
    return (_window_softmax(both_z) * both_kv).sum(axis=-2)  # (..., W, d)


def compressed_causal_mask(n, rate):
    """(n, n // rate) boolean, True where query t may read compressed entry w:
    the whole window w (tokens up to w*rate + rate - 1) lies at or before t,
    that is ``w < (t + 1) // rate``."""
    n = _whole_number(n, "n")
    rate = _rate(rate)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    t = np.arange(n)[:, None]  # (n, 1)
    w = np.arange(n // rate)[None, :]  # (1, n // rate)
    return w < (t + 1) // rate


def rope_tail(x, positions, rope_dim, *, base=10000.0):
    """DeepSeek-V4's partial RoPE: rotate the LAST ``rope_dim`` channels of
    x (..., N, d) with interleaved pairs (``rope(..., interleaved=True)``),
    leave the first d - rope_dim alone. Negative positions rotate back."""
    x = _as_float_array(x, "x")
    rope_dim = _whole_number(rope_dim, "rope_dim")
    if not 0 < rope_dim <= x.shape[-1] or rope_dim % 2:
        raise ValueError(_lines(
            f"rope_dim must be even and in 1..d = {x.shape[-1]}, got",
            f"{rope_dim}"))
    tail = rope(x[..., -rope_dim:], positions, base=base, interleaved=True)
    return np.concatenate([x[..., :-rope_dim], tail], axis=-1)


def grouped_output_projection(o, w_a, w_b, groups):
    """DeepSeek-V4's grouped low-rank output projection.

    o is (..., H * d_h), the heads side by side; it is cut into ``groups``
    equal groups, group g is projected by its own w_a[g] (r, H*d_h/groups)
    to r numbers, and the groups * r numbers are mixed by w_b
    (d_model, groups * r). w_a is (groups * r, H*d_h/groups) as
    ``o_a_proj.weight`` stores it. Returns (..., d_model).
    """
    o, w_a, w_b = (_as_float_array(a, n) for a, n in
                   ((o, "o"), (w_a, "w_a"), (w_b, "w_b")))
    groups = _whole_number(groups, "groups")
    if groups < 1 or o.shape[-1] % groups:
        raise ValueError(_lines(
            f"groups must divide the width of o ({o.shape[-1]}), got",
            f"groups={groups}"))
    width = o.shape[-1] // groups
    if w_a.ndim != 2 or w_a.shape[1] != width or w_a.shape[0] % groups:
        raise ValueError(_lines(
            f"w_a must be (groups * r, {width}), got {w_a.shape}"))
    r = w_a.shape[0] // groups
    if w_b.ndim != 2 or w_b.shape[1] != groups * r:
        raise ValueError(f"w_b must be (d_model, {groups * r}), got {w_b.shape}")
    og = o.reshape(o.shape[:-1] + (groups, width))  # (..., g, width)
    wa = w_a.reshape(groups, r, width)  # (g, r, width)
    mid = np.einsum("...gw,grw->...gr", og, wa)  # (..., g, r)
    return mid.reshape(o.shape[:-1] + (groups * r,)) @ w_b.T  # (..., d_model)


def _compressor(x, p, pre, rate, overlap, rope_dim, base, eps):
    kv = x @ p[pre + "kv_proj.weight"].T
    gate = x @ p[pre + "gate_proj.weight"].T
    pool = compress_kv_overlapping if overlap else compress_kv
    c = rms_norm(pool(kv, gate, p[pre + "position_bias"], rate),
                 p[pre + "kv_norm.weight"], eps)  # (W, d)
    return rope_tail(c, np.arange(c.shape[-2]) * rate, rope_dim, base=base)


def deepseek_v4_attention(x, params, *, n_heads, head_dim, rope_dim, window,
                          o_groups, layer_type="sliding_attention", rate=None,
                          index_heads=None, index_topk=None, base=10000.0,
                          eps=1e-6):
    """One DeepSeek-V4 attention layer on x (N, d_model), no cache.

    ``params`` maps the names of ``DeepseekV4Attention``'s parameters
    (``q_a_proj.weight``, ..., ``compressor.indexer.scorer.weights_proj
    .weight``) to arrays. ``layer_type`` is ``"sliding_attention"``,
    ``"heavily_compressed_attention"`` or ``"compressed_sparse_attention"``;
    ``base`` is the RoPE base of that layer (``compress_rope_theta`` for
    the compressed ones). Steps: queries from a low-rank path, each head
    RMS-normed; ONE key-value head, RMS-normed, read as key and value;
    RoPE on the last ``rope_dim`` channels of both; the sliding window's
    keys plus the compressed entries the query may read (all of them in
    HCA, the indexer's top-k in CSA); per-head sinks; the output's RoPE
    slice rotated back by the query's position; the grouped output
    projection. Returns (N, d_model).
    """
    x = _as_float_array(x, "x")
    if x.ndim != 2:
        raise ValueError(f"x must be (N, d_model), got shape {x.shape}")
    kinds = ("sliding_attention", "heavily_compressed_attention",
             "compressed_sparse_attention")
    if layer_type not in kinds:
        raise ValueError(f"layer_type must be one of {kinds}")
    n = x.shape[0]
    pos = np.arange(n)
    p = {k: _as_float_array(v, k) for k, v in params.items()}
    q_res = rms_norm(x @ p["q_a_proj.weight"].T, p["q_a_norm.weight"], eps)
    q = (q_res @ p["q_b_proj.weight"].T).reshape(n, n_heads, head_dim)
    q = q / np.sqrt(np.mean(q * q, axis=-1, keepdims=True) + eps)
    q = rope_tail(q.transpose(1, 0, 2), pos, rope_dim, base=base)  # (H, N, d)
    kv = rms_norm(x @ p["kv_proj.weight"].T, p["kv_norm.weight"], eps)
    kv = rope_tail(kv, pos, rope_dim, base=base)  # (N, d): key AND value
    mask = sliding_window_mask(n, n, window)  # (N, N)
    if layer_type != "sliding_attention":
        csa = layer_type == "compressed_sparse_attention"
        comp = _compressor(x, p, "compressor.", rate, csa, rope_dim, base, eps)
        cmask = compressed_causal_mask(n, rate)  # (N, W)
        if csa:
            ik = _compressor(x, p, "compressor.indexer.", rate, True,
                             rope_dim, base, eps)  # (W, d_I)
            d_i = ik.shape[-1]
            iq = (q_res @ p["compressor.indexer.q_b_proj.weight"].T)
            iq = rope_tail(iq.reshape(n, index_heads, d_i).transpose(1, 0, 2),
                           pos, rope_dim, base=base).transpose(1, 0, 2)
            iw = (x @ p["compressor.indexer.scorer.weights_proj.weight"].T
                  / np.sqrt(index_heads))  # (N, H_I)
            scores = indexer_scores(iq, ik, iw)  # (N, W)
            cmask = topk_mask(scores, index_topk, cmask)
        kv = np.concatenate([kv, comp], axis=0)  # (N + W, d)
        mask = np.concatenate([mask, cmask], axis=1)
    kv_h = np.broadcast_to(kv, (n_heads,) + kv.shape)  # one head, read by all
    o, _ = attention_with_sinks(q, kv_h, kv_h, p["sinks"], mask)  # (H, N, d)
    o = rope_tail(o, -pos, rope_dim, base=base)  # rotate back by -i
    o = o.transpose(1, 0, 2).reshape(n, n_heads * head_dim)
    return grouped_output_projection(o, p["o_a_proj.weight"],
                                     p["o_b_proj.weight"], o_groups)
