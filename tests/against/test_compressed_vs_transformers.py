"""DeepSeek-V4's compressed attention: the answer key (``compress_kv``,
``compress_kv_overlapping``, ``compressed_causal_mask``, ``rope_tail``,
``deepseek_v4_attention``) against transformers' ``DeepseekV4HCACompressor``,
``DeepseekV4CSACompressor`` and ``DeepseekV4Attention`` (eager, a tiny
configuration, random weights, float64 weights; transformers computes RoPE's
cos and sin in float32, so agreement is to about 1e-6), for the three layer
types; the chapter's configuration numbers against ``DeepseekV4Config``'s
defaults.

Each comparison is also run with one convention flipped in the answer key
(monkeypatched) and must then fail: the test's name says which flip.
Skipped, with the reason, when torch or transformers is missing.
"""

from pathlib import Path

import numpy as np
import pytest

from attnbook import reference as ref
from attnbook.reference import compressed as C
from optional import chapter_cell, imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(
    globals(), torch="torch", DeepseekV4Config="transformers:DeepseekV4Config",
    m="transformers.models.deepseek_v4.modeling_deepseek_v4",
    sliding_mask="transformers.masking_utils:create_sliding_window_causal_mask")

N, D, H, HD, ROPE, W, G = 19, 32, 4, 16, 4, 5, 2
RATES = {"compressed_sparse_attention": 2, "heavily_compressed_attention": 4}
TOL = 1e-5
CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "21b_compressed_attention.ipynb"


def _config(layer_type):
    cfg = DeepseekV4Config(
        hidden_size=D, num_attention_heads=H, head_dim=HD, q_lora_rank=12,
        num_hidden_layers=1, layer_types=[layer_type], sliding_window=W, o_groups=G,
        o_lora_rank=6, index_n_heads=3, index_head_dim=8, index_topk=2,
        partial_rotary_factor=ROPE / HD, compress_rates=dict(RATES), vocab_size=50,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=8)
    cfg._attn_implementation = "eager"
    return cfg


def _randomize(module):
    """Every parameter random (norm weights near 1, sinks and biases not 0)."""
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.normal_(0.0, 0.3)
            if "norm" in name:
                p.add_(1.0)


def _run(layer_type):
    cfg = _config(layer_type)
    attn = m.DeepseekV4Attention(cfg, 0).double().eval()
    _randomize(attn)
    x = torch.tensor(np.random.default_rng(1).normal(size=(1, N, D)))
    pos = torch.arange(N)[None]
    rot = m.DeepseekV4RotaryEmbedding(cfg)
    pe = {"main": rot(x, pos, "main"), "compress": rot(x, pos, "compress")}
    mask = sliding_mask(config=cfg, inputs_embeds=x, attention_mask=None,
                        past_key_values=None, position_ids=pos)
    with torch.no_grad():
        out, _ = attn(x, pe, pos, mask)
    params = {k: v.detach().numpy() for k, v in attn.state_dict().items()}
    label = "main" if layer_type == "sliding_attention" else "compress"
    base = cfg.rope_parameters[label]["rope_theta"]
    return dict(attn=attn, x=x, pos=pos, out=out[0].numpy(), params=params, base=base,
                cfg=cfg)


@pytest.fixture(scope="module")
def runs():
    return {t: _run(t) for t in ("sliding_attention", "heavily_compressed_attention",
                                 "compressed_sparse_attention")}


def _ours(r, layer_type):
    return C.deepseek_v4_attention(
        r["x"][0].numpy(), r["params"], n_heads=H, head_dim=HD, rope_dim=ROPE, window=W,
        o_groups=G, layer_type=layer_type, rate=RATES.get(layer_type), index_heads=3,
        index_topk=2, base=r["base"])


TYPES = ["sliding_attention", "heavily_compressed_attention", "compressed_sparse_attention"]


@pytest.mark.parametrize("layer_type", TYPES)
def test_one_layer_equals_deepseek_v4_attention(runs, layer_type):
    r = runs[layer_type]
    assert np.abs(_ours(r, layer_type) - r["out"]).max() < TOL
    assert np.abs(r["out"]).max() > 0.5          # a real output, not near zero


# Flips of the answer key, each monkeypatched in, each must break the agreement.
def _no_rotate_back(x, positions, rope_dim, *, base=10000.0):
    """the output's RoPE slice NOT rotated back (positions -i ignored)"""
    p = np.asarray(positions)
    if (p <= 0).all() and p.size > 1:
        return np.asarray(x, dtype=float)
    return _rope_tail(x, positions, rope_dim, base=base)


def _rope_on_head(x, positions, rope_dim, *, base=10000.0):
    """RoPE on the FIRST rope_dim channels instead of the last"""
    x = np.asarray(x, dtype=float)
    head = ref.rope(x[..., :rope_dim], positions, base=base, interleaved=True)
    return np.concatenate([head, x[..., rope_dim:]], axis=-1)


def _rope_half_split(x, positions, rope_dim, *, base=10000.0):
    """split-halves RoPE pairing instead of interleaved"""
    x = np.asarray(x, dtype=float)
    tail = ref.rope(x[..., -rope_dim:], positions, base=base, interleaved=False)
    return np.concatenate([x[..., :-rope_dim], tail], axis=-1)


def _sinks_ignored(q, k, v, sinks, mask=None):
    """per-head sinks left out (plain softmax)"""
    return _attention_with_sinks(q, k, v, np.full_like(sinks, -1e30), mask)


def _one_sink(q, k, v, sinks, mask=None):
    """one sink for all heads (their mean)"""
    return _attention_with_sinks(q, k, v, np.full_like(sinks, sinks.mean()), mask)


def _groups_swapped(o, w_a, w_b, groups):
    """grouped projection with the groups' weights in reverse order"""
    wa = w_a.reshape(groups, -1, w_a.shape[1])[::-1].reshape(w_a.shape)
    return _grouped(o, wa, w_b, groups)


def _window_off_by_one(n_q, n_k, window):
    """sliding window of window + 1 keys"""
    return _sliding(n_q, n_k, window + 1)


_rope_tail = C.rope_tail
_attention_with_sinks = C.attention_with_sinks
_grouped = C.grouped_output_projection
_sliding = C.sliding_window_mask

FLIPS = {
    "output_not_rotated_back": ("rope_tail", _no_rotate_back),
    "rope_on_first_channels": ("rope_tail", _rope_on_head),
    "rope_half_split_pairs": ("rope_tail", _rope_half_split),
    "sinks_ignored": ("attention_with_sinks", _sinks_ignored),
    "one_sink_for_all_heads": ("attention_with_sinks", _one_sink),
    "output_groups_swapped": ("grouped_output_projection", _groups_swapped),
    "window_one_key_too_wide": ("sliding_window_mask", _window_off_by_one),
}


@pytest.mark.parametrize("flip", list(FLIPS))
def test_a_flipped_convention_fails_on_the_sliding_layer(runs, monkeypatch, flip):
    name, fn = FLIPS[flip]
    monkeypatch.setattr(C, name, fn)
    r = runs["sliding_attention"]
    assert np.abs(_ours(r, "sliding_attention") - r["out"]).max() > 1e-3, flip


def _mask_one_window_late(n, rate):
    """query t reads entry w only from the token AFTER its window ends"""
    t = np.arange(n)[:, None]
    return np.arange(n // rate)[None, :] < t // rate


def _mask_one_window_early(n, rate):
    """query t reads the window it is still inside (w <= (t + 1) // rate)"""
    t = np.arange(n)[:, None]
    return np.arange(n // rate)[None, :] <= (t + 1) // rate


def _softmax_over_channels(kv, gate_logits, position_bias, rate):
    """the compressor's softmax over the channels instead of the window"""
    n_win = kv.shape[-2] // rate
    kv_w = kv[: n_win * rate].reshape(n_win, rate, -1)
    z = gate_logits[: n_win * rate].reshape(n_win, rate, -1) + position_bias
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True) * kv_w).sum(axis=-2)


def _bias_ignored(kv, gate_logits, position_bias, rate):
    """the position bias left out of the gate"""
    return _compress(kv, gate_logits, np.zeros_like(position_bias), rate)


_compress = C.compress_kv
HCA_FLIPS = {
    "mask_one_window_late": ("compressed_causal_mask", _mask_one_window_late),
    "mask_one_window_early": ("compressed_causal_mask", _mask_one_window_early),
    "softmax_over_channels": ("compress_kv", _softmax_over_channels),
    "position_bias_ignored": ("compress_kv", _bias_ignored),
}


@pytest.mark.parametrize("flip", list(HCA_FLIPS))
def test_a_flipped_convention_fails_on_the_hca_layer(runs, monkeypatch, flip):
    name, fn = HCA_FLIPS[flip]
    monkeypatch.setattr(C, name, fn)
    r = runs["heavily_compressed_attention"]
    assert np.abs(_ours(r, "heavily_compressed_attention") - r["out"]).max() > 1e-3, flip


def _no_overlap(kv, gate_logits, position_bias, rate):
    """CSA windows without the overlap (the Cb half alone, like HCA)"""
    d = kv.shape[-1] // 2
    return _compress(kv[..., d:], gate_logits[..., d:], position_bias[:, d:], rate)


def _all_entries(scores, top_k, mask=None):
    """every allowed compressed entry kept (no top-k)"""
    return np.broadcast_to(mask, scores.shape).copy()


CSA_FLIPS = {
    "csa_windows_without_overlap": ("compress_kv_overlapping", _no_overlap),
    "csa_no_topk": ("topk_mask", _all_entries),
    "csa_mask_one_window_early": ("compressed_causal_mask", _mask_one_window_early),
}


@pytest.mark.parametrize("flip", list(CSA_FLIPS))
def test_a_flipped_convention_fails_on_the_csa_layer(runs, monkeypatch, flip):
    name, fn = CSA_FLIPS[flip]
    monkeypatch.setattr(C, name, fn)
    r = runs["compressed_sparse_attention"]
    assert np.abs(_ours(r, "compressed_sparse_attention") - r["out"]).max() > 1e-3, flip


def test_hca_compressor_entries_and_mask(runs):
    """DeepseekV4HCACompressor alone: its entries are compress_kv, RMS-normed,
    rotated at position w * rate; its block bias is -inf exactly where
    compressed_causal_mask is False."""
    r = runs["heavily_compressed_attention"]
    comp = r["attn"].compressor
    rate = RATES["heavily_compressed_attention"]
    with torch.no_grad():
        q_res = r["attn"].q_a_norm(r["attn"].q_a_proj(r["x"]))
        entries, bias = comp(r["x"], q_res, r["pos"], None, 0)
    p = {k[len("compressor."):]: v for k, v in r["params"].items()
         if k.startswith("compressor.")}
    x = r["x"][0].numpy()
    pooled = ref.compress_kv(x @ p["kv_proj.weight"].T, x @ p["gate_proj.weight"].T,
                             p["position_bias"], rate)                  # (N // rate, HD)
    assert pooled.shape == (N // rate, HD)                            # last window dropped
    ours = ref.rope_tail(ref.rms_norm(pooled, p["kv_norm.weight"]),
                         np.arange(N // rate) * rate, ROPE, base=r["base"])
    assert np.abs(ours - entries[0, 0].numpy()).max() < TOL
    hidden = torch.isinf(bias[0, 0]).numpy()
    assert np.array_equal(~hidden, ref.compressed_causal_mask(N, rate))
    # flips: rotated at the window's last token; softmax over channels; one late
    late = ref.rope_tail(ref.rms_norm(pooled, p["kv_norm.weight"]),
                         np.arange(N // rate) * rate + rate - 1, ROPE, base=r["base"])
    assert np.abs(late - entries[0, 0].numpy()).max() > 1e-3
    wrong = _softmax_over_channels(x @ p["kv_proj.weight"].T, x @ p["gate_proj.weight"].T,
                                   p["position_bias"], rate)
    assert np.abs(wrong - pooled).max() > 1e-3
    assert not np.array_equal(~hidden, _mask_one_window_late(N, rate))


def test_csa_compressor_entries_and_selection(runs):
    """DeepseekV4CSACompressor alone: overlapping entries (2 * rate tokens,
    stride rate), and the indexer's top-k among the entries the mask allows."""
    r = runs["compressed_sparse_attention"]
    comp = r["attn"].compressor
    rate = RATES["compressed_sparse_attention"]
    with torch.no_grad():
        q_res = r["attn"].q_a_norm(r["attn"].q_a_proj(r["x"]))
        entries, bias = comp(r["x"], q_res, r["pos"], None, 0)
    p = {k[len("compressor."):]: v for k, v in r["params"].items()
         if k.startswith("compressor.")}
    x = r["x"][0].numpy()
    args = (x @ p["kv_proj.weight"].T, x @ p["gate_proj.weight"].T, p["position_bias"], rate)
    pooled = ref.compress_kv_overlapping(*args)
    ours = ref.rope_tail(ref.rms_norm(pooled, p["kv_norm.weight"]),
                         np.arange(N // rate) * rate, ROPE, base=r["base"])
    assert np.abs(ours - entries[0, 0].numpy()).max() < TOL
    assert np.abs(_no_overlap(*args) - pooled).max() > 1e-3        # flip: no overlap
    kept = ~torch.isinf(bias[0, 0]).numpy()                           # (N, N // rate)
    allowed = ref.compressed_causal_mask(N, rate)
    assert not (kept & ~allowed).any()                                # never a future entry
    assert (kept.sum(axis=1) == np.minimum(allowed.sum(axis=1), 2)).all()   # top-2


def test_the_chapter_cites_deepseek_v4_config_defaults():
    if not CHAPTER.exists():
        pytest.skip("chapter not written")
    cfg = DeepseekV4Config()
    page = chapter_cell(CHAPTER, "cfg-v4")["deepseek_v4"]
    for key, value in page.items():
        if key == "compress_rates":
            assert cfg.compress_rates == value
        elif key == "layer_types":
            assert list(cfg.layer_types) == value
        else:
            assert getattr(cfg, key) == value, key
