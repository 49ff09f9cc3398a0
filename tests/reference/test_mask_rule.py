"""One mask rule for multi-head attention (reference.mask_for_heads): every documented
shape is accepted by multihead_attention and multihead_cross_attention and means what
the docstring says, checked against a loop over sequences and heads; B == NH never
mixes sequences; other shapes are refused with the caller's own shape."""

import numpy as np
import pytest

from attnbook import reference as ref

B, N, D = 2, 4, 6


def weights(rng, d=D):
    return rng.normal(size=(d, 3 * d)), rng.normal(size=(d, d))


def loop_self(x, w_qkv, w_o, nh, mask_of):
    """Multi-head self-attention one sequence and one head at a time.

    mask_of(b, h) is the (N, N) mask of sequence b, head h (or None)."""
    hs = x.shape[-1] // nh
    w_q, w_k, w_v = np.split(w_qkv, 3, axis=1)
    out = []
    for b in range(x.shape[0]):
        heads = []
        for h in range(nh):
            cols = slice(h * hs, (h + 1) * hs)
            q, k, v = x[b] @ w_q[:, cols], x[b] @ w_k[:, cols], x[b] @ w_v[:, cols]
            s = q @ k.T / np.sqrt(hs)
            m = mask_of(b, h)
            if m is not None:
                s = np.where(m, s, -np.inf)
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            heads.append(e / e.sum(axis=-1, keepdims=True) @ v)
        out.append(np.concatenate(heads, axis=-1) @ w_o)
    return np.stack(out)


def with_diagonal(m):
    """Make every query row allow at least its own position (no fully masked row)."""
    m = np.array(m, copy=True)
    idx = np.arange(N)
    m[..., idx, idx] = True
    return m


def accepted_masks(nh, rng):
    """(name, mask, mask_of(b, h) -> (N, N)) for every documented shape."""
    causal = ref.causal_mask(N)
    pad = ref.padding_mask([3, 4], N)                                 # (B, 1, N)
    per_batch = with_diagonal(rng.random((B, N, N)) < 0.5)            # (B, N, N)
    per_head = with_diagonal(rng.random((B, nh, N, N)) < 0.5)         # (B, NH, N, N)
    four_batch = per_batch[:, None]                                   # (B, 1, N, N)
    full = np.ones((N, N), bool)
    return [
        ("(N, N) causal", causal, lambda b, h: causal),
        ("(1, N, N)", causal[None], lambda b, h: causal),
        ("(B, N, N)", per_batch, lambda b, h: per_batch[b]),
        ("(B, 1, N) padding", pad, lambda b, h: pad[b] & full),
        ("(B, 1, 1, N) padding", pad[:, None], lambda b, h: pad[b] & full),
        ("(B, 1, N, N)", four_batch, lambda b, h: per_batch[b]),
        ("(B, NH, N, N) per head", per_head, lambda b, h: per_head[b, h]),
        ("(1, NH, N, N) per head", per_head[:1], lambda b, h: per_head[0, h]),
        ("padding & causal (B, N, N)", pad & causal, lambda b, h: pad[b] & causal),
    ]


@pytest.mark.parametrize("nh", [1, 2, 3])   # B = 2: nh = 2 is the B == NH case
@pytest.mark.parametrize("which", range(9))
def test_multihead_attention_accepts_every_documented_shape(nh, which):
    rng = np.random.default_rng(20 + nh)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = weights(rng)
    name, mask, mask_of = accepted_masks(nh, rng)[which]
    got = ref.multihead_attention(x, w_qkv, w_o, nh, mask)
    np.testing.assert_allclose(got, loop_self(x, w_qkv, w_o, nh, mask_of), atol=1e-12,
                               err_msg=name)


def test_padding_mask_is_never_read_per_head_when_b_equals_nh():
    rng = np.random.default_rng(30)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = weights(rng)
    pad = ref.padding_mask([2, 4], N)                     # (B, 1, N), B == NH == 2
    got = ref.multihead_attention(x, w_qkv, w_o, B, pad)
    right = loop_self(x, w_qkv, w_o, B, lambda b, h: pad[b] & np.ones((N, N), bool))
    mixed = loop_self(x, w_qkv, w_o, B, lambda b, h: pad[h] & np.ones((N, N), bool))
    np.testing.assert_allclose(got, right, atol=1e-12)
    assert not np.allclose(got, mixed)                    # the silent bug it guards against


def test_no_batch_axis_takes_n_n_and_per_head_masks():
    rng = np.random.default_rng(31)
    x = rng.normal(size=(N, D))
    w_qkv, w_o = weights(rng)
    causal = ref.causal_mask(N)
    per_head = with_diagonal(rng.random((3, N, N)) < 0.5)          # (NH, N, N)
    np.testing.assert_allclose(ref.multihead_attention(x, w_qkv, w_o, 3, causal),
                               loop_self(x[None], w_qkv, w_o, 3, lambda b, h: causal)[0],
                               atol=1e-12)
    np.testing.assert_allclose(ref.multihead_attention(x, w_qkv, w_o, 3, per_head),
                               loop_self(x[None], w_qkv, w_o, 3, lambda b, h: per_head[h])[0],
                               atol=1e-12)


REJECTED = [  # (mask shape, n_heads) with x of shape (B, N, D) = (2, 4, 6)
    ((2, 1, 1, 1, 4), 2),      # five axes: one too many
    ((3, 1, 4), 2),            # a batch of 3 masks for 2 sequences
    ((2, 3, 4, 4), 2),         # per-head mask for 3 heads, the layer has 2
    ((2, 1, 5), 2),            # 5 keys, the sequence has 4
    ((5, 5), 3),               # (N, N) of the wrong length
    ((3, 4, 4), 3),            # (NH, N, N) with a batch: read as (B, N, N), B = 3 != 2
    ((2, 1, 3, 4), 2),         # 3 queries
]


@pytest.mark.parametrize("shape, nh", REJECTED)
def test_other_shapes_are_refused_with_the_callers_shape(shape, nh):
    rng = np.random.default_rng(32)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = weights(rng)
    with pytest.raises(ValueError) as info:
        ref.multihead_attention(x, w_qkv, w_o, nh, np.ones(shape, bool))
    message = f"ValueError: {info.value}"
    assert str(shape) in message
    assert all(len(line) <= 79 for line in message.splitlines()), message
    if len(shape) < 5:                                   # never an internal 5-D shape
        assert "(2, 1, 1, 1, 4)" not in message and ", 1, 1, 1" not in message


def test_non_boolean_masks_are_refused():
    rng = np.random.default_rng(33)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = weights(rng)
    with pytest.raises(TypeError, match="True = may attend"):
        ref.multihead_attention(x, w_qkv, w_o, 2, np.tril(np.ones((N, N))))


# --- cross-attention: Nq != Nk ---------------------------------------------------------

NQ, NK = 3, 5


def loop_cross(xq, xkv, w_q, w_kv, w_o, nh, mask_of):
    hs = xq.shape[-1] // nh
    w_k, w_v = np.split(w_kv, 2, axis=1)
    out = []
    for b in range(xq.shape[0]):
        heads = []
        for h in range(nh):
            cols = slice(h * hs, (h + 1) * hs)
            q, k, v = xq[b] @ w_q[:, cols], xkv[b] @ w_k[:, cols], xkv[b] @ w_v[:, cols]
            s = np.where(mask_of(b, h), q @ k.T / np.sqrt(hs), -np.inf)
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            heads.append(e / e.sum(axis=-1, keepdims=True) @ v)
        out.append(np.concatenate(heads, axis=-1) @ w_o)
    return np.stack(out)


@pytest.mark.parametrize("nh", [1, 2, 3])
def test_multihead_cross_attention_accepts_every_documented_shape(nh):
    rng = np.random.default_rng(40 + nh)
    xq, xkv = rng.normal(size=(B, NQ, D)), rng.normal(size=(B, NK, D))
    w_q, w_kv, w_o = rng.normal(size=(D, D)), rng.normal(size=(D, 2 * D)), rng.normal(size=(D, D))
    pad = ref.padding_mask([5, 2], NK)                               # (B, 1, Nk)
    rect = ref.causal_mask(NQ, NK)                                   # (Nq, Nk)
    per_batch = rng.random((B, NQ, NK)) < 0.6
    per_batch[..., 0] = True
    per_head = rng.random((B, nh, NQ, NK)) < 0.6
    per_head[..., 0] = True
    full = np.ones((NQ, NK), bool)
    for name, mask, mask_of in [
        ("(Nq, Nk)", rect, lambda b, h: rect),
        ("(B, Nq, Nk)", per_batch, lambda b, h: per_batch[b]),
        ("(B, 1, Nk)", pad, lambda b, h: pad[b] & full),
        ("(B, 1, 1, Nk)", pad[:, None], lambda b, h: pad[b] & full),
        ("(B, 1, Nq, Nk)", per_batch[:, None], lambda b, h: per_batch[b]),
        ("(B, NH, Nq, Nk)", per_head, lambda b, h: per_head[b, h]),
    ]:
        got = ref.multihead_cross_attention(xq, xkv, w_q, w_kv, w_o, nh, mask)
        np.testing.assert_allclose(got, loop_cross(xq, xkv, w_q, w_kv, w_o, nh, mask_of),
                                   atol=1e-12, err_msg=name)


@pytest.mark.parametrize("shape", [(2, 1, 3), (2, 1, 1, 1, 5), (2, 3, 3, 5), (3, 5), (5, 3)])
def test_multihead_cross_attention_refuses_other_shapes(shape):
    rng = np.random.default_rng(50)
    xq, xkv = rng.normal(size=(B, NQ, D)), rng.normal(size=(B, NK, D))
    w_q, w_kv, w_o = rng.normal(size=(D, D)), rng.normal(size=(D, 2 * D)), rng.normal(size=(D, D))
    if shape == (3, 5):
        mask = np.ones(shape, bool)                                   # (Nq, Nk): accepted
        ref.multihead_cross_attention(xq, xkv, w_q, w_kv, w_o, 2, mask)
        return
    with pytest.raises(ValueError) as info:
        ref.multihead_cross_attention(xq, xkv, w_q, w_kv, w_o, 2, np.ones(shape, bool))
    message = f"ValueError: {info.value}"
    assert str(shape) in message
    assert all(len(line) <= 79 for line in message.splitlines()), message


def test_mask_for_heads_returns_a_view_that_broadcasts():
    pad = ref.padding_mask([3, 4], N)
    assert ref.mask_for_heads(pad, (B,), 2, N, N).shape == (B, 1, 1, N)
    assert ref.mask_for_heads(pad[:, None], (B,), 2, N, N).shape == (B, 1, 1, N)
    assert ref.mask_for_heads(ref.causal_mask(N), (B,), 2, N, N).shape == (1, N, N)
    assert ref.mask_for_heads(None, (B,), 2, N, N) is None
