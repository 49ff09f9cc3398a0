"""A whole attention layer written with the answer key
(``reference.llama_attention``: projections, RoPE, grouped-query attention
with a causal mask, output projection) against Hugging Face transformers'
``LlamaAttention`` and ``Qwen2Attention`` (q/k/v biases), on tiny
configurations with random weights copied across; no download.

Each comparison also runs the layer with a convention flipped (the
interleaved RoPE pairing; query head h reading KV head h % H_kv instead of
h // group) and checks that it no longer matches, so the comparison cannot
pass by accident. Skipped, with the reason, without torch or transformers
(`make torch` installs both).
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(globals(), torch="torch", transformers="transformers")


RNG = np.random.default_rng(1513)


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


def _weights(d, h_q, h_kv, hd, bias):
    w = {"w_q": RNG.normal(size=(d, h_q * hd)) / np.sqrt(d),
         "w_k": RNG.normal(size=(d, h_kv * hd)) / np.sqrt(d),
         "w_v": RNG.normal(size=(d, h_kv * hd)) / np.sqrt(d),
         "w_o": RNG.normal(size=(h_q * hd, d)) / np.sqrt(h_q * hd)}
    if bias:
        w |= {"b_q": RNG.normal(size=h_q * hd), "b_k": RNG.normal(size=h_kv * hd),
              "b_v": RNG.normal(size=h_kv * hd)}
    return w


def _hf_layer(family, d, h_q, h_kv, hd, base, w):
    """Build transformers' attention module and copy our weights into it."""
    if family == "llama":
        from transformers import LlamaConfig as Config
        from transformers.models.llama.modeling_llama import (
            LlamaAttention as Attention, LlamaRotaryEmbedding as Rotary)
        extra = {"head_dim": hd, "attention_bias": False}
    else:
        from transformers import Qwen2Config as Config
        from transformers.models.qwen2.modeling_qwen2 import (
            Qwen2Attention as Attention, Qwen2RotaryEmbedding as Rotary)
        extra = {}
    cfg = Config(hidden_size=d, num_attention_heads=h_q,
                 num_key_value_heads=h_kv, num_hidden_layers=1,
                 rope_parameters={"rope_type": "default", "rope_theta": base},
                 **extra)
    cfg._attn_implementation = "eager"
    attn = Attention(cfg, layer_idx=0).double().eval()
    rotary = Rotary(cfg)
    with torch.no_grad():
        for ours, theirs in (("w_q", "q_proj"), ("w_k", "k_proj"),
                             ("w_v", "v_proj"), ("w_o", "o_proj")):
            getattr(attn, theirs).weight.copy_(_t(w[ours].T))  # (out, in)
        for ours, theirs in (("b_q", "q_proj"), ("b_k", "k_proj"),
                             ("b_v", "v_proj")):
            layer = getattr(attn, theirs)
            assert (layer.bias is not None) == (ours in w), (family, theirs)
            if ours in w:
                layer.bias.copy_(_t(w[ours]))
        assert attn.o_proj.bias is None
    return attn, rotary


def _hf_forward(attn, rotary, x, positions):
    xt = _t(x)  # (B, N, D)
    n = x.shape[-2]
    pos = torch.tensor(positions)[None].expand(x.shape[0], n)
    cos, sin = rotary(xt, pos)
    cos, sin = cos.double(), sin.double()
    hidden = torch.zeros(n, n, dtype=torch.float64)
    hidden.masked_fill_(~torch.tensor(ref.causal_mask(n)), float("-inf"))
    with torch.no_grad():
        out, _ = attn(hidden_states=xt, position_embeddings=(cos, sin),
                      attention_mask=hidden[None, None])
    return out.numpy()


def _kv_copied(w, h_q, hd, kv_head_of):
    """KV weights copied per query head: query head h gets KV head kv_head_of(h)."""
    cols = np.concatenate([np.arange(kv_head_of(h) * hd, (kv_head_of(h) + 1) * hd)
                           for h in range(h_q)])
    out = dict(w)
    for name in ("w_k", "w_v"):
        out[name] = w[name][:, cols]
    for name in ("b_k", "b_v"):
        if name in w:
            out[name] = w[name][cols]
    return out


def _tiled_kv(w, h_q, h_kv, hd):
    """KV weights copied per query head, with the WRONG map h -> h % H_kv."""
    return _kv_copied(w, h_q, hd, lambda h: h % h_kv)


def _repeated_kv(w, h_q, h_kv, hd):
    """KV weights copied per query head with the right map h -> h // group."""
    group = h_q // h_kv
    return _kv_copied(w, h_q, hd, lambda h: h // group)


CONFIGS = [  # family, D, H_q, H_kv, hd, base
    ("llama", 32, 4, 2, 8, 500000.0),    # GQA, groups of 2, LLaMA 3's base
    ("llama", 48, 6, 2, 8, 10000.0),     # groups of 3
    ("llama", 16, 4, 1, 4, 10000.0),     # MQA
    ("llama", 16, 2, 2, 8, 10000.0),     # MHA
    ("qwen2", 32, 4, 2, 8, 1000000.0),   # Qwen2's base, with q/k/v biases
    ("qwen2", 56, 7, 1, 8, 1000000.0),   # 7 query heads, 1 KV head
]


@pytest.mark.parametrize("family,d,h_q,h_kv,hd,base", CONFIGS)
def test_layer_equals_transformers(family, d, h_q, h_kv, hd, base):
    w = _weights(d, h_q, h_kv, hd, bias=family == "qwen2")
    attn, rotary = _hf_layer(family, d, h_q, h_kv, hd, base, w)
    x = RNG.normal(size=(2, 7, d))  # (B, N, D)
    pos = np.arange(7)
    theirs = _hf_forward(attn, rotary, x, pos)
    ours = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_kv, positions=pos,
                               base=base, **w)
    assert ours.shape == theirs.shape == (2, 7, d)
    # transformers computes RoPE's frequencies in float32: about 1e-6
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)

    # the same layer as multi-head attention with copied KV weights
    same = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_q, positions=pos,
                               base=base, **_repeated_kv(w, h_q, h_kv, hd))
    np.testing.assert_allclose(same, ours, rtol=1e-10, atol=1e-12)

    # flipped conventions must NOT match transformers
    pairing = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_kv,
                                  positions=pos, base=base, interleaved=True,
                                  **w)
    assert not np.allclose(pairing, theirs, atol=1e-3)
    if 1 < h_kv < h_q:  # with one KV head, or as many as queries, h%H = h//g
        tiled = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_q,
                                    positions=pos, base=base,
                                    **_tiled_kv(w, h_q, h_kv, hd))
        assert not np.allclose(tiled, theirs, atol=1e-3)
    # ... and neither does a layer without the causal mask
    no_mask = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_kv,
                                  positions=pos, base=base, causal=False, **w)
    assert not np.allclose(no_mask, theirs, atol=1e-3)


def test_layer_positions_after_a_cache_equal_transformers():
    """Positions 5..10 (tokens after a cache), causal among themselves."""
    w = _weights(32, 4, 2, 8, bias=False)
    attn, rotary = _hf_layer("llama", 32, 4, 2, 8, 10000.0, w)
    x = RNG.normal(size=(1, 6, 32))
    pos = np.arange(5, 11)
    theirs = _hf_forward(attn, rotary, x, pos)
    ours = ref.llama_attention(x, n_heads=4, n_kv_heads=2, positions=pos, **w)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
    from_zero = ref.llama_attention(x, n_heads=4, n_kv_heads=2, **w)
    # a shift of every position leaves the scores unchanged (RoPE is relative)
    np.testing.assert_allclose(from_zero, theirs, rtol=0, atol=1e-5)


def test_qwen2_biases_matter():
    """Leaving Qwen2's q/k/v biases out of our layer breaks the match."""
    w = _weights(32, 4, 2, 8, bias=True)
    attn, rotary = _hf_layer("qwen2", 32, 4, 2, 8, 1000000.0, w)
    x = RNG.normal(size=(1, 5, 32))
    theirs = _hf_forward(attn, rotary, x, np.arange(5))
    no_bias = {k: v for k, v in w.items() if not k.startswith("b_")}
    ours = ref.llama_attention(x, n_heads=4, n_kv_heads=2, base=1000000.0,
                               **no_bias)
    assert not np.allclose(ours, theirs, atol=1e-3)


def test_mistral_config_defaults_are_the_cited_mistral_7b_numbers():
    """Chapter 15 cites Mistral-7B-v0.1: 32 layers, 32 query heads, 8 KV
    heads, hidden size 4096 (head size 128), sliding window 4096.
    transformers documents MistralConfig()'s defaults as that model's."""
    from transformers import MistralConfig
    cfg = MistralConfig()
    got = (cfg.num_hidden_layers, cfg.num_attention_heads,
           cfg.num_key_value_heads, cfg.hidden_size, cfg.sliding_window)
    assert got == (32, 32, 8, 4096, 4096)
    assert cfg.hidden_size // cfg.num_attention_heads == 128
