"""The answer key of "Attention in today's LLMs" against PyTorch and Hugging Face
transformers: RoPE, grouped-query attention and the bottom-right causal mask.

Skipped, with the reason, when torch or transformers is missing (`make torch`
installs both). Each comparison also flips the convention it tests (pairing,
head mapping, mask alignment) and checks that the flipped version no longer
matches, so the comparisons cannot pass by accident.
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

RNG = np.random.default_rng(14)

# --- against PyTorch and transformers ------------------------------------------

# The whole module is skipped when either is missing, as when both were imported at its top.
pytestmark = needs("torch", "transformers")
_imports = imports(globals(), torch="torch", F="torch.nn.functional", transformers="transformers")


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


@pytest.mark.parametrize("h_q,h_kv,masked", [(8, 2, False), (8, 2, True), (4, 1, True), (3, 3, False)])
def test_gqa_equals_torch_sdpa_enable_gqa(h_q, h_kv, masked):
    q, k, v = RNG.normal(size=(2, h_q, 5, 4)), RNG.normal(size=(2, h_kv, 7, 4)), RNG.normal(size=(2, h_kv, 7, 3))
    mask = ref.causal_mask(5, 7) if masked else None
    ours, _ = ref.grouped_query_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), attn_mask=None if mask is None else torch.tensor(mask),
                                            enable_gqa=True).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
    if 1 < h_q // h_kv < h_q:  # the wrong mapping (tile) must not match torch
        group = h_q // h_kv
        tiled = [np.tile(t, (1, group, 1, 1)) for t in (k, v)]
        wrong, _ = ref.scaled_dot_product_attention(q, *tiled, mask)
        assert not np.allclose(wrong, theirs)


def test_causal_mask_equals_torch_lower_right_and_not_is_causal():
    from torch.nn.attention.bias import causal_lower_right
    q, k, v = RNG.normal(size=(1, 3, 4)), RNG.normal(size=(1, 6, 4)), RNG.normal(size=(1, 6, 4))
    ours, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(3, 6))
    lower_right = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), attn_mask=causal_lower_right(3, 6)).numpy()
    np.testing.assert_allclose(ours, lower_right, rtol=1e-10, atol=1e-12)
    top_left = F.scaled_dot_product_attention(_t(q), _t(k), _t(v), is_causal=True).numpy()
    assert not np.allclose(ours, top_left)  # is_causal aligns top-left: a different mask


def _llama_rope(d, base, positions, x):
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    cfg = LlamaConfig(hidden_size=d * 2, num_attention_heads=2, head_dim=d,
                      rope_parameters={"rope_type": "default", "rope_theta": base})
    emb = LlamaRotaryEmbedding(cfg)
    xt = _t(x)[None]  # (1, H, N, d)
    cos, sin = emb(xt, torch.tensor(positions)[None])  # (1, N, d)
    out, _ = apply_rotary_pos_emb(xt, xt, cos, sin)
    return out[0].numpy()


@pytest.mark.parametrize("base", [10000.0, 500000.0, 1000000.0])
def test_rope_equals_transformers_llama_rotary_embedding(base):
    x = RNG.normal(size=(2, 9, 16))  # (H, N, d)
    pos = np.arange(3, 12)
    theirs = _llama_rope(16, base, pos, x)
    # transformers computes the frequencies in float32: agreement to about 1e-5
    np.testing.assert_allclose(ref.rope(x, pos, base=base), theirs, rtol=0, atol=5e-5)
    assert not np.allclose(ref.rope(x, pos, base=base, interleaved=True), theirs, atol=1e-2)


def test_rope_interleaved_equals_the_complex_number_form():
    d, n, base = 16, 9, 10000.0
    x = RNG.normal(size=(n, d))
    pos = torch.arange(n, dtype=torch.float64)
    inv = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    turn = torch.polar(torch.ones(n, d // 2, dtype=torch.float64), torch.outer(pos, inv))
    z = torch.view_as_complex(_t(x).reshape(n, d // 2, 2).contiguous())  # pairs (x[2i], x[2i+1])
    theirs = torch.view_as_real(z * turn).reshape(n, d).numpy()
    np.testing.assert_allclose(ref.rope(x, np.arange(n), base=base, interleaved=True), theirs,
                               rtol=1e-12, atol=1e-12)
    assert not np.allclose(ref.rope(x, np.arange(n), base=base, interleaved=False), theirs)
