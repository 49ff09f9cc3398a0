"""The answer key (NumPy) and PyTorch agree: the book's PyTorch code,
F.scaled_dot_product_attention and nn.MultiheadAttention, on random shapes.

Runs only when PyTorch is installed (`make torch`); otherwise every test here is
skipped with that reason.
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", F="torch.nn.functional",
                   ta="attnbook.torch_attention")


# float64 on both sides: the same arithmetic, so only rounding differs.
TIGHT = dict(rtol=1e-10, atol=1e-12)
# float32 against the float64 answer key: float32 keeps about 7 significant digits
# (eps = 1.2e-7) and a dot product of width <= 64 adds up to ~64 rounding errors.
LOOSE = dict(rtol=1e-4, atol=1e-5)

SEEDS = range(12)


def t(a, dtype=None):  # None: float64
    return torch.as_tensor(np.asarray(a), dtype=torch.float64 if dtype is None else dtype)


def random_case(seed):
    """Random shapes: batch, heads, Nq != Nk, dk != dv; a padding mask and a causal mask."""
    rng = np.random.default_rng(seed)
    b, nh = int(rng.integers(1, 4)), int(rng.integers(1, 5))
    nq, nk = int(rng.integers(1, 9)), int(rng.integers(1, 9))
    dk, dv = int(rng.integers(1, 17)), int(rng.integers(1, 17))
    q = rng.normal(size=(b, nh, nq, dk))
    k = rng.normal(size=(b, nh, nk, dk))
    v = rng.normal(size=(b, nh, nk, dv))
    lengths = rng.integers(1, nk + 1, size=b)  # at least one real key per sequence
    pad = ref.padding_mask(lengths, nk)[:, None]  # (B, 1, 1, Nk)
    causal = np.tril(np.ones((nq, nk), dtype=bool))  # (Nq, Nk), top-left aligned as is_causal
    return rng, q, k, v, pad, causal


@pytest.mark.parametrize("seed", SEEDS)
def test_attention_function_matches_answer_key(seed):
    _, q, k, v, pad, _ = random_case(seed)
    out_ref, w_ref = ref.scaled_dot_product_attention(q, k, v, pad)
    out, w = ta.attention(t(q), t(k), t(v), t(pad, torch.bool))
    np.testing.assert_allclose(out.numpy(), out_ref, **TIGHT)
    np.testing.assert_allclose(w.numpy(), w_ref, **TIGHT)
    out32, _ = ta.attention(t(q, torch.float32), t(k, torch.float32), t(v, torch.float32), t(pad, torch.bool))
    np.testing.assert_allclose(out32.numpy(), out_ref, **LOOSE)


@pytest.mark.parametrize("seed", SEEDS)
def test_sdpa_bool_float_and_is_causal_match_answer_key(seed):
    _, q, k, v, pad, causal = random_case(seed)
    qt, kt, vt = t(q), t(k), t(v)
    out_ref, _ = ref.scaled_dot_product_attention(q, k, v, pad)
    bool_mask = t(pad, torch.bool)
    float_mask = torch.zeros(bool_mask.shape, dtype=torch.float64).masked_fill(~bool_mask, float("-inf"))
    for m in (bool_mask, float_mask):
        got = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=m)
        np.testing.assert_allclose(got.numpy(), out_ref, **TIGHT)
    out_causal, _ = ref.scaled_dot_product_attention(q, k, v, causal)
    got = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    np.testing.assert_allclose(got.numpy(), out_causal, **TIGHT)


@pytest.mark.parametrize("seed", SEEDS)
def test_causal_and_padding_together(seed):
    """Both masks at once; rows where they leave nothing get zeros (fully_masked='zeros')."""
    _, q, k, v, pad, causal = random_case(seed)
    both = pad & causal  # (B, 1, Nq, Nk)
    out_ref, w_ref = ref.scaled_dot_product_attention(q, k, v, both, fully_masked="zeros")
    out, w = ta.attention(t(q), t(k), t(v), t(both, torch.bool), fully_masked="zeros")
    np.testing.assert_allclose(out.numpy(), out_ref, **TIGHT)
    np.testing.assert_allclose(w.numpy(), w_ref, **TIGHT)
    got = F.scaled_dot_product_attention(t(q), t(k), t(v), attn_mask=t(both, torch.bool))
    # On torch 2.13.0 SDPA returns zeros for a fully masked row, like fully_masked="zeros".
    np.testing.assert_allclose(got.numpy(), out_ref, **TIGHT)


def mha_case(seed):
    rng = np.random.default_rng(100 + seed)
    nh = int(rng.integers(1, 5))
    d = nh * int(rng.integers(1, 6))
    b, n = int(rng.integers(1, 4)), int(rng.integers(1, 9))
    x = rng.normal(size=(b, n, d))
    w_qkv = rng.normal(size=(d, 3 * d)) / np.sqrt(d)
    w_o = rng.normal(size=(d, d)) / np.sqrt(d)
    lengths = rng.integers(1, n + 1, size=b)
    return x, w_qkv, w_o, nh, lengths


@pytest.mark.parametrize("seed", SEEDS)
def test_multihead_module_and_nn_multiheadattention_match_answer_key(seed):
    x, w_qkv, w_o, nh, lengths = mha_case(seed)
    n = x.shape[1]
    # A padded batch under a causal mask: the first key is always allowed, so no row is empty.
    keep = ref.padding_mask(lengths, n)[:, None] & ref.causal_mask(n)  # (B, 1, N, N)
    expected = ref.multihead_attention(x, w_qkv, w_o, nh, keep[:, 0])  # (B, N, N): every head
    ours, _ = ta.from_answer_key(w_qkv, w_o, nh)(t(x), t(keep, torch.bool))
    np.testing.assert_allclose(ours.detach().numpy(), expected, **TIGHT)

    mha = ta.to_mha(w_qkv, w_o, nh)
    xt = t(x)
    with torch.no_grad():
        # nn.MultiheadAttention: True = NOT allowed, and a 3-D attn_mask is (B*NH, N, N).
        attn_mask = ~torch.as_tensor(np.broadcast_to(keep, (x.shape[0], nh, n, n)).reshape(-1, n, n).copy())
        got, w_avg = mha(xt, xt, xt, attn_mask=attn_mask, need_weights=True)
        np.testing.assert_allclose(got.numpy(), expected, **TIGHT)
        # Same masks split the nn.MultiheadAttention way: causal as attn_mask, padding as key_padding_mask.
        got2, _ = mha(xt, xt, xt, attn_mask=~torch.as_tensor(ref.causal_mask(n)),
                      key_padding_mask=~torch.as_tensor(ref.padding_mask(lengths, n)[:, 0]),
                      need_weights=False)
        np.testing.assert_allclose(got2.numpy(), expected, **TIGHT)
    # need_weights=True returns the weights averaged over the heads.
    q, k, v = (ref.split_heads(a, nh) for a in np.split(x @ w_qkv, 3, axis=-1))
    _, w_ref = ref.scaled_dot_product_attention(q, k, v, keep)
    np.testing.assert_allclose(w_avg.numpy(), w_ref.mean(axis=1), **TIGHT)


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_float32_against_float64_answer_key(seed):
    x, w_qkv, w_o, nh, _ = mha_case(seed)
    expected = ref.multihead_attention(x, w_qkv, w_o, nh, ref.causal_mask(x.shape[1]))
    ours, _ = ta.from_answer_key(w_qkv, w_o, nh, dtype=torch.float32)(
        t(x, torch.float32), torch.as_tensor(ref.causal_mask(x.shape[1])))
    np.testing.assert_allclose(ours.detach().numpy(), expected, **LOOSE)


def test_split_and_merge_heads_match_answer_key():
    x = np.arange(2 * 3 * 12, dtype=float).reshape(2, 3, 12)
    for nh in (1, 2, 3, 4, 6, 12):
        split = ta.split_heads(t(x), nh)
        np.testing.assert_array_equal(split.numpy(), ref.split_heads(x, nh))
        np.testing.assert_array_equal(ta.merge_heads(split).numpy(), x)


def test_view_without_transpose_is_wrong():
    x = np.arange(3 * 4, dtype=float).reshape(1, 3, 4)
    wrong = t(x).view(1, 2, 3, 2)  # (B, NH, N, HS) straight from (B, N, D): mixes tokens
    assert not np.array_equal(wrong.numpy(), ref.split_heads(x, 2))


def test_linear_needs_weight_transpose():
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(4, 4))
    lin = torch.nn.Linear(4, 4, bias=False).double()
    ta.load_linear(lin, w)
    np.testing.assert_allclose(lin(t(x)).detach().numpy(), x @ w, **TIGHT)
    with torch.no_grad():
        lin.weight.copy_(t(w))  # forgot .T: runs, but computes x @ w.T
    assert not np.allclose(lin(t(x)).detach().numpy(), x @ w)
    with pytest.raises(ValueError):
        ta.load_linear(torch.nn.Linear(4, 2, bias=False), rng.normal(size=(2, 4)))


def test_fully_masked_row_raises_by_default_and_zeros_on_request():
    rng = np.random.default_rng(5)
    q, k, v = (t(rng.normal(size=s)) for s in ((3, 4), (5, 4), (5, 2)))
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="every key masked"):
        ta.attention(q, k, v, mask)
    out, w = ta.attention(q, k, v, mask, fully_masked="zeros")
    assert torch.all(out[1] == 0) and torch.all(w[1] == 0) and not torch.isnan(out).any()
    out_ref, _ = ref.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy(),
                                                   fully_masked="zeros")
    np.testing.assert_allclose(out.numpy(), out_ref, **TIGHT)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_3d_attn_mask_is_sequence_major_batch_times_heads(seed):
    """nn.MultiheadAttention's 3-D attn_mask is (B*NH, Nq, Nk), entry b*NH + h; a
    per-sequence mask (B, N, N) copied with repeat_interleave equals the answer key,
    and the flipped order (repeat: entry h*B + b) does not."""
    rng = np.random.default_rng(seed)
    b, nh = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    n, d = int(rng.integers(3, 7)), 2 * nh
    keep = rng.random((b, n, n)) < 0.5                           # (B, N, N)
    keep[..., 0] = True                                          # no empty row
    w_qkv = rng.normal(size=(d, 3 * d)) / np.sqrt(d)
    w_o = rng.normal(size=(d, d)) / np.sqrt(d)
    x = t(rng.normal(size=(b, n, d)))
    want = ref.multihead_attention(x.numpy(), w_qkv, w_o, nh, keep)
    mha = ta.to_mha(w_qkv, w_o, nh)
    ignore = ~torch.from_numpy(keep)
    with torch.no_grad():
        right, _ = mha(x, x, x, attn_mask=ignore.repeat_interleave(nh, dim=0))
        flipped, _ = mha(x, x, x, attn_mask=ignore.repeat(nh, 1, 1))
        with pytest.raises(RuntimeError, match="3D attn_mask"):
            mha(x, x, x, attn_mask=ignore)                       # (B, N, N) refused
    assert np.allclose(right.numpy(), want, **TIGHT)
    assert not np.allclose(flipped.numpy(), want, **LOOSE)
