"""The answer key of "Attention in today's LLMs": RoPE, grouped-query attention,
the bottom-right causal mask; NumPy properties, and equality with PyTorch and
Hugging Face transformers (skipped, with the reason, when they are missing).

Each comparison also flips the convention it tests (pairing, head mapping,
mask alignment) and checks that the flipped version no longer matches, so the
comparisons cannot pass by accident.
"""

import numpy as np
import pytest

from attnbook import reference as ref

RNG = np.random.default_rng(13)


# --- causal_mask(n_q, n_k) -------------------------------------------------

def test_causal_mask_square_unchanged():
    for n in range(6):
        assert np.array_equal(ref.causal_mask(n), np.tril(np.ones((n, n), bool)))
        assert np.array_equal(ref.causal_mask(n, n), ref.causal_mask(n))


@pytest.mark.parametrize("n_q,n_k", [(1, 5), (2, 5), (3, 3), (5, 2), (0, 4), (4, 0)])
def test_causal_mask_bottom_right(n_q, n_k):
    m = ref.causal_mask(n_q, n_k)
    assert m.shape == (n_q, n_k) and m.dtype == bool
    for i in range(n_q):
        pos = n_k - n_q + i  # where query i sits among the keys
        for j in range(n_k):
            assert m[i, j] == (j <= pos)


def test_causal_mask_is_the_last_rows_of_the_full_mask():
    full = ref.causal_mask(7)
    for n_q in range(8):
        assert np.array_equal(ref.causal_mask(n_q, 7), full[7 - n_q:])


def test_causal_mask_rejects_negative_lengths():
    with pytest.raises(ValueError, match="n_q=-1"):
        ref.causal_mask(-1)
    with pytest.raises(ValueError, match="n_k=-2"):
        ref.causal_mask(2, -2)


# --- RoPE: NumPy properties ------------------------------------------------

@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_position_zero_is_identity_and_norms_are_kept(interleaved):
    x = RNG.normal(size=(2, 5, 8))
    y = ref.rope(x, np.arange(5), interleaved=interleaved)
    assert y.shape == x.shape
    np.testing.assert_allclose(y[:, 0], x[:, 0], rtol=0, atol=0)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_score_depends_only_on_the_offset(interleaved):
    q, k = RNG.normal(size=(1, 16)), RNG.normal(size=(1, 16))
    for m, n in [(3, 1), (7, 2), (100, 50)]:
        s = ref.rope(q, [m], interleaved=interleaved) @ ref.rope(k, [n], interleaved=interleaved).T
        for shift in (1, 13, 1000):
            t = (ref.rope(q, [m + shift], interleaved=interleaved)
                 @ ref.rope(k, [n + shift], interleaved=interleaved).T)
            np.testing.assert_allclose(t, s, rtol=1e-9, atol=1e-9)


def test_rope_conventions_agree_after_permuting_coordinates():
    d = 8
    perm = np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])  # interleaved -> halves
    x = RNG.normal(size=(6, d))
    pos = np.arange(6)
    a = ref.rope(x, pos, interleaved=True)[:, perm]
    b = ref.rope(x[:, perm], pos, interleaved=False)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # ... and mixing them is right at position 0 only
    mixed = ref.rope(x, pos, interleaved=False)
    right = ref.rope(x, pos, interleaved=True)
    np.testing.assert_allclose(mixed[0], right[0])
    assert not np.allclose(mixed[1:], right[1:])


def test_rope_bad_input():
    with pytest.raises(ValueError, match="d must be even"):
        ref.rope(np.ones((3, 5)), np.arange(3))
    with pytest.raises(ValueError, match=r"N = 3.*positions \(4,\)"):
        ref.rope(np.ones((3, 4)), np.arange(4))
    with pytest.raises(ValueError, match="base"):
        ref.rope(np.ones((3, 4)), np.arange(3), base=0.5)
    assert ref.rope(np.ones((0, 4)), np.arange(0)).shape == (0, 4)


# --- grouped-query attention: NumPy properties --------------------------------

def _repeat_kv(t, group):
    """The KV head h // group for query head h, by copying (the slow, obvious way)."""
    return np.repeat(t, group, axis=-3)


@pytest.mark.parametrize("h_q,h_kv", [(4, 4), (4, 2), (6, 3), (4, 1)])
def test_gqa_equals_mha_on_repeated_kv_heads(h_q, h_kv):
    q = RNG.normal(size=(2, h_q, 3, 5))
    k = RNG.normal(size=(2, h_kv, 4, 5))
    v = RNG.normal(size=(2, h_kv, 4, 6))
    out, w = ref.grouped_query_attention(q, k, v)
    group = h_q // h_kv
    e_out, e_w = ref.scaled_dot_product_attention(q, _repeat_kv(k, group), _repeat_kv(v, group))
    assert out.shape == (2, h_q, 3, 6) and w.shape == (2, h_q, 3, 4)
    np.testing.assert_allclose(out, e_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(w, e_w, rtol=1e-12, atol=1e-12)
    if 1 < group < h_q:  # tile (repeat) instead of repeat_interleave maps heads wrongly
        tiled = np.tile(k, (1, group, 1, 1)), np.tile(v, (1, group, 1, 1))
        assert not np.allclose(out, ref.scaled_dot_product_attention(q, *tiled)[0])


@pytest.mark.parametrize("mask_shape", [(3, 4), (2, 1, 1, 4), (2, 1, 3, 4), (2, 6, 3, 4), (6, 3, 4)])
def test_gqa_masks_broadcast_like_sdpa(mask_shape):
    q, k, v = RNG.normal(size=(2, 6, 3, 5)), RNG.normal(size=(2, 2, 4, 5)), RNG.normal(size=(2, 2, 4, 5))
    mask = RNG.random(mask_shape) < 0.7
    mask[..., 0] = True
    out, w = ref.grouped_query_attention(q, k, v, mask)
    e_out, e_w = ref.scaled_dot_product_attention(q, _repeat_kv(k, 3), _repeat_kv(v, 3), mask)
    np.testing.assert_allclose(out, e_out, rtol=1e-12, atol=1e-12)
    assert (w[np.broadcast_to(~mask, w.shape)] == 0).all()


def test_gqa_fully_masked_rows_follow_the_policy():
    q, k, v = RNG.normal(size=(1, 4, 2, 3)), RNG.normal(size=(1, 2, 3, 3)), RNG.normal(size=(1, 2, 3, 3))
    mask = np.ones((1, 4, 2, 3), bool)
    mask[0, 3, 1] = False
    with pytest.raises(ValueError, match=r"query \(0, 3, 1\)"):
        ref.grouped_query_attention(q, k, v, mask)
    out, w = ref.grouped_query_attention(q, k, v, mask, fully_masked="zeros")
    assert (out[0, 3, 1] == 0).all() and (w[0, 3, 1] == 0).all()


def test_gqa_bad_head_counts_name_both():
    q, k = np.ones((1, 6, 2, 4)), np.ones((1, 4, 2, 4))
    with pytest.raises(ValueError, match=r"H_q = 6.*H_kv = 4"):
        ref.grouped_query_attention(q, k, k)
    with pytest.raises(ValueError, match="same number of heads"):
        ref.grouped_query_attention(q, np.ones((1, 2, 2, 4)), np.ones((1, 3, 2, 4)))
    with pytest.raises(ValueError, match=r"mask of shape \(5, 5\)"):
        ref.grouped_query_attention(q, np.ones((1, 2, 2, 4)), np.ones((1, 2, 2, 4)), np.ones((5, 5), bool))


def test_gqa_padding_mask_per_sequence_is_not_read_as_per_kv_head():
    """A (B, 1, 1, N_k) padding mask lines up with the batch, never with the
    KV-head axis of the grouped scores (B = H_kv = 2 makes the mix-up silent
    in code that applies the mask to (B, H_kv, group, N_q, N_k) as it comes)."""
    rng = np.random.default_rng(21)
    q = rng.normal(size=(2, 8, 5, 4))
    k, v = rng.normal(size=(2, 2, 2, 5, 4))
    pad = np.ones((2, 1, 1, 5), dtype=bool)
    pad[1, ..., 3:] = False
    out, w = ref.grouped_query_attention(q, k, v, pad)
    copied, _ = ref.scaled_dot_product_attention(q, np.repeat(k, 4, axis=1),
                                                 np.repeat(v, 4, axis=1), pad)
    assert np.allclose(out, copied)
    assert np.all(w[1, :, :, 3:] == 0) and np.all(w[0] > 0)
    with pytest.raises(ValueError, match=r"\(3, 1, 1, 5\)"):
        ref.grouped_query_attention(q, k, v, np.ones((3, 1, 1, 5), dtype=bool))
