"""Kimi Delta Attention: the answer key (``kimi_delta_rule``, token by token,
and ``chunked_kimi_delta_rule``) against transformers' Kimi Linear functions
``recurrent_kimi_delta_attention`` and ``chunk_kimi_delta_attention``
(float64 inputs; they compute in float32, so agreement is to about 1e-6),
and against ``KimiLinearDeltaAttention`` end to end (a tiny configuration,
random weights, nothing downloaded): projections, causal convolution,
L2-normalised queries and keys, beta and the per-channel g from the token,
the rule, the gated RMSNorm, the output projection. The chapter's layout
against ``KimiLinearConfig`` and ``KimiLinearAttention`` (no RoPE).

Each comparison is also run with a flipped convention and must then fail;
each wrong rule below names the flip it stands for. Skipped, with the
reason, when torch or transformers is missing (`make torch`).
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
    globals(), torch="torch", KimiLinearConfig="transformers:KimiLinearConfig",
    kl="transformers.models.kimi_linear.modeling_kimi_linear")

CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "22c_kimi_delta_attention.ipynb"


def _inputs(seed=0):
    return delta_inputs(seed, per_channel=True, g_high=1.5)


def _theirs(fn, *args, **kwargs):
    return transformers_delta(torch, fn, *args, **kwargs)


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 4, 64], ids=lambda c: f"chunk={c}")
@pytest.mark.parametrize("which", ["recurrent", "chunk"])
def test_answer_key_equals_kimi_functions(which, chunk_size):
    args = _inputs()
    fn = (kl.recurrent_kimi_delta_attention if which == "recurrent"
          else kl.chunk_kimi_delta_attention)
    kwargs = {} if which == "recurrent" else {"chunk_size": 4}
    o_t, s_t = _theirs(fn, *args, **kwargs)
    q, k, v, g, beta, s0 = args
    if chunk_size is None:
        o, s = ref.kimi_delta_rule(q, k, v, g, beta, initial_state=s0)
    else:
        o, s = ref.chunked_kimi_delta_rule(q, k, v, g, beta, chunk_size=chunk_size,
                                           initial_state=s0)
    np.testing.assert_allclose(o, o_t, rtol=0, atol=TOL)
    np.testing.assert_allclose(s, s_t, rtol=0, atol=TOL)


# --- flipped conventions: each must fail ---------------------------------------

def _rule(q, k, v, g, beta, *, initial_state, decay="rows", forget="before",
          scale=True):
    """The recurrence with one convention switched (shapes as the answer key)."""
    s, out = initial_state.copy(), np.zeros(v.shape)
    for t in range(q.shape[-2]):
        g_t = g[..., t, :]                                          # (..., d_k)
        if decay == "rows":
            d = np.exp(g_t)[..., :, None]                           # channel i: row i
        elif decay == "columns":
            d = np.exp(g_t)[..., None, :D_V] if D_V <= D_K else np.exp(
                np.resize(g_t, g_t.shape[:-1] + (D_V,)))[..., None, :]
        else:                                                       # "token"
            d = np.exp(g_t.mean(-1))[..., None, None]
        if forget == "before":
            s = d * s
        err = v[..., t, :] - np.einsum("...kv,...k->...v", s, k[..., t, :])
        s = s + k[..., t, :, None] * (beta[..., t, None] * err)[..., None, :]
        if forget == "after":
            s = d * s
        o = np.einsum("...kv,...k->...v", s, q[..., t, :])
        out[..., t, :] = o / np.sqrt(D_K) if scale else o
    return out, s


FLIPS = {
    # one decay per token (Gated DeltaNet's), here the mean of the channels
    "decay per token instead of per channel": dict(decay="token"),
    # exp(g) along the value axis (columns of S) instead of the key axis (rows)
    "decay on the value axis instead of the key axis": dict(decay="columns"),
    # decay applied after the delta update instead of before it
    "gate after the update": dict(forget="after"),
    # no decay at all: the plain delta rule
    "no gate": dict(forget="never"),
    # queries not scaled by 1/sqrt(d_k)
    "query not scaled": dict(scale=False),
}


def test_the_flip_helper_without_a_flip_is_the_answer_key():
    q, k, v, g, beta, s0 = _inputs(1)
    o, s = _rule(q, k, v, g, beta, initial_state=s0)
    o_ref, s_ref = ref.kimi_delta_rule(q, k, v, g, beta, initial_state=s0)
    np.testing.assert_allclose(o, o_ref, atol=1e-13)
    np.testing.assert_allclose(s, s_ref, atol=1e-13)


@pytest.mark.parametrize("flip", list(FLIPS))
@pytest.mark.parametrize("which", ["recurrent", "chunk"])
def test_flipped_conventions_fail(which, flip):
    args = _inputs(1)
    fn = (kl.recurrent_kimi_delta_attention if which == "recurrent"
          else kl.chunk_kimi_delta_attention)
    o_t, _ = _theirs(fn, *args, **({} if which == "recurrent" else {"chunk_size": 4}))
    q, k, v, g, beta, s0 = args
    o, _ = _rule(q, k, v, g, beta, initial_state=s0, **FLIPS[flip])
    assert np.abs(o - o_t).max() > 1e-3, flip


def test_per_channel_g_is_not_per_token():
    """Transformers' KDA with g the same in every channel is Gated DeltaNet
    (ref.gated_delta_rule); with channels that differ it is not."""
    q, k, v, g, beta, s0 = _inputs(2)
    same = np.repeat(g[..., :1], D_K, axis=-1)
    o_t, _ = _theirs(kl.recurrent_kimi_delta_attention, q, k, v, same, beta, s0)
    o_g, _ = ref.gated_delta_rule(q, k, v, g[..., 0], beta, initial_state=s0)
    np.testing.assert_allclose(o_g, o_t, atol=TOL)
    o_t2, _ = _theirs(kl.recurrent_kimi_delta_attention, q, k, v, g, beta, s0)
    assert np.abs(o_g - o_t2).max() > 1e-2


# --- KimiLinearDeltaAttention, end to end ------------------------------------------

HID, NH, HD, KERNEL, NT = 24, 2, 8, 4, 13


def _config(**kw):
    base = dict(hidden_size=HID, linear_num_heads=NH, linear_head_dim=HD,
                linear_conv_kernel_dim=KERNEL, num_hidden_layers=4,
                num_attention_heads=2, num_key_value_heads=2, kv_lora_rank=8,
                qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=4,
                intermediate_size=8, moe_intermediate_size=8, num_local_experts=2,
                num_experts_per_tok=1, vocab_size=32)
    base.update(kw)
    return KimiLinearConfig(**base)


def _layer(seed=0):
    cfg = _config()
    torch.manual_seed(seed)
    layer = kl.KimiLinearDeltaAttention(cfg, layer_idx=0).double().eval()
    with torch.no_grad():
        layer.o_norm.weight.uniform_(0.5, 1.5)
        layer.forget_gate.dt_bias.normal_(0.0, 1.0)                # torch.empty otherwise
        layer.forget_gate.A_log.copy_(torch.log(torch.empty(1, 1, NH, 1).uniform_(0.05, 2.0)))
    return cfg, layer


def _silu(x):
    return x / (1 + np.exp(-x))


def _ours_layer(layer, x, rule=ref.kimi_delta_rule, norm="before gate"):
    """KimiLinearDeltaAttention in NumPy: x (B, N, D) -> (B, N, D)."""
    p = {n: t.detach().numpy() for n, t in layer.named_parameters()}
    b_, n_ = x.shape[:2]
    mixed = np.concatenate([x @ p[f"{w}_proj.weight"].T for w in "qkv"], axis=-1)
    w = p["conv1d.weight"][:, 0]                                 # (3 H d, KERNEL)
    padded = np.concatenate([np.zeros((b_, KERNEL - 1, mixed.shape[-1])), mixed], axis=1)
    mixed = _silu(sum(padded[:, j:j + n_] * w[:, j] for j in range(KERNEL)))
    q, k, v = (mixed[..., i * NH * HD:(i + 1) * NH * HD].reshape(b_, n_, NH, HD)
               for i in range(3))                                # (B, N, H, d)

    def l2(t):
        return t / np.sqrt((t * t).sum(-1, keepdims=True) + 1e-6)
    q, k = l2(q), l2(k)
    a = (x @ p["forget_gate.f_a_proj.weight"].T @ p["forget_gate.f_b_proj.weight"].T
         + p["forget_gate.dt_bias"]).reshape(b_, n_, NH, HD)
    g = -np.exp(p["forget_gate.A_log"]) * np.logaddexp(0, a)   # (B, N, H, d): per channel
    beta = 1 / (1 + np.exp(-(x @ p["b_proj.weight"].T)))        # (B, N, H)
    heads = [np.swapaxes(t, 1, 2) for t in (q, k, v, g)]         # (B, H, N, ...)
    o, _ = rule(*heads, np.swapaxes(beta, 1, 2))                 # (B, H, N, d)
    o = np.swapaxes(o, 1, 2)                                     # (B, N, H, d)
    gate = (x @ p["g_a_proj.weight"].T @ p["g_b_proj.weight"].T).reshape(b_, n_, NH, HD)
    sig = 1 / (1 + np.exp(-gate))
    eps = layer.o_norm.variance_epsilon

    def rms(t):
        return t / np.sqrt((t * t).mean(-1, keepdims=True) + eps)
    if norm == "before gate":
        o = rms(o) * p["o_norm.weight"] * sig
    else:                                                        # norm after the gate
        o = rms(o * sig) * p["o_norm.weight"]
    return o.reshape(b_, n_, NH * HD) @ p["o_proj.weight"].T


def _theirs_layer(layer, x):
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        return layer(torch.tensor(x)).numpy()


@pytest.mark.parametrize("rule", ["recurrent", "chunked"])
def test_answer_key_equals_kimi_linear_delta_attention(rule):
    _, layer = _layer()
    x = np.random.default_rng(2).normal(size=(2, NT, HID))
    theirs = _theirs_layer(layer, x)
    fn = (ref.kimi_delta_rule if rule == "recurrent"
          else lambda *a: ref.chunked_kimi_delta_rule(*a, chunk_size=5))
    ours = _ours_layer(layer, x, fn)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


LAYER_FLIPS = {
    "decay per token instead of per channel": dict(rule=lambda q, k, v, g, b: _rule(
        q, k, v, g, b, initial_state=np.zeros(q.shape[:-2] + (HD, HD)), decay="token")),
    "gate after the update": dict(rule=lambda q, k, v, g, b: _rule(
        q, k, v, g, b, initial_state=np.zeros(q.shape[:-2] + (HD, HD)), forget="after")),
    "output gate inside the norm (norm after the gate)": dict(norm="after gate"),
}


@pytest.mark.parametrize("flip", list(LAYER_FLIPS))
def test_layer_flips_fail(flip):
    _, layer = _layer()
    x = np.random.default_rng(2).normal(size=(2, NT, HID))
    theirs = _theirs_layer(layer, x)
    ours = _ours_layer(layer, x, **LAYER_FLIPS[flip])
    assert np.abs(ours - theirs).max() > 1e-4, flip


def test_kimi_linear_full_attention_layers_use_no_rope():
    """KimiLinearAttention (the MLA layers of Kimi Linear) takes no position
    embeddings: with a causal mask, the last query's output does not change
    when the earlier tokens are shuffled (with RoPE it would)."""
    cfg = _config()
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    attn = kl.KimiLinearAttention(cfg, layer_idx=3).double().eval()
    x = torch.tensor(np.random.default_rng(4).normal(size=(1, 7, HID)))
    perm = torch.tensor([4, 2, 0, 5, 1, 3, 6])
    mask = torch.full((7, 7), float("-inf")).triu(1)[None, None].double()
    with torch.no_grad():
        a, _ = attn(x, mask)
        b, _ = attn(x[:, perm], mask)
    np.testing.assert_allclose(a[0, -1].numpy(), b[0, -1].numpy(), atol=1e-12)
    assert np.abs(a[0, 3].numpy() - b[0, 3].numpy()).max() > 1e-3   # the mask sees order


def test_chapter_kimi_numbers_are_transformers_defaults():
    """The chapter's Kimi Linear numbers are KimiLinearConfig's defaults
    (transformers/models/kimi_linear/configuration_kimi_linear.py)."""
    page = chapter_cell(CHAPTER, "kd-config")["kimi_linear"]
    cfg = KimiLinearConfig()
    for key, value in page.items():
        if key == "layer_types":
            assert cfg.layer_types == value
        else:
            assert getattr(cfg, key) == value, key
