"""Differential attention: the answer key (``differential_attention``,
``differential_lambda``, ``differential_lambda_init``) rebuilt into a whole
layer and compared with transformers' ``DiffLlamaAttention`` (a tiny
configuration, random weights, nothing downloaded, float64): projections,
RoPE, the two maps of each head pair, lambda, the head-wise RMSNorm, the
(1 - lambda_init) factor, the output projection.

Each comparison is also run with a flipped convention and must then fail;
each flip is named. Skipped, with the reason, when torch or transformers is
missing (`make torch`).
"""

from pathlib import Path

import numpy as np
import pytest

from attnbook import reference as ref
from optional import chapter_cell, imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(
    globals(), torch="torch", DiffLlamaConfig="transformers:DiffLlamaConfig",
    dl="transformers.models.diffllama.modeling_diffllama")

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "20b_differential_attention.ipynb"
HID, NH, NKV, HD, NT, LAYER = 32, 4, 2, 8, 9, 2


def _layer(seed=0, n_kv=NKV, layer_idx=LAYER):
    cfg = DiffLlamaConfig(hidden_size=HID, num_attention_heads=NH, num_key_value_heads=n_kv,
                          head_dim=HD, num_hidden_layers=4, intermediate_size=16,
                          vocab_size=32)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    layer = dl.DiffLlamaAttention(cfg, layer_idx=layer_idx).double().eval()
    with torch.no_grad():                       # lambda far enough from lambda_init
        for name in ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2"):
            getattr(layer, name).normal_(0.0, 0.4)
    rotary = dl.DiffLlamaRotaryEmbedding(cfg)
    return cfg, layer, rotary


def _theirs(layer, rotary, x):
    xt = torch.tensor(x)
    pos = torch.arange(x.shape[1])[None]
    cos, sin = rotary(xt, pos)
    mask = torch.full((x.shape[1],) * 2, float("-inf")).triu(1)[None, None].double()
    with torch.no_grad():
        out, weights = layer(xt, (cos.double(), sin.double()), mask)
    return out.numpy(), weights.numpy()


def _ours(layer, x, *, lam_sign=1.0, use_init_in_lambda=True, init_offset=0,
          norm="after", factor=True, pairing="halves", swap_maps=False):
    """DiffLlamaAttention in NumPy around ref.differential_attention, with
    switches that flip one convention each."""
    p = {n: t.detach().numpy() for n, t in layer.named_parameters()}
    b_, n_ = x.shape[:2]
    n_kv = layer.config.num_key_value_heads
    rep = NH // n_kv
    pos = np.arange(n_)
    base = layer.config.rope_parameters["rope_theta"]
    q = ref.rope(np.swapaxes((x @ p["q_proj.weight"].T).reshape(b_, n_, NH, HD), 1, 2),
                 pos, base=base)                                    # (B, H, N, d)
    k = ref.rope(np.swapaxes((x @ p["k_proj.weight"].T).reshape(b_, n_, n_kv, HD), 1, 2),
                 pos, base=base)                                    # (B, Hkv, N, d)
    v = np.swapaxes((x @ p["v_proj.weight"].T).reshape(b_, n_, n_kv, HD), 1, 2)
    half = NH // 2
    if pairing == "halves":             # head j with head j + H/2
        first, second = np.arange(half), np.arange(half) + half
    else:                               # neighbours 2j, 2j + 1
        first, second = np.arange(0, NH, 2), np.arange(1, NH, 2)
    q1, q2 = q[:, first], q[:, second]                              # (B, H/2, N, d)
    k1, k2 = k[:, first // rep], k[:, second // rep]
    m = first // rep % (n_kv // 2)
    v2 = np.concatenate([v[:, m], v[:, m + n_kv // 2]], axis=-1)    # (B, H/2, N, 2d)
    if swap_maps:
        q1, k1, q2, k2 = q2, k2, q1, k1
    lam_init = ref.differential_lambda_init(layer.layer_idx + init_offset)
    lam = ref.differential_lambda(p["lambda_q1"], p["lambda_k1"], p["lambda_q2"],
                                  p["lambda_k2"], lam_init if use_init_in_lambda else 0.0)
    mask = ref.causal_mask(n_)
    eps = layer.groupnorm.eps
    if norm == "after":
        o, w = ref.differential_attention(q1, k1, q2, k2, v2, lam_sign * lam, mask=mask,
                                          lambda_init=lam_init, eps=eps)
    elif norm == "none":
        o, w = ref.differential_attention(q1, k1, q2, k2, v2, lam_sign * lam, mask=mask)
        o = (1 - lam_init) * o
    else:                               # each map's output normalised, then subtracted
        def rms(t):
            return t / np.sqrt((t * t).mean(-1, keepdims=True) + eps)
        o1, _ = ref.scaled_dot_product_attention(q1, k1, v2, mask)
        o2, _ = ref.scaled_dot_product_attention(q2, k2, v2, mask)
        o = (1 - lam_init) * (rms(o1) - lam_sign * lam * rms(o2))
    if not factor:
        o = o / (1 - lam_init)
    o = np.swapaxes(o, 1, 2).reshape(b_, n_, NH * HD)
    return o @ p["o_proj.weight"].T


@pytest.mark.parametrize("n_kv", [2, 4], ids=["GQA 4:2", "MHA"])
def test_answer_key_equals_diffllama_attention(n_kv):
    _, layer, rotary = _layer(n_kv=n_kv)
    x = np.random.default_rng(1).normal(size=(2, NT, HID))
    theirs, _ = _theirs(layer, rotary, x)
    # RoPE angles and the softmax are float32 inside transformers
    np.testing.assert_allclose(_ours(layer, x), theirs, rtol=0, atol=1e-6)


FLIPS = {
    "lambda sign (maps added)": dict(lam_sign=-1.0),
    "missing lambda_init in lambda": dict(use_init_in_lambda=False),
    "lambda_init of layer l + 1 (depth counted from 1)": dict(init_offset=1),
    "the norm's placement (each map normalised before the subtraction)": dict(norm="before"),
    "no head-wise norm": dict(norm="none"),
    "no (1 - lambda_init) factor": dict(factor=False),
    "heads paired as neighbours (2j, 2j+1) instead of j, j + H/2": dict(pairing="neighbours"),
    "maps swapped (the second minus lambda times the first)": dict(swap_maps=True),
}


@pytest.mark.parametrize("flip", list(FLIPS))
def test_flipped_conventions_fail(flip):
    _, layer, rotary = _layer()
    x = np.random.default_rng(1).normal(size=(2, NT, HID))
    theirs, _ = _theirs(layer, rotary, x)
    assert np.abs(_ours(layer, x, **FLIPS[flip]) - theirs).max() > 1e-4, flip


def test_lambda_init_schedule_is_transformers():
    for layer_idx in range(12):
        assert ref.differential_lambda_init(layer_idx) == pytest.approx(
            dl.lambda_init_fn(layer_idx), abs=1e-15)


def test_first_map_weights_are_transformers():
    """The weights DiffLlamaAttention returns are the first map of each query
    head; the answer key's weights are the differential map w1 - lam w2."""
    _, layer, rotary = _layer()
    x = np.random.default_rng(1).normal(size=(1, NT, HID))
    _, weights = _theirs(layer, rotary, x)                     # (1, H, N, N)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-12)
    assert np.allclose(np.triu(weights[0, 0], 1), 0)


def test_chapter_diffllama_numbers_are_transformers_defaults():
    """The chapter's DiffLlama numbers are DiffLlamaConfig's defaults
    (transformers/models/diffllama/configuration_diffllama.py)."""
    page = chapter_cell(CHAPTER, "da-config")["diffllama"]
    cfg = DiffLlamaConfig()
    for key, value in page.items():
        assert getattr(cfg, key) == value, key
