"""The answer keys of chapters 21 and 22: the lightning indexer, the top-k
selection and sparse attention; linear attention, the gated delta rule and its
chunked form. Loops against vectorised code, edge cases, named errors."""

import numpy as np
import pytest

from attnbook import reference as ref

RNG = np.random.default_rng(0)


# --- chapter 21 ---------------------------------------------------------------

def test_indexer_scores_equal_the_loop():
    q, k, w = RNG.normal(size=(2, 5, 3, 4)), RNG.normal(size=(2, 6, 4)), RNG.normal(size=(2, 5, 3))
    got = ref.indexer_scores(q, k, w)                       # (2, 5, 6)
    for b in range(2):
        for i in range(5):
            for j in range(6):
                want = sum(w[b, i, h] * max(q[b, i, h] @ k[b, j], 0) / 2 for h in range(3))
                assert np.isclose(got[b, i, j], want)
    m = ref.causal_mask(5, 6)
    masked = ref.indexer_scores(q, k, w, mask=m)
    assert np.array_equal(np.isneginf(masked), np.broadcast_to(~m, masked.shape))
    assert np.array_equal(masked[:, m], got[:, m])


@pytest.mark.parametrize("args, words", [
    ((np.zeros((5, 4)), np.zeros((6, 4)), np.zeros((5, 3))), "(..., N_q, H_I, d_I)"),
    ((np.zeros((5, 3, 4)), np.zeros((6, 5)), np.zeros((5, 3))), "same width d_I"),
    ((np.zeros((5, 3, 4)), np.zeros((6, 4)), np.zeros((5, 2))), "one weight per"),
])
def test_indexer_scores_name_bad_shapes(args, words):
    with pytest.raises(ValueError) as err:
        ref.indexer_scores(*args)
    assert words in " ".join(str(err.value).split())


def test_topk_mask_keeps_min_of_k_and_the_allowed_keys():
    s = RNG.normal(size=(3, 7, 7))
    for k in (1, 3, 7, 20):
        keep = ref.topk_mask(s, k, ref.causal_mask(7))
        assert (keep.sum(-1) == np.minimum(np.arange(1, 8), k)).all()
        assert not (keep & ~ref.causal_mask(7)).any()
        # every kept key outranks every allowed key that was dropped
        for b in range(3):
            for i in range(7):
                kept, dropped = s[b, i][keep[b, i]], s[b, i][~keep[b, i] & (np.arange(7) <= i)]
                assert dropped.size == 0 or kept.min() > dropped.max()
    with pytest.raises(ValueError, match="at least 1"):
        ref.topk_mask(s, 0)


def test_sparse_attention_with_every_key_is_dense_attention():
    q, k, v = RNG.normal(size=(3, 2, 6, 4))
    index = RNG.normal(size=(2, 6, 6))
    mask = ref.causal_mask(6)
    o, w = ref.topk_sparse_attention(q, k, v, index, 6, mask)
    o2, w2 = ref.scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_allclose(o, o2, atol=1e-14)
    np.testing.assert_allclose(w, w2, atol=1e-14)
    o1, w1 = ref.topk_sparse_attention(q, k, v, index, 1, mask)
    best = np.argmax(np.where(mask, index, -np.inf), axis=-1)       # (2, 6)
    np.testing.assert_allclose(o1, np.take_along_axis(v, best[..., None], axis=1))


def test_index_scores_broadcast_over_heads_and_must_fit():
    q, k, v = RNG.normal(size=(3, 2, 3, 5, 4))                      # (B, H, N, d)
    index = RNG.normal(size=(2, 1, 5, 5))                           # shared by heads
    _, w = ref.topk_sparse_attention(q, k, v, index, 2)
    assert ((w > 0) == (w[:, :1] > 0)).all()                        # same keys per head
    with pytest.raises(ValueError, match="broadcast"):
        ref.topk_sparse_attention(q, k, v, np.zeros((4, 4)), 2)


def test_live_figure_numbers_follow_the_answer_key_over_the_whole_range():
    """Chapter 21's live figure (attnbook.live.TopKKeep): its Python numbers,
    which the browser tests compare with its JavaScript, equal a top-k by
    hand at every slider value."""
    live = pytest.importorskip("attnbook.live")
    pytest.importorskip("anywidget")
    index, z = [0.9, 0.2, 1.4, 0.5, 1.1, 0.7, 0.1, 0.3], [0.5, -0.3, 1.0, 0.2, 0.4, 3.0, -1.0, 0.0]
    values = [0.2, -0.5, 0.1, 0.4, -0.3, 2.0, 0.6, -0.1]
    fig = live.TopKKeep(index, z, values, k=8)
    assert fig.control_values() == [float(k) for k in range(1, 9)]
    for k in fig.control_values():
        kept = np.argsort(-np.array(index))[:int(k)]
        e = np.zeros(8)
        e[kept] = np.exp(np.array(z)[kept])
        w = e / e.sum()
        assert fig.numbers(k) == [f"{x:.2f}" for x in w] + [f"{w @ values:.3f}"]
    with pytest.raises(ValueError, match="one index score"):
        live.TopKKeep([1.0, 2.0], [1.0], [1.0])


# --- chapter 22 ---------------------------------------------------------------

def test_linear_attention_is_the_recurrence():
    q, k, v = RNG.normal(size=(2, 7, 3)), RNG.normal(size=(2, 7, 3)), RNG.normal(size=(2, 7, 2))
    s, out = np.zeros((2, 3, 2)), np.zeros((2, 7, 2))
    for t in range(7):
        s = s + k[:, t, :, None] * v[:, t, None, :]
        out[:, t] = np.einsum("nkv,nk->nv", s, q[:, t]) / np.sqrt(3)
    np.testing.assert_allclose(ref.linear_attention(q, k, v), out, atol=1e-13)


def test_delta_rule_without_gate_or_prediction_is_linear_attention():
    """With g = 0 and a state that never predicts (k orthogonal to every
    earlier key, beta = 1), the delta rule writes k v^T like linear
    attention."""
    q = RNG.normal(size=(4, 4))
    k, v = np.eye(4), RNG.normal(size=(4, 3))
    o, _ = ref.gated_delta_rule(q, k, v, np.zeros(4), np.ones(4))
    np.testing.assert_allclose(o, ref.linear_attention(q, k, v), atol=1e-14)


@pytest.mark.parametrize("n, chunk", [(1, 1), (5, 2), (9, 4), (16, 16), (13, 64)])
def test_chunked_equals_the_recurrence(n, chunk):
    r = np.random.default_rng(n)
    q, k = r.normal(size=(2, 3, 2, n, 4))
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = r.normal(size=(3, 2, n, 5))
    g, beta = -r.uniform(0, 2, size=(3, 2, n)), r.uniform(size=(3, 2, n))
    s0 = r.normal(size=(3, 2, 4, 5))
    o, s = ref.gated_delta_rule(q, k, v, g, beta, initial_state=s0)
    o2, s2 = ref.chunked_gated_delta_rule(q, k, v, g, beta, chunk_size=chunk, initial_state=s0)
    np.testing.assert_allclose(o2, o, atol=1e-12)
    np.testing.assert_allclose(s2, s, atol=1e-12)


def test_the_state_carries_over_between_calls():
    q, k = RNG.normal(size=(2, 8, 3))
    v, g, beta = RNG.normal(size=(8, 2)), -RNG.uniform(size=8), RNG.uniform(size=8)
    o, s = ref.gated_delta_rule(q, k, v, g, beta)
    o1, s1 = ref.gated_delta_rule(q[:5], k[:5], v[:5], g[:5], beta[:5])
    o2, s2 = ref.gated_delta_rule(q[5:], k[5:], v[5:], g[5:], beta[5:], initial_state=s1)
    np.testing.assert_allclose(np.concatenate([o1, o2]), o, atol=1e-14)
    np.testing.assert_allclose(s2, s, atol=1e-14)


@pytest.mark.parametrize("args, words", [
    ((np.zeros((4, 3)), np.zeros((4, 2)), np.zeros((4, 2)), np.zeros(4), np.zeros(4)),
     "same shape"),
    ((np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((5, 2)), np.zeros(4), np.zeros(4)),
     "same leading axes"),
    ((np.zeros((4, 3)), np.zeros((4, 3)), np.zeros((4, 2)), np.zeros(3), np.zeros(4)),
     "one number per"),
])
def test_gated_delta_rule_names_bad_shapes(args, words):
    for fn in (ref.gated_delta_rule, ref.chunked_gated_delta_rule):
        with pytest.raises(ValueError) as err:
            fn(*args)
        assert words in " ".join(str(err.value).split())


def test_topk_mask_ties_go_to_the_earlier_key():
    """The docstring's promise, which no test made a tie for before (issue 33:
    a mutation breaking ties toward the later key survived). Catches that
    flip (for example a reversed ascending argsort, or an unstable sort)."""
    s = np.array([[1.0, 2.0, 2.0, 2.0, 0.5],
                  [3.0, 3.0, 0.0, 3.0, 3.0]])
    keep = ref.topk_mask(s, 2)
    assert keep.tolist() == [[False, True, True, False, False],
                             [True, True, False, False, False]]
    causal = ref.causal_mask(5)
    ties = np.ones((5, 5))                            # every score tied
    np.testing.assert_array_equal(ref.topk_mask(ties, 2, causal),
                                  causal & (np.arange(5) < 2))
