"""Attention with sinks: the answer key against transformers' GptOssAttention
(eager attention, a tiny configuration, random weights, float64), on a
sliding-window layer and a full layer; the book's sliding-window mask against
transformers' for gpt-oss; the chapter's gpt-oss numbers against
transformers' GptOssConfig defaults.

Each comparison is also run with a flipped convention (the sink left out,
the sink added to the values, one sink for all heads, a window one too long)
and must then fail. Skipped, with the reason, when torch or transformers is
missing (`make torch` installs both).
"""

from pathlib import Path

import numpy as np
import pytest

from attnbook import reference as ref
from optional import chapter_cell, imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(
    globals(), torch="torch", GptOssConfig="transformers:GptOssConfig",
    masks="transformers.masking_utils",
    gpt_oss="transformers.models.gpt_oss.modeling_gpt_oss")

D, H, H_KV, HS, WINDOW, N = 24, 4, 2, 6, 3, 9
CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "19_local_global_sinks.ipynb"


def _tiny(window=WINDOW):
    cfg = GptOssConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=H_KV,
                       head_dim=HS, num_hidden_layers=2, sliding_window=window,
                       num_local_experts=2, intermediate_size=8, attention_bias=True)
    cfg._attn_implementation = "eager"
    return cfg


def _their_mask(cfg, layer_type, n):
    x = torch.zeros(1, n, D, dtype=torch.float64)
    make = (masks.create_sliding_window_causal_mask if layer_type == "sliding_attention"
            else masks.create_causal_mask)
    m = make(config=cfg, inputs_embeds=x, attention_mask=None, past_key_values=None,
             position_ids=torch.arange(n)[None], allow_is_causal_skip=False)
    return m  # (1, 1, n, n) additive: 0 = may attend


def _run(layer_idx, seed=0):
    """GptOssAttention's output and weights, and the q, k, v it attends with."""
    cfg = _tiny()
    torch.manual_seed(seed)
    attn = gpt_oss.GptOssAttention(cfg, layer_idx=layer_idx).double().eval()
    with torch.no_grad():
        attn.sinks.normal_(0.0, 2.0)  # torch.empty by default: give it values
    x = torch.randn(2, N, D, dtype=torch.float64)
    cos, sin = gpt_oss.GptOssRotaryEmbedding(cfg)(x, torch.arange(N)[None].expand(2, N))
    mask = _their_mask(cfg, cfg.layer_types[layer_idx], N)
    with torch.no_grad():
        out, weights = attn(x, (cos, sin), mask)

        def heads(proj):
            return proj(x).view(2, N, -1, HS).transpose(1, 2)
        q, k = gpt_oss.apply_rotary_pos_emb(heads(attn.q_proj), heads(attn.k_proj), cos, sin)
        v = heads(attn.v_proj)
    group = H // H_KV
    np_ = {n: t.numpy() for n, t in (("q", q), ("k", k), ("v", v))}
    k_rep = np.repeat(np_["k"], group, axis=1)  # query head h reads KV head h // group
    v_rep = np.repeat(np_["v"], group, axis=1)
    w_o = attn.o_proj.weight.detach().numpy().T
    b_o = attn.o_proj.bias.detach().numpy()
    sinks = attn.sinks.detach().numpy().copy()
    return cfg, out.numpy(), weights.numpy(), np_["q"], k_rep, v_rep, sinks, w_o, b_o, mask


def _ours(q, k, v, sinks, mask, w_o, b_o, attention=ref.attention_with_sinks):
    o, w = attention(q, k, v, sinks, mask=mask)
    o = np.swapaxes(o, 1, 2).reshape(o.shape[0], o.shape[2], -1)  # (B, N, H * HS)
    return o @ w_o + b_o, w


def _book_mask(cfg, layer_idx, n):
    if cfg.layer_types[layer_idx] == "sliding_attention":
        return ref.sliding_window_mask(n, n, cfg.sliding_window)
    return ref.causal_mask(n)


@pytest.mark.parametrize("layer_idx", [0, 1], ids=["sliding", "full"])
def test_attention_with_sinks_equals_gpt_oss_attention(layer_idx):
    cfg, out, weights, q, k, v, sinks, w_o, b_o, _ = _run(layer_idx)
    assert cfg.layer_types == ["sliding_attention", "full_attention"]
    mine, w = _ours(q, k, v, sinks, _book_mask(cfg, layer_idx, N), w_o, b_o)
    np.testing.assert_allclose(w, weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mine, out, rtol=0, atol=1e-12)
    # the rows sum to 1 minus the sink's share, which is not 0
    share = 1 - w.sum(axis=-1)
    assert share.min() > 1e-6 and share.max() < 1


def test_sliding_and_full_layers_differ():
    """The window matters on this case: a test that passed with either mask
    would not test the window."""
    cfg, out, *_ = _run(0)
    _, _, _, q, k, v, sinks, w_o, b_o, _ = _run(0)
    full, _ = _ours(q, k, v, sinks, ref.causal_mask(N), w_o, b_o)
    assert not np.allclose(full, out, atol=1e-6)


def _sink_left_out(q, k, v, sinks, mask=None):
    return ref.scaled_dot_product_attention(q, k, v, mask=mask)


def _sink_added_to_values(q, k, v, sinks, mask=None):
    o, w = ref.attention_with_sinks(q, k, v, sinks, mask=mask)
    share = 1 - w.sum(axis=-1, keepdims=True)  # (..., H, N_q, 1)
    return o + share * sinks[:, None, None], w


def _one_sink_for_all_heads(q, k, v, sinks, mask=None):
    return ref.attention_with_sinks(q, k, v, np.full_like(sinks, sinks[0]), mask=mask)


@pytest.mark.parametrize("wrong", [_sink_left_out, _sink_added_to_values,
                                   _one_sink_for_all_heads])
@pytest.mark.parametrize("layer_idx", [0, 1], ids=["sliding", "full"])
def test_flipped_conventions_fail(wrong, layer_idx):
    cfg, out, weights, q, k, v, sinks, w_o, b_o, _ = _run(layer_idx)
    mine, _ = _ours(q, k, v, sinks, _book_mask(cfg, layer_idx, N), w_o, b_o, attention=wrong)
    assert np.abs(mine - out).max() > 1e-3


@pytest.mark.parametrize("window", [1, 3, 5, 128])
def test_window_counts_the_query_itself(window):
    """transformers' gpt-oss sliding mask: `window` keys, the query's own
    included, equal to the book's sliding_window_mask; window + 1 is not."""
    n = max(12, window + 4)
    theirs = _their_mask(_tiny(window), "sliding_attention", n)[0, 0].numpy() == 0
    assert np.array_equal(theirs, ref.sliding_window_mask(n, n, window))
    assert theirs.sum(axis=1).max() == window
    assert not np.array_equal(theirs, ref.sliding_window_mask(n, n, window + 1))
    assert not np.array_equal(theirs, ref.sliding_window_mask(n, n, max(window - 1, 1))) \
        or window == 1


def test_fully_masked_row_has_zero_output_in_gpt_oss_too():
    """transformers' eager gpt-oss attention gives a row whose keys are all
    masked weights 0 and output 0, like the answer key."""
    cfg, _, _, q, k, v, sinks, w_o, b_o, _ = _run(1)
    attn = gpt_oss.GptOssAttention(cfg, layer_idx=1).double().eval()
    with torch.no_grad():
        attn.sinks.copy_(torch.tensor(sinks))
    hidden = np.ones((N, N), dtype=bool)
    hidden[2] = False  # query 2 may attend to nothing
    additive = torch.tensor(np.where(hidden, 0.0, -np.inf))[None, None]
    t = {n: torch.tensor(a) for n, a in (("q", q), ("k", k), ("v", v))}
    attn.num_key_value_groups = 1  # k and v are already repeated
    with torch.no_grad():
        out, w = gpt_oss.eager_attention_forward(attn, t["q"], t["k"], t["v"], additive,
                                                 scaling=HS ** -0.5)
    mine, mine_w = ref.attention_with_sinks(q, k, v, sinks, mask=hidden)
    assert np.abs(w.numpy()[:, :, 2]).max() == 0 and np.abs(mine_w[:, :, 2]).max() == 0
    np.testing.assert_allclose(np.swapaxes(mine, 1, 2), out.numpy(), rtol=0, atol=1e-12)


def _chapter_cell(cell_id):
    return chapter_cell(CHAPTER, cell_id)


def test_chapter_gpt_oss_numbers_are_transformers_defaults():
    """The chapter's gpt-oss-120b numbers are GptOssConfig's defaults
    (transformers/models/gpt_oss/configuration_gpt_oss.py)."""
    page = _chapter_cell("cfg-models")["gpt_oss_120b"]
    cfg = GptOssConfig()
    for key, value in page.items():
        if key != "layer_types":
            assert getattr(cfg, key) == value, key
    assert cfg.layer_types == page["layer_types"]


@pytest.mark.parametrize("window", [2, 4, 7])
def test_mistral_window_in_transformers_keeps_w_keys(window):
    """Chapter 19 says transformers' MistralModel keeps W keys a row, the
    query's own included (masking_utils.sliding_window_overlay: kv_idx >
    q_idx - sliding_window), while Mistral's paper counts W + 1 (positions
    i - W .. i). Catches the flip to the paper's convention: a mask of
    window + 1 keys must differ."""
    from transformers import MistralConfig
    cfg = MistralConfig(hidden_size=D, num_attention_heads=H, num_key_value_heads=H_KV,
                        head_dim=HS, num_hidden_layers=1, sliding_window=window,
                        intermediate_size=8)
    cfg._attn_implementation = "eager"
    n = window + 5
    x = torch.zeros(1, n, D, dtype=torch.float64)
    m = masks.create_sliding_window_causal_mask(
        config=cfg, inputs_embeds=x, attention_mask=None, past_key_values=None,
        position_ids=torch.arange(n)[None], allow_is_causal_skip=False)
    theirs = m[0, 0].numpy() == 0
    assert theirs.sum(axis=1).max() == window
    assert np.array_equal(theirs, ref.sliding_window_mask(n, n, window))
    assert not np.array_equal(theirs, ref.sliding_window_mask(n, n, window + 1))
