"""Multi-head latent attention: the answer key (both paths) against
transformers' DeepseekV3Attention, weights copied across.

Skipped, with the reason, when torch or transformers is missing (`make torch`
installs both). transformers runs its RMSNorm, softmax and RoPE frequencies in
float32 even for a float64 module, so agreement is to about 1e-6. The comparison is also run with the RoPE part applied to the
wrong dimensions, and with the other RoPE pairing, and must then fail.
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(globals(), torch="torch", DeepseekV3Config="transformers:DeepseekV3Config",
                   DeepseekV3Attention="transformers.models.deepseek_v3.modeling_deepseek_v3:DeepseekV3Attention",
                   DeepseekV3RotaryEmbedding="transformers.models.deepseek_v3.modeling_deepseek_v3:DeepseekV3RotaryEmbedding")


D, H, R_Q, R_KV, D_NOPE, D_ROPE, D_V = 32, 4, 12, 10, 6, 4, 5


def _tiny(interleave=True):
    cfg = DeepseekV3Config(hidden_size=D, num_attention_heads=H, num_key_value_heads=H,
                           q_lora_rank=R_Q, kv_lora_rank=R_KV, qk_nope_head_dim=D_NOPE,
                           qk_rope_head_dim=D_ROPE, v_head_dim=D_V, rope_interleave=interleave,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    attn = DeepseekV3Attention(cfg, layer_idx=0).double().eval()
    with torch.no_grad():  # RMSNorm weights are ones by default: make them count
        attn.q_a_layernorm.weight.uniform_(0.5, 1.5)
        attn.kv_a_layernorm.weight.uniform_(0.5, 1.5)
    return cfg, attn


def _weights(attn):
    def t(lin):
        return lin.weight.detach().numpy().T.copy()
    return ref.MLAWeights(t(attn.q_a_proj), attn.q_a_layernorm.weight.detach().numpy().copy(),
                          t(attn.q_b_proj), t(attn.kv_a_proj_with_mqa),
                          attn.kv_a_layernorm.weight.detach().numpy().copy(), t(attn.kv_b_proj),
                          t(attn.o_proj), H, D_NOPE, D_ROPE, D_V)


def _theirs(cfg, attn, x, n_pos_offset=0):
    b, n, _ = x.shape
    xt = torch.tensor(x, dtype=torch.float64)
    pos = torch.arange(n_pos_offset, n_pos_offset + n)[None].expand(b, n)
    cos, sin = DeepseekV3RotaryEmbedding(cfg)(xt, pos)
    causal = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        out, _ = attn(xt, (cos, sin), causal)
    return out.numpy()


@pytest.mark.parametrize("absorbed", [False, True])
@pytest.mark.parametrize("interleave", [True, False])
def test_mla_equals_deepseek_v3_attention(absorbed, interleave):
    cfg, attn = _tiny(interleave)
    x = np.random.default_rng(1).normal(size=(2, 7, D))
    theirs = _theirs(cfg, attn, x)
    w = _weights(attn)
    ours, _ = ref.mla_attention(x, w, mask=ref.causal_mask(7), absorbed=absorbed,
                                interleaved=interleave, eps=cfg.rms_norm_eps)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    # the other pairing convention must not match
    flipped, _ = ref.mla_attention(x, w, mask=ref.causal_mask(7), absorbed=absorbed,
                                   interleaved=not interleave, eps=cfg.rms_norm_eps)
    assert not np.allclose(flipped, theirs, atol=1e-3)


def test_mla_rope_on_the_wrong_dimensions_does_not_match():
    """Put the rotated part first ([rope | nope]) in every head: the numbers change."""
    cfg, attn = _tiny()
    x = np.random.default_rng(2).normal(size=(1, 6, D))
    theirs = _theirs(cfg, attn, x)
    w = _weights(attn)
    # swap the roles of the first D_ROPE and the last D_ROPE query columns of each head
    per_head = w.w_uq.reshape(R_Q, H, D_NOPE + D_ROPE)
    swapped = np.concatenate([per_head[..., D_NOPE:], per_head[..., :D_NOPE]], axis=-1)
    bad = ref.MLAWeights(w.w_dq, w.q_norm, swapped.reshape(R_Q, -1), w.w_dkv, w.kv_norm,
                         w.w_ukv, w.w_o, H, D_NOPE, D_ROPE, D_V)
    wrong, _ = ref.mla_attention(x, bad, mask=ref.causal_mask(6), eps=cfg.rms_norm_eps)
    assert not np.allclose(wrong, theirs, atol=1e-3)
    right, _ = ref.mla_attention(x, w, mask=ref.causal_mask(6), eps=cfg.rms_norm_eps)
    np.testing.assert_allclose(right, theirs, rtol=1e-5, atol=1e-6)


def test_mla_decode_with_latent_cache_equals_full_transformers_forward():
    cfg, attn = _tiny()
    x = np.random.default_rng(3).normal(size=(1, 6, D))
    theirs = _theirs(cfg, attn, x)
    w = _weights(attn)
    for absorbed in (False, True):
        cache, outs = None, []
        for t in range(6):
            o, cache = ref.mla_attention(x[:, t:t + 1], w, cache=cache, absorbed=absorbed,
                                         eps=cfg.rms_norm_eps)
            outs.append(o)
        assert cache[0].shape == (1, 6, R_KV) and cache[1].shape == (1, 6, D_ROPE)
        np.testing.assert_allclose(np.concatenate(outs, axis=1), theirs, rtol=1e-5, atol=1e-6)
