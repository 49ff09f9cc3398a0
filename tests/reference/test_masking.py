"""The `mask` argument of the answer key: broadcasting over batch and heads, padding and
causal masks combined, fully masked rows inside a batch, and shapes that do not broadcast."""

import numpy as np
import pytest

from attnbook import reference as ref


def qkv(*lead, nq=5, nk=5, dk=4, dv=3, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(*lead, nq, dk)), rng.normal(size=(*lead, nk, dk)),
            rng.normal(size=(*lead, nk, dv)))


def loop_attention(q, k, v, mask):
    """The answer key applied to one (Nq, Nk) slice at a time, the mask broadcast first."""
    lead = q.shape[:-2]
    full = np.broadcast_to(mask, (*lead, q.shape[-2], k.shape[-2]))
    out = np.empty((*lead, q.shape[-2], v.shape[-1]))
    w = np.empty((*lead, q.shape[-2], k.shape[-2]))
    for idx in np.ndindex(*lead):
        out[idx], w[idx] = ref.scaled_dot_product_attention(q[idx], k[idx], v[idx], mask=full[idx])
    return out, w


@pytest.mark.parametrize("mask_shape", [(5, 5), (1, 5, 5), (1, 1, 5, 5), (2, 1, 5, 5), (1, 3, 5, 5),
                                        (2, 3, 5, 5), (2, 1, 1, 5), (3, 1, 5), (5, 1)])
def test_mask_broadcasts_over_batch_and_heads(mask_shape):
    q, k, v = qkv(2, 3)                                   # (B, NH, N, d)
    rng = np.random.default_rng(1)
    mask = rng.random(mask_shape) < 0.6
    mask[..., 0] = True                                   # every query keeps at least one key
    out, w = ref.scaled_dot_product_attention(q, k, v, mask=mask)
    out_loop, w_loop = loop_attention(q, k, v, mask)
    np.testing.assert_allclose(out, out_loop, atol=1e-12)
    np.testing.assert_allclose(w, w_loop, atol=1e-12)
    assert (w[~np.broadcast_to(mask, w.shape)] == 0).all()


def test_causal_mask_is_the_same_for_every_batch_item_and_head():
    q, k, v = qkv(2, 3)
    _, w = ref.scaled_dot_product_attention(q, k, v, mask=ref.causal_mask(5))
    assert (w[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_padding_mask_for_heads_needs_a_head_axis():
    q, k, v = qkv(2, 3)
    pm = ref.padding_mask([5, 3], 5)                     # (B, 1, N)
    _, w = ref.scaled_dot_product_attention(q, k, v, mask=pm[:, None])   # (B, 1, 1, N)
    assert (w[1, :, :, 3:] == 0).all() and (w[0] > 0).all()
    with pytest.raises(ValueError, match="does not broadcast"):          # (2, 1, 5) vs (2, 3, 5, 5)
        ref.scaled_dot_product_attention(q, k, v, mask=pm)


def test_padding_hides_key_columns_and_keeps_real_outputs():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 6, 4))
    lengths = [6, 4]
    pm = ref.padding_mask(lengths, 6)
    out, w = ref.scaled_dot_product_attention(x, x, x, mask=pm)
    assert (w[1, :, 4:] == 0).all()
    alone, _ = ref.scaled_dot_product_attention(x[1, :4], x[1, :4], x[1, :4])
    np.testing.assert_allclose(out[1, :4], alone)
    x2 = x.copy()
    x2[1, 4:] = 99.0                                     # change the padding: real rows must not move
    out2, _ = ref.scaled_dot_product_attention(x2, x2, x2, mask=pm)
    np.testing.assert_allclose(out2[1, :4], out[1, :4])


def test_padding_and_causal_combined_equals_each_sequence_alone():
    rng = np.random.default_rng(3)
    lengths = np.array([5, 2, 4])
    x = rng.normal(size=(3, 5, 4))
    both = ref.padding_mask(lengths, 5) & ref.causal_mask(5)            # (B, N, N)
    assert both.shape == (3, 5, 5)
    out, w = ref.scaled_dot_product_attention(x, x, x, mask=both)
    for b, L in enumerate(lengths):
        o, wb = ref.scaled_dot_product_attention(x[b, :L], x[b, :L], x[b, :L], mask=ref.causal_mask(L))
        np.testing.assert_allclose(out[b, :L], o)
        np.testing.assert_allclose(w[b, :L, :L], wb)
        assert (w[b, :, L:] == 0).all()


def test_cross_attention_padding_mask_with_nq_ne_nk():
    q, k, v = qkv(2, nq=3, nk=7)
    pm = ref.padding_mask([7, 5], 7)                     # (B, 1, Nk)
    out, w = ref.scaled_dot_product_attention(q, k, v, mask=pm)
    assert out.shape == (2, 3, 3) and (w[1, :, 5:] == 0).all()
    o1, _ = ref.scaled_dot_product_attention(q[1], k[1, :5], v[1, :5])
    np.testing.assert_allclose(out[1], o1)


def test_fully_masked_row_inside_a_batch_raises_and_names_it():
    q, k, v = qkv(2, 3)
    mask = np.ones((2, 3, 5, 5), bool)
    mask[1, 2, 4] = False
    with pytest.raises(ValueError, match=r"query \(1, 2, 4\)"):
        ref.scaled_dot_product_attention(q, k, v, mask=mask)


def test_fully_masked_rows_zeros_leave_other_rows_alone():
    q, k, v = qkv(2, 3)
    mask = np.broadcast_to(ref.causal_mask(5), (2, 3, 5, 5)).copy()
    mask[0, 1, 3] = False
    mask[1, :, 0] = False                                # row 0 of every head of item 1
    out, w = ref.scaled_dot_product_attention(q, k, v, mask=mask, fully_masked="zeros")
    empty = ~mask.any(-1)
    assert empty.sum() == 1 + 3
    assert (w[empty] == 0).all() and (out[empty] == 0).all()
    out_c, w_c = ref.scaled_dot_product_attention(q, k, v, mask=ref.causal_mask(5))
    np.testing.assert_allclose(out[~empty], out_c[~empty])
    np.testing.assert_allclose(w.sum(-1)[~empty], 1.0)
    assert not np.isnan(out).any()


def test_empty_sequence_in_a_padded_batch():
    q, k, v = qkv(2)
    pm = ref.padding_mask([5, 0], 5)
    with pytest.raises(ValueError, match=r"query \(1, 0\)"):
        ref.scaled_dot_product_attention(q, k, v, mask=pm)
    out, w = ref.scaled_dot_product_attention(q, k, v, mask=pm, fully_masked="zeros")
    assert (out[1] == 0).all() and (w[1] == 0).all()
    np.testing.assert_allclose(out[0], ref.scaled_dot_product_attention(q[0], k[0], v[0])[0])


@pytest.mark.parametrize("mask_shape", [(4, 4), (5, 4), (2, 5, 5), (2, 2, 5, 5), (5, 5, 1, 1)])
def test_mask_shapes_that_do_not_broadcast(mask_shape):
    q, k, v = qkv(2, 3)                                   # scores (2, 3, 5, 5); (2, 5, 5) puts B on the heads
    with pytest.raises(ValueError, match="does not broadcast"):
        ref.scaled_dot_product_attention(q, k, v, mask=np.ones(mask_shape, bool))


def test_mask_that_would_enlarge_the_scores_is_refused():
    q, k, v = qkv()                                       # scores (5, 5)
    with pytest.raises(ValueError, match="enlarge"):
        ref.scaled_dot_product_attention(q, k, v, mask=np.ones((2, 5, 5), bool))


@pytest.mark.parametrize("bad", [np.tril(np.ones((5, 5))), np.where(np.tril(np.ones((5, 5))) == 1, 0.0, -np.inf),
                                 np.tril(np.ones((5, 5), int))])
def test_non_boolean_masks_are_refused_with_a_hint(bad):
    q, k, v = qkv()
    with pytest.raises(TypeError, match="True = may attend"):
        ref.scaled_dot_product_attention(q, k, v, mask=bad)


def test_mask_is_not_modified_and_hidden_values_do_not_matter():
    q, k, v = qkv(2)
    mask = ref.padding_mask([5, 3], 5)
    before = mask.copy()
    out, _ = ref.scaled_dot_product_attention(q, k, v, mask=mask)
    np.testing.assert_array_equal(mask, before)
    v2, k2 = v.copy(), k.copy()
    v2[1, 3:] = 1e6
    k2[1, 3:] = -1e3
    out2, _ = ref.scaled_dot_product_attention(q, k2, v2, mask=mask)
    np.testing.assert_allclose(out2, out)


def test_three_spellings_of_the_causal_mask_agree():
    q, k, v = qkv()
    scores = q @ k.T / 2.0
    keep01 = np.tril(np.ones((5, 5)))
    additive = np.where(np.triu(np.ones((5, 5)), k=1) == 1, -np.inf, 0.0)
    hidden = np.triu(np.ones((5, 5), bool), k=1)
    _, w = ref.scaled_dot_product_attention(q, k, v, mask=ref.causal_mask(5))
    for masked in (np.where(keep01 == 0, -np.inf, scores), scores + additive, np.where(hidden, -np.inf, scores)):
        np.testing.assert_allclose(ref.softmax(masked), w)
