"""DeepSeek Sparse Attention: the answer key (``indexer_scores``,
``topk_sparse_attention``, the book's MLA) against transformers'
``DeepseekV32Attention`` with its ``DeepseekV32Indexer`` (eager attention, a
tiny configuration, random weights, float64; the indexer scores in float32,
so agreement is to about 1e-7), end to end; the chapter's DeepSeek-V3.2
numbers against ``DeepseekV32Config``'s defaults.

The comparison is also run with a flipped convention (the causal mask applied
after the top-k instead of before, the ReLU dropped, dense attention with no
top-k at all) and must then fail. Skipped, with the reason, when torch or
transformers is missing (`make torch` installs both).
"""

from pathlib import Path

import numpy as np
import pytest

from attnbook import reference as ref
from optional import chapter_cell, imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(
    globals(), torch="torch", DeepseekV32Config="transformers:DeepseekV32Config",
    dsv32="transformers.models.deepseek_v32.modeling_deepseek_v32")

# 8 indexer heads: with few heads, ReLU often zeroes every head of a pair, and
# keys tied at 0 are picked in an order torch.topk does not specify
D, H, R_Q, R_KV, D_NOPE, D_ROPE, D_V, H_I, D_I, TOP_K, N = 32, 4, 12, 10, 6, 4, 5, 8, 8, 3, 9
CHAPTER = Path(__file__).resolve().parents[2] / "chapters" / "21_sparse_attention.ipynb"


def _tiny():
    cfg = DeepseekV32Config(
        hidden_size=D, num_attention_heads=H, num_key_value_heads=H, q_lora_rank=R_Q,
        kv_lora_rank=R_KV, qk_nope_head_dim=D_NOPE, qk_rope_head_dim=D_ROPE, v_head_dim=D_V,
        index_n_heads=H_I, index_head_dim=D_I, index_topk=TOP_K, num_hidden_layers=1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    cfg._attn_implementation = "eager"
    return cfg


@pytest.fixture(scope="module")
def run():
    """DeepseekV32Attention's output and weights on a causal batch, and the
    weights it ran with, as NumPy arrays."""
    cfg = _tiny()
    torch.manual_seed(0)
    attn = dsv32.DeepseekV32Attention(cfg, layer_idx=0).double().eval()
    ix = attn.indexer
    with torch.no_grad():  # norms are ones (and zeros) by default: make them count
        attn.q_a_layernorm.weight.uniform_(0.5, 1.5)
        attn.kv_a_layernorm.weight.uniform_(0.5, 1.5)
        ix.k_norm.weight.uniform_(0.5, 1.5)
        ix.k_norm.bias.normal_(0.0, 0.3)
    x = np.random.default_rng(1).normal(size=(2, N, D))
    xt = torch.tensor(x)
    cos, sin = dsv32.DeepseekV32RotaryEmbedding(cfg)(xt, torch.arange(N)[None].expand(2, N))
    causal = torch.full((N, N), float("-inf"), dtype=torch.float64).triu(1)
    with torch.no_grad():
        out, weights = attn(xt, (cos, sin), causal[None, None].expand(2, 1, N, N))

    def t(lin):
        return lin.weight.detach().numpy().T.copy()
    mla = ref.MLAWeights(t(attn.q_a_proj), attn.q_a_layernorm.weight.detach().numpy().copy(),
                         t(attn.q_b_proj), t(attn.kv_a_proj_with_mqa),
                         attn.kv_a_layernorm.weight.detach().numpy().copy(),
                         t(attn.kv_b_proj), t(attn.o_proj), H, D_NOPE, D_ROPE, D_V)
    indexer = dict(wq_b=t(ix.wq_b), wk=t(ix.wk), weights_proj=t(ix.weights_proj),
                   ln_w=ix.k_norm.weight.detach().numpy().copy(),
                   ln_b=ix.k_norm.bias.detach().numpy().copy())
    return dict(x=x, out=out.numpy(), weights=weights.numpy(), mla=mla, indexer=indexer)


def _mla_heads(x, w):
    """The book's MLA (chapter 16), naive path: per-head q, k, v."""
    pos = np.arange(x.shape[-2])
    c_kv, k_rope = ref.mla_latents(x, w, pos, interleaved=True)   # (B, N, r_kv), (B, N, d_r)
    q_nope, q_rope = ref.mla_queries(x, w, pos, interleaved=True)  # (B, H, N, d_*)
    w_ukv = w.w_ukv.reshape(w.r_kv, H, D_NOPE + D_V)
    k_nope = np.einsum("btr,rhd->bhtd", c_kv, w_ukv[..., :D_NOPE])  # (B, H, N, d_nope)
    v = np.einsum("btr,rhd->bhtd", c_kv, w_ukv[..., D_NOPE:])        # (B, H, N, d_v)
    k_rope = np.broadcast_to(k_rope[:, None], k_rope.shape[:1] + (H,) + k_rope.shape[1:])
    return (np.concatenate([q_nope, q_rope], -1), np.concatenate([k_nope, k_rope], -1), v)


def _indexer_inputs(x, w, ix):
    """The indexer's q (B, N, H_I, d_I), k (B, N, d_I) and head weights (B, N, H_I):
    queries from MLA's normalised query latent, keys LayerNorm-ed, half-split RoPE
    on the first d_rope dimensions of both (MLA itself uses interleaved pairs)."""
    pos = np.arange(x.shape[-2])
    c_q = ref.rms_norm(x @ w.w_dq, w.q_norm)                      # (B, N, r_q)
    q = (c_q @ ix["wq_b"]).reshape(*x.shape[:-1], H_I, D_I)      # (B, N, H_I, d_I)
    q_rot = np.swapaxes(ref.rope(np.swapaxes(q[..., :D_ROPE], 1, 2), pos), 1, 2)
    q = np.concatenate([q_rot, q[..., D_ROPE:]], -1)
    k = x @ ix["wk"]                                              # (B, N, d_I)
    k = (k - k.mean(-1, keepdims=True)) / np.sqrt(k.var(-1, keepdims=True) + 1e-6)
    k = k * ix["ln_w"] + ix["ln_b"]
    k = np.concatenate([ref.rope(k[..., :D_ROPE], pos), k[..., D_ROPE:]], -1)
    return q, k, x @ ix["weights_proj"] * H_I ** -0.5


def _ours(run, scores=ref.indexer_scores, select=ref.topk_sparse_attention):
    x, w = run["x"], run["mla"]
    q, k, v = _mla_heads(x, w)
    qi, ki, wi = _indexer_inputs(x, w, run["indexer"])
    index = scores(qi, ki, wi, mask=ref.causal_mask(N))           # (B, N, N)
    o, weights = select(q, k, v, index[:, None], TOP_K, mask=ref.causal_mask(N))
    o = np.swapaxes(o, 1, 2).reshape(x.shape[0], N, H * D_V) @ w.w_o  # (B, N, D)
    return o, weights, index


def test_sparse_attention_equals_deepseek_v32_attention(run):
    o, weights, index = _ours(run)
    # no ties among a row's allowed scores: the top-k is then well defined
    for row in index.reshape(-1, N):
        finite = row[np.isfinite(row)]
        assert len(np.unique(finite)) == len(finite)
    np.testing.assert_allclose(weights, run["weights"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(o, run["out"], rtol=0, atol=1e-6)
    # each query kept min(position + 1, top_k) keys
    kept = (run["weights"] > 0).sum(-1)                           # (B, H, N)
    assert (kept == np.minimum(np.arange(N) + 1, TOP_K)).all()


def _mask_after_topk(q, k, v, index, top_k, mask=None):
    index = np.where(np.isfinite(index), index, 0.0)  # as if unmasked: future keys compete
    keep = ref.topk_mask(index, top_k) & mask  # early queries may keep no key at all
    return ref.scaled_dot_product_attention(q, k, v, mask=keep, fully_masked="zeros")


def _no_relu(q, k, w, mask=None):
    dots = q @ np.swapaxes(k, -1, -2)[..., None, :, :] / np.sqrt(q.shape[-1])
    s = (w[..., None, :] @ dots)[..., 0, :]
    return np.where(mask, s, -np.inf)


def _dense(q, k, v, index, top_k, mask=None):
    return ref.scaled_dot_product_attention(q, k, v, mask=mask)


@pytest.mark.parametrize("kind", ["mask after the top-k", "ReLU dropped", "dense"])
def test_flipped_conventions_fail(run, kind):
    kwargs = {"mask after the top-k": dict(select=_mask_after_topk),
              "ReLU dropped": dict(scores=_no_relu), "dense": dict(select=_dense)}[kind]
    o, _, _ = _ours(run, **kwargs)
    assert np.abs(o - run["out"]).max() > 1e-3


def _chapter_cell(cell_id):
    return chapter_cell(CHAPTER, cell_id)


def test_chapter_deepseek_v32_numbers_are_transformers_defaults():
    """The chapter's DeepSeek-V3.2 numbers are DeepseekV32Config's defaults
    (transformers/models/deepseek_v32/configuration_deepseek_v32.py)."""
    page = _chapter_cell("cfg-dsa")["deepseek_v32"]
    cfg = DeepseekV32Config()
    for key, value in page.items():
        assert getattr(cfg, key) == value, key
