"""Gemma 4's key-value tricks: the answer key (``gemma4_attention``,
``proportional_rope``, ``kv_source_layers``) against transformers'
``Gemma4TextAttention`` and ``Gemma4TextConfig`` (eager, a tiny configuration
with ``attention_k_eq_v`` and ``num_kv_shared_layers`` set, random weights,
float64 weights; cos and sin come in float32, so agreement is to about 1e-6):
a sliding layer, a global layer whose key is its value, and a layer that
reuses an earlier layer's keys and values. The chapter's configuration
numbers against ``Gemma4TextConfig``'s defaults.

Each comparison is also run with one convention flipped in the answer key
(monkeypatched) and must then fail: the test's name says which flip.
Skipped, with the reason, when torch or transformers is missing.
"""

from pathlib import Path

import numpy as np
import pytest

from attnbook import reference as ref
from attnbook.reference import kv_sharing as K
from optional import chapter_cell, imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(
    globals(), torch="torch", Gemma4TextConfig="transformers:Gemma4TextConfig",
    m="transformers.models.gemma4.modeling_gemma4",
    masks="transformers.masking_utils")

N, D, H, WINDOW = 11, 32, 4, 4
TYPES = ["sliding_attention", "full_attention"] * 3
TOL = 1e-5
CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "19b_gemma4_kv_sharing.ipynb"


def _config(**kw):
    cfg = Gemma4TextConfig(
        hidden_size=D, num_attention_heads=H, num_key_value_heads=2, head_dim=8,
        global_head_dim=16, num_global_key_value_heads=1, num_hidden_layers=6,
        sliding_window=WINDOW, attention_k_eq_v=True, num_kv_shared_layers=2,
        vocab_size=50, intermediate_size=16, hidden_size_per_layer_input=4,
        vocab_size_per_layer_input=50, layer_types=list(TYPES), **kw)
    cfg._attn_implementation = "eager"
    return cfg


@pytest.fixture(scope="module")
def setup():
    cfg = _config()
    x = torch.tensor(np.random.default_rng(1).normal(size=(1, N, D)))
    pos = torch.arange(N)[None]
    rot = m.Gemma4TextRotaryEmbedding(cfg)
    layers, shared = {}, {}
    torch.manual_seed(0)
    for i in (0, 1, 2, 3, 4, 5):     # producers 2 (sliding) and 3 (full), then readers
        attn = m.Gemma4TextAttention(cfg, i).double().eval()
        with torch.no_grad():
            for name, p in attn.named_parameters():
                p.normal_(0.0, 0.3)
                if "norm" in name:
                    p.add_(1.0)
        kind = TYPES[i]
        cos, sin = rot(x, pos, kind)
        make = (masks.create_sliding_window_causal_mask if kind == "sliding_attention"
                else masks.create_causal_mask)
        mask = make(config=cfg, inputs_embeds=x, attention_mask=None,
                    past_key_values=None, position_ids=pos)
        with torch.no_grad():
            out, _ = attn(x, (cos.double(), sin.double()), mask, shared)
        layers[i] = dict(out=out[0].numpy(), attn=attn,
                         params={k: v.detach().numpy() for k, v in attn.state_dict().items()})
    return dict(cfg=cfg, x=x[0].numpy(), layers=layers, shared=shared)


def _ours(setup, i, shared_kv=None):
    cfg, kind = setup["cfg"], TYPES[i]
    lc = cfg.per_layer_config[i]
    rp = cfg.rope_parameters[kind]
    return K.gemma4_attention(
        setup["x"], setup["layers"][i]["params"], n_heads=H,
        n_kv_heads=lc.num_key_value_heads, head_dim=lc.head_dim, layer_type=kind,
        window=WINDOW, base=rp["rope_theta"], partial_factor=rp.get("partial_rotary_factor", 1.0),
        k_eq_v=kind == "full_attention", shared_kv=shared_kv)


def test_the_configuration_as_the_chapter_reads_it(setup):
    cfg = setup["cfg"]
    assert cfg.kv_sharing_modes == [None, None, "store", "store", "reuse", "reuse"]
    assert ref.kv_source_layers(TYPES, 2) == [0, 1, 2, 3, 2, 3]
    assert cfg.per_layer_config[1].head_dim == 16 and cfg.per_layer_config[0].head_dim == 8
    full = setup["layers"][3]["attn"]
    assert full.v_proj is None                                  # k_eq_v: no value projection
    assert not hasattr(setup["layers"][4]["attn"], "k_proj")    # a reader has no KV weights


@pytest.mark.parametrize("layers", [
    ["sliding_attention"] * 5 + ["full_attention"],
    (["sliding_attention"] * 5 + ["full_attention"]) * 5,
    ["full_attention", "sliding_attention"] * 4])
@pytest.mark.parametrize("shared", [0, 1, 3])
def test_kv_source_layers_equals_kv_sharing_modes(layers, shared):
    """Each reader reads the layer whose mode is "store" for its type."""
    if len(set(layers[: len(layers) - shared])) < len(set(layers)):
        with pytest.raises(ValueError, match="no\nearlier non-shared|no earlier"):
            ref.kv_source_layers(layers, shared)
        return
    cfg = Gemma4TextConfig(num_hidden_layers=len(layers), layer_types=list(layers),
                           num_kv_shared_layers=shared, vocab_size=50, hidden_size=8,
                           intermediate_size=8, num_attention_heads=2, num_key_value_heads=1,
                           head_dim=4, global_head_dim=4, hidden_size_per_layer_input=2,
                           vocab_size_per_layer_input=50)
    modes = cfg.kv_sharing_modes
    store = {layers[i]: i for i, mode in enumerate(modes) if mode == "store"}
    want = [store[layers[i]] if mode == "reuse" else i for i, mode in enumerate(modes)]
    assert ref.kv_source_layers(layers, shared) == want


@pytest.mark.parametrize("i", [2, 3])
def test_one_layer_equals_gemma4_text_attention(setup, i):
    out, _ = _ours(setup, i)
    assert np.abs(out - setup["layers"][i]["out"]).max() < TOL
    assert np.abs(setup["layers"][i]["out"]).max() > 0.5


@pytest.mark.parametrize("i", [4, 5])
def test_a_reader_layer_equals_gemma4_text_attention(setup, i):
    """Layer i computes no keys or values: it reads those its source stored."""
    src = ref.kv_source_layers(TYPES, 2)[i]
    _, kv = _ours(setup, src)
    k_t, v_t = setup["shared"][TYPES[i]]                  # what transformers stored
    assert np.abs(kv[0] - k_t[0].numpy()).max() < TOL
    assert np.abs(kv[1] - v_t[0].numpy()).max() < TOL
    out, _ = _ours(setup, i, shared_kv=kv)
    assert np.abs(out - setup["layers"][i]["out"]).max() < TOL
    # flip: the reader reads the FIRST earlier layer of its type, not the last
    _, kv_first = _ours(setup, TYPES.index(TYPES[i]))
    bad, _ = _ours(setup, i, shared_kv=kv_first)
    assert np.abs(bad - setup["layers"][i]["out"]).max() > 1e-3


_rms = K._rms
_prope = K.proportional_rope
_rope = K.rope


def _value_scaled(x, eps, weight=None):
    """the value RMS-normed WITH the key's learned scale (value == key before RoPE)"""
    return _rms(x, eps, weight)


def _value_roped(x, positions, *, base=1e6, partial_factor=0.25):
    """RoPE over the whole head (partial_factor ignored)"""
    return _prope(x, positions, base=base, partial_factor=1.0)


def _theta_over_rotated_width(x, positions, *, base=1e6, partial_factor=0.25):
    """partial RoPE whose frequencies divide by the rotated width, not the head's"""
    d = x.shape[-1]
    r = int(partial_factor * d // 2) * 2
    a, b = x[..., : d // 2], x[..., d // 2:]
    y = np.concatenate([a[..., : r // 2], b[..., : r // 2]], axis=-1)
    y = _rope(y, positions, base=base)
    a = np.concatenate([y[..., : r // 2], a[..., r // 2:]], axis=-1)
    b = np.concatenate([y[..., r // 2:], b[..., r // 2:]], axis=-1)
    return np.concatenate([a, b], axis=-1)


def _interleaved(t, positions, *, base=10000.0):
    """sliding layers' RoPE with interleaved pairs instead of split halves"""
    return _rope(t, positions, base=base, interleaved=True)


FLIPS = {
    "rope_over_the_whole_global_head": (3, "proportional_rope", _value_roped),
    "partial_rope_frequencies_over_rotated_width": (3, "proportional_rope",
                                                    _theta_over_rotated_width),
    "sliding_rope_interleaved": (2, "rope", _interleaved),
}


@pytest.mark.parametrize("flip", list(FLIPS))
def test_a_flipped_convention_fails(setup, monkeypatch, flip):
    i, name, fn = FLIPS[flip]
    monkeypatch.setattr(K, name, fn)
    out, _ = _ours(setup, i)
    assert np.abs(out - setup["layers"][i]["out"]).max() > 1e-3, flip


def test_k_eq_v_flips_fail(setup, monkeypatch):
    """The value of a k_eq_v layer is the key projection RMS-normed with NO
    scale and NOT rotated: scaling it like the key (flip 1) or rotating it
    (flip 2) breaks the agreement."""
    lay = setup["layers"][3]
    p = lay["params"]
    x = setup["x"]
    raw = (x @ p["k_proj.weight"].T).reshape(N, 1, 16).transpose(1, 0, 2)
    k_t, v_t = setup["shared"]["full_attention"]
    v_ok = _rms(raw, 1e-6)
    assert np.abs(v_ok - v_t[0].numpy()).max() < TOL
    v_scaled = _rms(raw, 1e-6, p["k_norm.weight"])
    assert np.abs(v_scaled - v_t[0].numpy()).max() > 1e-3
    v_roped = K.proportional_rope(v_ok, np.arange(N), base=1e6, partial_factor=0.25)
    assert np.abs(v_roped - v_t[0].numpy()).max() > 1e-3
    # the key is the value times the scale, then rotated: one stored tensor gives both
    k_from_v = K.proportional_rope(v_ok * p["k_norm.weight"], np.arange(N), base=1e6,
                                   partial_factor=0.25)
    assert np.abs(k_from_v - k_t[0].numpy()).max() < TOL


def test_the_chapter_cites_gemma4_text_config_defaults():
    if not CHAPTER.exists():
        pytest.skip("chapter not written")
    cfg = Gemma4TextConfig()
    page = chapter_cell(CHAPTER, "cfg-g4")["gemma4"]
    for key, value in page.items():
        if key == "global_head_dim":
            assert cfg.per_layer_config[cfg.layer_types.index("full_attention")].head_dim == value
        elif key in ("head_dim", "num_key_value_heads"):   # per layer: a sliding layer's
            layer = cfg.per_layer_config[cfg.layer_types.index("sliding_attention")]
            assert getattr(layer, key) == value, key
        elif key == "layer_types":
            assert list(cfg.layer_types) == value
        elif key == "rope_parameters":
            assert cfg.rope_parameters == value
        else:
            assert getattr(cfg, key) == value, key
