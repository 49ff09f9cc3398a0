"""The gated delta rule: the answer key (``gated_delta_rule``, token by token,
and ``chunked_gated_delta_rule``) against transformers' Qwen3-Next functions
``torch_recurrent_gated_delta_rule`` and ``torch_chunk_gated_delta_rule``
(float64 inputs; they compute in float32, so agreement is to about 1e-6), and
against ``Qwen3NextGatedDeltaNet`` end to end (a tiny configuration, random
weights): projections, causal convolution, L2-normalised queries and keys,
beta and g from the token, the rule, the gated RMSNorm, the output
projection. The chapter's Qwen3-Next numbers against ``Qwen3NextConfig``'s
defaults.

Each comparison is also run with a flipped convention (no gate, the gate
applied after the update instead of before, beta on the value only, queries
not scaled) and must then fail. Skipped, with the reason, when torch or
transformers is missing (`make torch` installs both).
"""

import warnings
from pathlib import Path

import numpy as np
import pytest

from attnbook import reference as ref
from delta_rule_inputs import D_K, D_V, TOL, delta_inputs, transformers_delta
from optional import chapter_cell, imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(
    globals(), torch="torch", Qwen3NextConfig="transformers:Qwen3NextConfig",
    qn="transformers.models.qwen3_next.modeling_qwen3_next")

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "22b_hybrid_models.ipynb"


def _inputs(seed=0):
    return delta_inputs(seed)


def _theirs(fn, *args, **kwargs):
    return transformers_delta(torch, fn, *args, **kwargs)


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 4, 64], ids=lambda c: f"chunk={c}")
@pytest.mark.parametrize("which", ["recurrent", "chunk"])
def test_answer_key_equals_qwen3_next_functions(which, chunk_size):
    args = _inputs()
    fn = (qn.torch_recurrent_gated_delta_rule if which == "recurrent"
          else qn.torch_chunk_gated_delta_rule)
    kwargs = {} if which == "recurrent" else {"chunk_size": 4}
    o_t, s_t = _theirs(fn, *args, **kwargs)
    q, k, v, g, beta, s0 = args
    if chunk_size is None:
        o, s = ref.gated_delta_rule(q, k, v, g, beta, initial_state=s0)
    else:
        o, s = ref.chunked_gated_delta_rule(q, k, v, g, beta, chunk_size=chunk_size,
                                            initial_state=s0)
    np.testing.assert_allclose(o, o_t, rtol=0, atol=TOL)
    np.testing.assert_allclose(s, s_t, rtol=0, atol=TOL)


def _no_gate(q, k, v, g, beta, **kw):
    return ref.gated_delta_rule(q, k, v, np.zeros_like(g), beta, **kw)


def _gate_after(q, k, v, g, beta, *, initial_state):
    s, out = initial_state.copy(), np.zeros(v.shape)
    for t in range(q.shape[-2]):
        o_t, s = ref.delta_rule_step(s, q[..., t, :], k[..., t, :], v[..., t, :],
                                     np.zeros_like(g[..., t]), beta[..., t])
        s = np.exp(g[..., t])[..., None, None] * s                  # forget after
        out[..., t, :] = np.einsum("...kv,...k->...v", s, q[..., t, :]) / np.sqrt(D_K)
    return out, s


def _beta_on_value_only(q, k, v, g, beta, *, initial_state):
    s, out = initial_state.copy(), np.zeros(v.shape)
    for t in range(q.shape[-2]):
        s = np.exp(g[..., t])[..., None, None] * s
        delta = beta[..., t, None] * v[..., t, :] - np.einsum("...kv,...k->...v", s, k[..., t, :])
        s = s + k[..., t, :, None] * delta[..., None, :]
        out[..., t, :] = np.einsum("...kv,...k->...v", s, q[..., t, :]) / np.sqrt(D_K)
    return out, s


def _unscaled(q, k, v, g, beta, **kw):
    return ref.gated_delta_rule(q * np.sqrt(D_K), k, v, g, beta, **kw)


@pytest.mark.parametrize("wrong", [_no_gate, _gate_after, _beta_on_value_only, _unscaled])
def test_flipped_conventions_fail(wrong):
    args = _inputs(1)
    o_t, _ = _theirs(qn.torch_recurrent_gated_delta_rule, *args)
    q, k, v, g, beta, s0 = args
    o, _ = wrong(q, k, v, g, beta, initial_state=s0)
    assert np.abs(o - o_t).max() > 1e-3


# --- Qwen3NextGatedDeltaNet, end to end ---------------------------------------

HID, HK, HV, DK, DV, KERNEL, NT = 24, 2, 4, 8, 6, 4, 13


def _layer(seed=0):
    cfg = Qwen3NextConfig(hidden_size=HID, linear_num_key_heads=HK, linear_num_value_heads=HV,
                          linear_key_head_dim=DK, linear_value_head_dim=DV,
                          linear_conv_kernel_dim=KERNEL, num_hidden_layers=4,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                          num_experts=2, moe_intermediate_size=8, intermediate_size=8)
    torch.manual_seed(seed)
    layer = qn.Qwen3NextGatedDeltaNet(cfg, layer_idx=0).double().eval()
    with torch.no_grad():
        layer.norm.weight.uniform_(0.5, 1.5)
        layer.dt_bias.normal_(0.0, 1.0)
        layer.A_log.copy_(torch.log(torch.empty(HV).uniform_(0.05, 2.0)))  # moderate decay
    return cfg, layer


def _silu(x):
    return x / (1 + np.exp(-x))


def _ours_layer(layer, x, rule=ref.gated_delta_rule):
    """Qwen3NextGatedDeltaNet in NumPy: x (B, N, D) -> (B, N, D)."""
    p = {n: t.detach().numpy() for n, t in layer.named_parameters()}
    b_, n_ = x.shape[:2]
    r = HV // HK                                            # value heads per key head
    qkvz = (x @ p["in_proj_qkvz.weight"].T).reshape(b_, n_, HK, 2 * DK + 2 * r * DV)
    q, k = qkvz[..., :DK], qkvz[..., DK:2 * DK]             # (B, N, HK, DK)
    v = qkvz[..., 2 * DK:2 * DK + r * DV].reshape(b_, n_, HV, DV)
    z = qkvz[..., 2 * DK + r * DV:].reshape(b_, n_, HV, DV)
    ba = (x @ p["in_proj_ba.weight"].T).reshape(b_, n_, HK, 2 * r)
    b_logit, a = ba[..., :r].reshape(b_, n_, HV), ba[..., r:].reshape(b_, n_, HV)
    mixed = np.concatenate([q.reshape(b_, n_, -1), k.reshape(b_, n_, -1),
                            v.reshape(b_, n_, -1)], axis=-1)    # (B, N, C)
    w = p["conv1d.weight"][:, 0]                                 # (C, KERNEL)
    padded = np.concatenate([np.zeros((b_, KERNEL - 1, mixed.shape[-1])), mixed], axis=1)
    conv = sum(padded[:, j:j + n_] * w[:, j] for j in range(KERNEL))  # causal, depthwise
    mixed = _silu(conv)
    q = mixed[..., :HK * DK].reshape(b_, n_, HK, DK)
    k = mixed[..., HK * DK:2 * HK * DK].reshape(b_, n_, HK, DK)
    v = mixed[..., 2 * HK * DK:].reshape(b_, n_, HV, DV)

    def l2(t):
        return t / np.sqrt((t * t).sum(-1, keepdims=True) + 1e-6)
    q, k = (np.repeat(l2(t), r, axis=2) for t in (q, k))        # (B, N, HV, DK)
    beta = 1 / (1 + np.exp(-b_logit))                            # (B, N, HV)
    g = -np.exp(p["A_log"]) * np.logaddexp(0, a + p["dt_bias"])  # softplus
    heads = [np.swapaxes(t, 1, 2) for t in (q, k, v, g[..., None], beta[..., None])]
    o, _ = rule(*heads[:3], heads[3][..., 0], heads[4][..., 0])  # (B, HV, N, DV)
    o = np.swapaxes(o, 1, 2)                                     # (B, N, HV, DV)
    o = o / np.sqrt((o * o).mean(-1, keepdims=True) + 1e-6) * p["norm.weight"] * _silu(z)
    return o.reshape(b_, n_, HV * DV) @ p["out_proj.weight"].T


@pytest.mark.parametrize("rule", ["recurrent", "chunked"])
def test_answer_key_equals_qwen3_next_gated_deltanet(rule):
    cfg, layer = _layer()
    assert cfg.layer_types[:4] == ["linear_attention"] * 3 + ["full_attention"]
    x = np.random.default_rng(2).normal(size=(2, NT, HID))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        theirs = layer(torch.tensor(x)).numpy()
    fn = (ref.gated_delta_rule if rule == "recurrent"
          else lambda *a: ref.chunked_gated_delta_rule(*a, chunk_size=5))
    ours = _ours_layer(layer, x, fn)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)
    no_gate = _ours_layer(layer, x, _no_gate)
    assert np.abs(no_gate - theirs).max() > 1e-3


def _chapter_cell(cell_id):
    return chapter_cell(CHAPTER, cell_id)


def test_chapter_qwen3_next_numbers_are_transformers_defaults():
    """The chapter's Qwen3-Next numbers are Qwen3NextConfig's defaults
    (transformers/models/qwen3_next/configuration_qwen3_next.py)."""
    page = _chapter_cell("cfg-qwen3-next")["qwen3_next"]
    cfg = Qwen3NextConfig()
    for key, value in page.items():
        if key == "full_attention_interval":
            types = cfg.layer_types
            assert types[value - 1] == "full_attention"
            assert types.count("full_attention") == len(types) // value
        else:
            assert getattr(cfg, key) == value, key


def test_conv_cache_keeps_kernel_size_inputs():
    """Chapter 22b counts the convolution's buffer as transformers keeps it:
    linear_conv_kernel_dim inputs per q, k, v channel (cache_utils'
    LinearAttentionLayer), not the kernel - 1 a convolution strictly needs.
    Catches the page counting 3 inputs for a kernel of 4."""
    from transformers import DynamicCache
    cfg, layer = _layer()
    cache = DynamicCache(config=cfg)
    x = torch.tensor(np.random.default_rng(4).normal(size=(1, NT, HID)))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        layer(x, cache_params=cache)
    conv = cache.layers[0].conv_states[0]
    assert tuple(conv.shape) == (1, 2 * HK * DK + HV * DV, KERNEL)
    assert KERNEL - 1 != conv.shape[-1]


def test_kimi_linear_full_attention_has_no_positional_encoding():
    """Chapter 22b's fact: Kimi Linear's full-attention layers use no
    positional encoding (NoPE), unlike Qwen3-Next's (RoPE on a quarter of
    each head). KimiLinearAttention takes no position embeddings and its
    module rotates nothing. Catches the page saying every hybrid puts RoPE
    into its softmax layers."""
    import inspect
    from transformers import KimiLinearConfig
    from transformers.models.kimi_linear import modeling_kimi_linear as kimi
    assert "position_embeddings" not in inspect.signature(
        kimi.KimiLinearAttention.forward).parameters
    source = inspect.getsource(kimi)
    assert "rotary" not in source.lower() and "apply_rotary" not in source
    assert "NoPE" in kimi.KimiLinearAttention.__doc__
    types = KimiLinearConfig().layer_types
    assert types[4::4] == ["full_attention"] * len(types[4::4])
    assert Qwen3NextConfig().rope_parameters["partial_rotary_factor"] == 0.25
