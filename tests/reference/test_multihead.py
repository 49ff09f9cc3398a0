"""Multi-head answer key: masks are per sequence and the same for every head."""

import numpy as np
import pytest

from attnbook import reference as ref


@pytest.mark.parametrize("nh", [1, 2, 3])
def test_padding_mask_applies_per_sequence_even_when_batch_equals_heads(nh):
    # B = 2: with nh = 2 the batch axis of a (B, 1, N) mask used to line up with the head axis
    rng = np.random.default_rng(11)
    b, n, d = 2, 4, 6
    x, w_qkv, w_o = rng.normal(size=(b, n, d)), rng.normal(size=(d, 3 * d)), rng.normal(size=(d, d))
    pm = ref.padding_mask([2, 4], n)  # (B, 1, N)
    got = ref.multihead_attention(x, w_qkv, w_o, nh, pm)
    expected = np.stack([ref.multihead_attention(x[i], w_qkv, w_o, nh, pm[i]) for i in range(b)])
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_padding_mask_in_cross_attention():
    rng = np.random.default_rng(12)
    b, nq, nk, d, nh = 2, 3, 5, 4, 2
    xq, xkv = rng.normal(size=(b, nq, d)), rng.normal(size=(b, nk, d))
    w_q, w_kv, w_o = rng.normal(size=(d, d)), rng.normal(size=(d, 2 * d)), rng.normal(size=(d, d))
    pm = ref.padding_mask([3, 5], nk)  # (B, 1, Nk)
    got = ref.multihead_cross_attention(xq, xkv, w_q, w_kv, w_o, nh, pm)
    expected = np.stack([ref.multihead_cross_attention(xq[i], xkv[i], w_q, w_kv, w_o, nh, pm[i]) for i in range(b)])
    np.testing.assert_allclose(got, expected, atol=1e-12)
    # keys past a sequence's length change nothing
    xkv2 = xkv.copy()
    xkv2[0, 3:] = 100.0
    np.testing.assert_allclose(ref.multihead_cross_attention(xq, xkv2, w_q, w_kv, w_o, nh, pm)[0], got[0], atol=1e-12)


def test_causal_mask_same_for_every_head():
    rng = np.random.default_rng(13)
    x, w_qkv, w_o = rng.normal(size=(3, 5, 8)), rng.normal(size=(8, 24)), rng.normal(size=(8, 8))
    a = ref.multihead_attention(x, w_qkv, w_o, 4, ref.causal_mask(5))
    b = ref.multihead_attention(x, w_qkv, w_o, 4, ref.causal_mask(5)[None])  # (1, N, N): a batch of one mask
    np.testing.assert_allclose(a, b)
    # the first token sees only itself, in every head: changing later tokens leaves it alone
    x2 = x.copy()
    x2[:, 1:] += 1.0
    np.testing.assert_allclose(ref.multihead_attention(x2, w_qkv, w_o, 4, ref.causal_mask(5))[:, 0], a[:, 0])
