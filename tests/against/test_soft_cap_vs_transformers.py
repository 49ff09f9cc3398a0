"""Soft-capping against transformers' Gemma attention, tiny configurations,
random weights, float64 (the softmax runs in float32: agreement to 1e-6).

Gemma2Attention caps (its config's attn_logit_softcapping, 50.0 by default):
the answer key's pieces (projections, half-split RoPE, ``ref.soft_cap`` on the
scaled scores, the causal mask, softmax, o_proj) give its weights and output.
Gemma 3 dropped the cap: Gemma3TextConfig defaults attn_logit_softcapping to
None, and Gemma3Attention, even with a cap set in its config, never passes it
to its attention function (modeling_gemma3.py, transformers 5.23), so it
equals the uncapped answer key and differs from the capped one.

Each comparison is also run with a flipped convention, and must then fail
(named in the test): no cap at all; the cap applied before the scaling
(tanh of the raw dot products); the mask added before the cap (a hidden score
of -inf capped to -c would take weight). Skipped, with the reason, when torch
or transformers is missing (`make torch` installs both).
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch", "transformers")
_M = "transformers.models"
_imports = imports(
    globals(), torch="torch",
    Gemma2Config="transformers:Gemma2Config",
    Gemma2Attention=f"{_M}.gemma2.modeling_gemma2:Gemma2Attention",
    Gemma2Rotary=f"{_M}.gemma2.modeling_gemma2:Gemma2RotaryEmbedding",
    Gemma3TextConfig="transformers:Gemma3TextConfig",
    Gemma3Attention=f"{_M}.gemma3.modeling_gemma3:Gemma3Attention",
    Gemma3Rotary=f"{_M}.gemma3.modeling_gemma3:Gemma3RotaryEmbedding")

D, H, H_KV, HD, CAP, N = 16, 4, 2, 8, 5.0, 7
THETA = 10000.0


def _build(kind):
    common = dict(hidden_size=D, num_attention_heads=H, num_key_value_heads=H_KV,
                  head_dim=HD, num_hidden_layers=2, intermediate_size=8,
                  attn_logit_softcapping=CAP, query_pre_attn_scalar=HD,
                  rope_parameters={"rope_type": "default", "rope_theta": THETA})
    torch.manual_seed(0)
    if kind == "gemma2":
        cfg = Gemma2Config(**common)
        cfg._attn_implementation = "eager"
        attn, rotary = Gemma2Attention(cfg, layer_idx=1), Gemma2Rotary(cfg)
    else:
        cfg = Gemma3TextConfig(**common, rms_norm_eps=1e-6)
        cfg._attn_implementation = "eager"
        attn, rotary = Gemma3Attention(cfg, layer_idx=1), Gemma3Rotary(cfg)
    attn = attn.double().eval()
    with torch.no_grad():  # scores of a few tens, so a cap of 5 matters
        for lin in (attn.q_proj, attn.k_proj):
            lin.weight.mul_(6.0)
        if kind == "gemma3":  # Gemma3RMSNorm multiplies by 1 + weight
            attn.q_norm.weight.uniform_(2.0, 4.0)
            attn.k_norm.weight.uniform_(2.0, 4.0)
    return cfg, attn, rotary


def _theirs(cfg, attn, rotary, x):
    b, n, _ = x.shape
    xt = torch.tensor(x, dtype=torch.float64)
    pos = torch.arange(n)[None].expand(b, n)
    try:
        cos, sin = rotary(xt, pos)
    except TypeError:
        cos, sin = rotary(xt, pos, attn.layer_type)
    causal = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
    with torch.no_grad():
        out, weights = attn(xt, (cos, sin), causal[None, None])
    return out.numpy(), weights.numpy()


def _ours(kind, attn, x, flip=None):
    def t(lin):
        return lin.weight.detach().numpy().T
    n = x.shape[-2]
    q = ref.split_heads(x @ t(attn.q_proj), H)            # (B, H, N, hd)
    k = ref.split_heads(x @ t(attn.k_proj), H_KV)         # (B, H_kv, N, hd)
    v = ref.split_heads(x @ t(attn.v_proj), H_KV)
    if kind == "gemma3":
        q = ref.rms_norm(q, 1 + attn.q_norm.weight.detach().numpy())
        k = ref.rms_norm(k, 1 + attn.k_norm.weight.detach().numpy())
    pos = np.arange(n)
    q, k = ref.rope(q, pos, base=THETA), ref.rope(k, pos, base=THETA)
    k, v = (np.repeat(a, H // H_KV, axis=-3) for a in (k, v))
    dots = q @ np.swapaxes(k, -1, -2)                     # (B, H, N, N)
    mask = ref.causal_mask(n)
    if flip == "no cap":
        s = dots / np.sqrt(HD)
    elif flip == "cap before scaling":
        s = ref.soft_cap(dots, CAP) / np.sqrt(HD)
    elif flip == "mask before cap":
        s = ref.soft_cap(np.where(mask, dots / np.sqrt(HD), -np.inf), CAP)
    else:
        s = ref.soft_cap(dots / np.sqrt(HD), CAP)
    w = ref.softmax(s if flip == "mask before cap" else np.where(mask, s, -np.inf))
    return ref.merge_heads(w @ v) @ t(attn.o_proj), w


def _x(seed=1):
    return np.random.default_rng(seed).normal(size=(2, N, D))


TOL = 1e-6


def test_soft_cap_equals_gemma2_attention():
    cfg, attn, rotary = _build("gemma2")
    out, weights = _theirs(cfg, attn, rotary, _x())
    mine, my_w = _ours("gemma2", attn, _x())
    _, uncapped = _ours("gemma2", attn, _x(), flip="no cap")
    assert np.abs(uncapped - weights).max() > 0.1  # the cap is reached
    np.testing.assert_allclose(my_w, weights, atol=TOL)
    np.testing.assert_allclose(mine, out, atol=TOL)


@pytest.mark.parametrize("flip", ["no cap", "cap before scaling", "mask before cap"])
def test_flipped_soft_cap_fails(flip):
    """Catches: the cap left out; tanh of the unscaled dot products; -inf
    capped to -c before the softmax (hidden keys would get weight)."""
    cfg, attn, rotary = _build("gemma2")
    _, weights = _theirs(cfg, attn, rotary, _x())
    _, my_w = _ours("gemma2", attn, _x(), flip=flip)
    assert np.abs(my_w - weights).max() > 1e-3, flip


def test_gemma3_attention_does_not_cap():
    """Chapter 20's fact: Gemma 3 runs without soft-capping. Its default is
    None, and a cap set in Gemma3TextConfig reaches no score. Catches a
    Gemma 3 taken to cap like Gemma 2 (the capped answer key differs)."""
    assert Gemma3TextConfig().attn_logit_softcapping is None
    assert Gemma2Config().attn_logit_softcapping == 50.0
    cfg, attn, rotary = _build("gemma3")
    out, weights = _theirs(cfg, attn, rotary, _x())
    mine, my_w = _ours("gemma3", attn, _x(), flip="no cap")
    np.testing.assert_allclose(my_w, weights, atol=TOL)
    np.testing.assert_allclose(mine, out, atol=TOL)
    _, capped = _ours("gemma3", attn, _x())
    assert np.abs(capped - weights).max() > 0.1
