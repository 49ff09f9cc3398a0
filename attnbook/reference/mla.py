"""The answer key of multi-head latent attention (MLA), as in DeepSeek-V2 and V3.

Chapters import these names from :mod:`attnbook.reference`.

MLA caches, per token and layer, one compressed latent ``c_kv`` (rank
``r_kv``, 512 in DeepSeek-V3) and one RoPE key ``k_rope`` shared by all heads
(64 dimensions), instead of a key and a value per head. Keys and values are
up-projected from the latent; queries go through a low-rank bottleneck of
their own (rank ``r_q``, 1536 in DeepSeek-V3). Position enters through a few
extra *decoupled* RoPE dimensions per head.

The weights, in the book's right-multiplication convention (``x @ w``):

========== ================================ =======================================
name       shape                            transformers' DeepseekV3Attention
========== ================================ =======================================
``w_dq``   (D, r_q)                         ``q_a_proj.weight.T``
``q_norm`` (r_q,)                           ``q_a_layernorm.weight`` (RMSNorm)
``w_uq``   (r_q, H * (d_nope + d_rope))     ``q_b_proj.weight.T``
``w_dkv``  (D, r_kv + d_rope)               ``kv_a_proj_with_mqa.weight.T``
``kv_norm``(r_kv,)                          ``kv_a_layernorm.weight`` (RMSNorm)
``w_ukv``  (r_kv, H * (d_nope + d_v))       ``kv_b_proj.weight.T``
``w_o``    (H * d_v, D)                     ``o_proj.weight.T``
========== ================================ =======================================

Per head, the columns of ``w_uq`` are ``[nope | rope]`` and those of ``w_ukv``
``[key nope | value]``. Two ways to compute the same attention:

* naive: up-project the cached latents to full per-head keys and values,
  then ordinary attention;
* absorbed: fold the key up-projection into the query and the value
  up-projection into the output, and attend over the latents directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validate import _as_float_array
from .attention import scaled_dot_product_attention
from .rope import rope

__all__ = ["rms_norm", "MLAWeights", "mla_latents", "mla_queries", "mla_attention"]


def rms_norm(x, weight, eps=1e-6):
    """RMSNorm over the last axis: ``x / sqrt(mean(x**2) + eps) * weight``."""
    x = _as_float_array(x, "x")
    weight = _as_float_array(weight, "weight")
    if weight.shape != x.shape[-1:]:
        raise ValueError(f"weight {weight.shape} must match the last axis of "
                         f"x {x.shape}")
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


@dataclass
class MLAWeights:
    """The weights of one MLA layer (shapes in the module's docstring)."""

    w_dq: np.ndarray
    q_norm: np.ndarray
    w_uq: np.ndarray
    w_dkv: np.ndarray
    kv_norm: np.ndarray
    w_ukv: np.ndarray
    w_o: np.ndarray
    n_heads: int
    d_nope: int
    d_rope: int
    d_v: int

    def __post_init__(self):
        for name in ("w_dq", "q_norm", "w_uq", "w_dkv", "kv_norm", "w_ukv", "w_o"):
            setattr(self, name, _as_float_array(getattr(self, name), name))
        h, dn, dr, dv = self.n_heads, self.d_nope, self.d_rope, self.d_v
        d, r_q = self.w_dq.shape
        r_kv = self.kv_norm.shape[0]
        want = {"q_norm": (r_q,), "w_uq": (r_q, h * (dn + dr)),
                "w_dkv": (d, r_kv + dr), "kv_norm": (r_kv,),
                "w_ukv": (r_kv, h * (dn + dv)), "w_o": (h * dv, d)}
        for name, shape in want.items():
            got = getattr(self, name).shape
            if got != shape:
                raise ValueError(f"{name} must have shape {shape} (D={d}, "
                                 f"r_q={r_q}, r_kv={r_kv}, H={h}), got {got}")

    @classmethod
    def random(cls, rng, d, n_heads, r_q, r_kv, d_nope, d_rope, d_v):
        """Seeded random weights scaled like a typical initialisation."""
        def w(n_in, n_out):
            return rng.normal(size=(n_in, n_out)) / np.sqrt(n_in)
        h = n_heads
        return cls(w(d, r_q), 1 + 0.1 * rng.normal(size=r_q),
                   w(r_q, h * (d_nope + d_rope)), w(d, r_kv + d_rope),
                   1 + 0.1 * rng.normal(size=r_kv), w(r_kv, h * (d_nope + d_v)),
                   w(h * d_v, d), h, d_nope, d_rope, d_v)

    @property
    def r_kv(self):
        return self.kv_norm.shape[0]


def mla_latents(x, w: MLAWeights, positions, *, base=10000.0,
                interleaved=True, eps=1e-6):
    """What MLA caches for each token: ``(c_kv, k_rope)``.

    x (..., N, D) -> c_kv (..., N, r_kv) (normalised latent),
    k_rope (..., N, d_rope) (RoPE applied at ``positions``, shared by heads).
    """
    x = _as_float_array(x, "x")
    ckv = x @ w.w_dkv  # (..., N, r_kv + d_rope)
    c_kv = rms_norm(ckv[..., :w.r_kv], w.kv_norm, eps)  # (..., N, r_kv)
    k_rope = rope(ckv[..., w.r_kv:], positions, base=base,
                  interleaved=interleaved)  # (..., N, d_rope)
    return c_kv, k_rope


def mla_queries(x, w: MLAWeights, positions, *, base=10000.0,
                interleaved=True, eps=1e-6):
    """Queries through the low-rank bottleneck: ``(q_nope, q_rope)``.

    x (..., N, D) -> q_nope (..., H, N, d_nope), q_rope (..., H, N, d_rope)
    (RoPE applied to q_rope only).
    """
    x = _as_float_array(x, "x")
    c_q = rms_norm(x @ w.w_dq, w.q_norm, eps)  # (..., N, r_q)
    q = c_q @ w.w_uq  # (..., N, H * (d_nope + d_rope))
    q = q.reshape(*q.shape[:-1], w.n_heads, w.d_nope + w.d_rope)
    q = np.swapaxes(q, -3, -2)  # (..., H, N, d_nope + d_rope)
    q_nope, q_rope = q[..., :w.d_nope], q[..., w.d_nope:]
    return q_nope, rope(q_rope, positions, base=base, interleaved=interleaved)


def mla_attention(x, w: MLAWeights, positions=None, *, mask=None,
                  absorbed=False, cache=None, base=10000.0, interleaved=True,
                  eps=1e-6, fully_masked="raise"):
    """Multi-head latent attention; returns ``(output, (c_kv, k_rope))``.

    x : (..., N, D), the new tokens; ``positions`` (N,) their positions
        (default ``arange(N)``, or following the cache).
    cache : optional ``(c_kv, k_rope)`` of earlier tokens, (..., N_c, r_kv)
        and (..., N_c, d_rope); the new tokens' latents are appended to it.
    mask : bool, True = may attend, broadcastable to (..., H, N, N_c + N);
        for example ``causal_mask(N, N_c + N)``.
    absorbed : False: up-project the latents to per-head keys and values
        (naive); True: fold W_uk into the query and W_uv into the output and
        attend over the latents (the same numbers, less work per decoded
        token).

    Returns the output (..., N, D) and the updated cache.
    """
    x = _as_float_array(x, "x")
    if x.ndim < 2 or x.shape[-1] != w.w_dq.shape[0]:
        raise ValueError(f"x must be (..., N, D) with D = {w.w_dq.shape[0]}, "
                         f"got {x.shape}")
    n = x.shape[-2]
    n_c = 0 if cache is None else cache[0].shape[-2]
    if positions is None:
        positions = np.arange(n_c, n_c + n)
    c_new, kr_new = mla_latents(x, w, positions, base=base,
                                interleaved=interleaved, eps=eps)
    if cache is not None:
        c_kv = np.concatenate([cache[0], c_new], axis=-2)  # (..., N_c+N, r_kv)
        k_rope = np.concatenate([cache[1], kr_new], axis=-2)
    else:
        c_kv, k_rope = c_new, kr_new
    q_nope, q_rope = mla_queries(x, w, positions, base=base,
                                 interleaved=interleaved, eps=eps)
    h, dn, dv = w.n_heads, w.d_nope, w.d_v
    w_ukv = w.w_ukv.reshape(w.r_kv, h, dn + dv)
    w_uk, w_uv = w_ukv[..., :dn], w_ukv[..., dn:]  # (r_kv, H, d_nope), (r_kv, H, d_v)
    if not absorbed:
        k_nope = np.einsum("...tr,rhd->...htd", c_kv, w_uk)  # (..., H, T, d_nope)
        v = np.einsum("...tr,rhd->...htd", c_kv, w_uv)  # (..., H, T, d_v)
        kr = np.broadcast_to(k_rope[..., None, :, :],
                             (*k_rope.shape[:-2], h, *k_rope.shape[-2:]))
        q = np.concatenate([q_nope, q_rope], axis=-1)  # (..., H, N, dn+dr)
        k = np.concatenate([k_nope, kr], axis=-1)  # (..., H, T, dn+dr)
        out, _ = scaled_dot_product_attention(q, k, v, mask,
                                              fully_masked=fully_masked)
    else:
        q_lat = np.einsum("...hnd,rhd->...hnr", q_nope, w_uk)  # (..., H, N, r_kv)
        # Scores are q_lat . c_kv + q_rope . k_rope, scaled by
        # 1/sqrt(d_nope + d_rope) like the naive path; the attention call
        # below divides by sqrt(r_kv + d_rope), so q is rescaled to match.
        q_cat = np.concatenate([q_lat, q_rope], axis=-1) * np.sqrt(
            (w.r_kv + w.d_rope) / (dn + w.d_rope))
        kv_cat = np.concatenate([c_kv, k_rope], axis=-1)[..., None, :, :]
        o_lat, _ = scaled_dot_product_attention(
            q_cat, kv_cat, c_kv[..., None, :, :], mask,
            fully_masked=fully_masked)  # (..., H, N, r_kv)
        out = np.einsum("...hnr,rhd->...hnd", o_lat, w_uv)  # (..., H, N, d_v)
    out = np.swapaxes(out, -3, -2)  # (..., N, H, d_v)
    out = out.reshape(*out.shape[:-2], h * dv) @ w.w_o  # (..., N, D)
    return out, (c_kv, k_rope)
