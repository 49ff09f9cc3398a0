"""Answer key of chapter 19b (Part VIII): Gemma 4's key-value sharing.

Gemma 4 saves key-value cache in two ways, both switches of
``Gemma4TextConfig``:

* ``attention_k_eq_v``: in the global (full-attention) layers the key
  projection's output is also the value: the key is that output RMS-normed
  with a learned scale and rotated (RoPE), the value the same output
  RMS-normed without a scale and not rotated.
* ``num_kv_shared_layers``: the last layers compute no keys or values of
  their own; each reads those of the last earlier layer of its own type
  (sliding or full): :func:`kv_source_layers`.

The global layers also rotate only part of each head (proportional RoPE,
:func:`proportional_rope`). :func:`gemma4_attention` is one attention layer,
tested equal to ``transformers``' ``Gemma4TextAttention``;
:func:`kv_cache_numbers` counts what a stack of layers keeps in its cache.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _lines, _whole_number
from .attention import scaled_dot_product_attention
from .kv_cache import sliding_window_mask
from .rope import rope

__all__ = ["proportional_rope", "gemma4_attention", "kv_source_layers",
           "kv_cache_numbers"]

_TYPES = ("sliding_attention", "full_attention")


def proportional_rope(x, positions, *, base=1_000_000.0, partial_factor=0.25):
    """Gemma 4's partial ("proportional") RoPE over x (..., N, d), split
    halves: pair i is (x[i], x[i + d/2]). The first
    ``int(partial_factor * d // 2)`` pairs turn by position * base**(-2i/d)
    (the exponent divides by the WHOLE width d); the other pairs do not turn.
    """
    x = _as_float_array(x, "x")
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"the head width must be even, got {d}")
    if not 0.0 <= float(partial_factor) <= 1.0:
        raise ValueError(f"partial_factor must be in [0, 1], got {partial_factor}")
    pos = _as_float_array(positions, "positions")
    if pos.ndim == 0 or pos.shape[-1] != x.shape[-2]:
        raise ValueError(_lines(
            f"positions {pos.shape} must give one position per row of x",
            f"{x.shape}"))
    turning = int(float(partial_factor) * d // 2)
    theta = np.zeros(d // 2)
    theta[:turning] = float(base) ** (-np.arange(0, 2 * turning, 2) / d)
    angles = pos[..., None] * theta  # (..., N, d/2)
    cos, sin = np.cos(angles), np.sin(angles)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def _rms(x, eps, weight=None):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if weight is None else y * weight


def gemma4_attention(x, params, *, n_heads, n_kv_heads, head_dim,
                     layer_type="full_attention", window=None, base=1e6,
                     partial_factor=0.25, k_eq_v=False, shared_kv=None,
                     eps=1e-6):
    """One Gemma 4 attention layer on x (N, d_model), no cache.

    ``params`` maps ``Gemma4TextAttention``'s parameter names
    (``q_proj.weight``, ``q_norm.weight``, ``k_proj.weight``,
    ``k_norm.weight``, ``v_proj.weight``, ``o_proj.weight``) to arrays.
    Queries and keys are RMS-normed per head with a learned scale, then
    rotated (full RoPE in a sliding layer, :func:`proportional_rope` in a
    full one); values are RMS-normed with no scale and not rotated; the
    score scale is 1 (the norms set the size). With ``k_eq_v`` (full layers
    only, as in Gemma 4) the value is the key projection's output.
    ``shared_kv=(k, v)`` (each (n_kv_heads, N, head_dim)) makes the layer
    read another layer's keys and values instead of computing its own.
    Returns ``(output (N, d_model), (k, v))``: the keys and values it read.
    """
    x = _as_float_array(x, "x")
    if x.ndim != 2:
        raise ValueError(f"x must be (N, d_model), got shape {x.shape}")
    if layer_type not in _TYPES:
        raise ValueError(f"layer_type must be one of {_TYPES}")
    if n_heads % n_kv_heads:
        raise ValueError(_lines(
            f"n_heads ({n_heads}) must be a multiple of n_kv_heads",
            f"({n_kv_heads})"))
    sliding = layer_type == "sliding_attention"
    if sliding and k_eq_v:
        raise ValueError("k_eq_v applies to full-attention layers only")
    n = x.shape[0]
    pos = np.arange(n)

    def turn(t):  # (heads, N, head_dim)
        if sliding:
            return rope(t, pos, base=base)
        return proportional_rope(t, pos, base=base, partial_factor=partial_factor)

    def heads(t, h):  # (N, h * head_dim) -> (h, N, head_dim)
        return t.reshape(n, h, head_dim).transpose(1, 0, 2)

    p = {k: _as_float_array(v, k) for k, v in params.items()}
    q = turn(_rms(heads(x @ p["q_proj.weight"].T, n_heads), eps,
                  p["q_norm.weight"]))
    if shared_kv is None:
        raw = heads(x @ p["k_proj.weight"].T, n_kv_heads)
        raw_v = raw if k_eq_v else heads(x @ p["v_proj.weight"].T, n_kv_heads)
        k = turn(_rms(raw, eps, p["k_norm.weight"]))
        v = _rms(raw_v, eps)  # no scale, no rotation
    else:
        k, v = (_as_float_array(t, n) for t, n in zip(shared_kv, ("k", "v")))
        if k.shape != (n_kv_heads, n, head_dim) or v.shape != k.shape:
            raise ValueError(_lines(
                "shared_kv must be (k, v), each (n_kv_heads, N, head_dim) =",
                f"{(n_kv_heads, n, head_dim)}, got {k.shape}, {v.shape}"))
    group = n_heads // n_kv_heads
    mask = sliding_window_mask(n, n, window) if sliding else np.tril(
        np.ones((n, n), dtype=bool))
    # scale 1: multiply q by sqrt(head_dim) to undo the 1/sqrt(d) of the key
    o, _ = scaled_dot_product_attention(q * np.sqrt(head_dim),
                                     np.repeat(k, group, axis=0),
                                     np.repeat(v, group, axis=0), mask)
    o = o.transpose(1, 0, 2).reshape(n, n_heads * head_dim)
    return o @ p["o_proj.weight"].T, (k, v)


def kv_source_layers(layer_types, num_kv_shared_layers):
    """For each layer, the index of the layer whose keys and values it reads.

    The first ``L - num_kv_shared_layers`` layers read their own. Each later
    layer reads the LAST earlier non-shared layer of its own type
    (``"sliding_attention"`` or ``"full_attention"``), as
    ``Gemma4TextConfig.kv_sharing_modes`` and ``Gemma4TextModel`` do.
    """
    types = list(layer_types)
    bad = [t for t in types if t not in _TYPES]
    if bad:
        raise ValueError(f"layer types must be in {_TYPES}, got {bad[0]!r}")
    shared = _whole_number(num_kv_shared_layers, "num_kv_shared_layers")
    if not 0 <= shared < len(types):
        raise ValueError(_lines(
            f"num_kv_shared_layers must be in 0..{len(types) - 1} (one layer",
            f"at least computes its own), got {shared}"))
    first = len(types) - shared
    out = list(range(first))
    for i in range(first, len(types)):
        own = [j for j in range(first) if types[j] == types[i]]
        if not own:
            raise ValueError(_lines(
                f"layer {i} ({types[i]}) shares keys and values, but no",
                "earlier non-shared layer has its type"))
        out.append(own[-1])
    return out


def kv_cache_numbers(n_tokens, layer_types, *, window, width, tensors=None,
                     num_kv_shared_layers=0):
    """The numbers a stack of layers keeps in its KV cache at ``n_tokens``.

    ``width[t]`` is one token's key width in a layer of type t (KV heads x
    head width); ``tensors[t]`` is 2 when keys and values are stored
    apart, 1 when one tensor serves as both (default 2 for every type). A
    sliding layer keeps its last ``window`` tokens, a full layer all of
    them; the last ``num_kv_shared_layers`` layers keep nothing (they read
    an earlier layer's cache).
    """
    n = _whole_number(n_tokens, "n_tokens")
    window = _whole_number(window, "window")
    if n < 0 or window < 1:
        raise ValueError(f"need n_tokens >= 0 and window >= 1, got {n}, {window}")
    types = list(layer_types)
    sources = kv_source_layers(types, num_kv_shared_layers)
    tensors = tensors or {t: 2 for t in _TYPES}
    total = 0
    for i, t in enumerate(types):
        if sources[i] != i:
            continue
        kept = min(n, window) if t == "sliding_attention" else n
        total += kept * width[t] * tensors[t]
    return total
