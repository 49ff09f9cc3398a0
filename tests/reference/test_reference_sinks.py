"""The answer key of chapter 19: attention with a sink per head, and the
reach of a stack of sliding-window and full layers."""

import numpy as np
import pytest

from attnbook import reference as ref

RNG = np.random.default_rng(0)
Q = RNG.normal(size=(2, 3, 4, 5))   # (B, H, N_q, d_k)
K = RNG.normal(size=(2, 3, 6, 5))   # (B, H, N_k, d_k)
V = RNG.normal(size=(2, 3, 6, 2))   # (B, H, N_k, d_v)
SINKS = np.array([-1.0, 0.5, 2.0])


def _by_loop(q, k, v, sinks, mask):
    """One row at a time: exp(s_j) / (sum_j exp(s_j) + exp(sink))."""
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    w = np.zeros(q.shape[:-1] + (k.shape[-2],))
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            for i in range(q.shape[2]):
                s = k[b, h] @ q[b, h, i] / np.sqrt(q.shape[-1])
                e = np.where(mask[i], np.exp(s), 0.0)
                w[b, h, i] = e / (e.sum() + np.exp(sinks[h]))
                out[b, h, i] = w[b, h, i] @ v[b, h]
    return out, w


@pytest.mark.parametrize("mask", [np.ones((4, 6), bool), ref.causal_mask(4, 6),
                                  ref.sliding_window_mask(4, 6, 2)])
def test_equals_the_loop(mask):
    o, w = ref.attention_with_sinks(Q, K, V, SINKS, mask=mask)
    o2, w2 = _by_loop(Q, K, V, SINKS, mask)
    np.testing.assert_allclose(o, o2, rtol=0, atol=1e-13)
    np.testing.assert_allclose(w, w2, rtol=0, atol=1e-13)


def test_rows_sum_to_one_minus_the_sink_share():
    _, w = ref.attention_with_sinks(Q, K, V, SINKS)
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(5)
    share = np.exp(SINKS[:, None]) / (np.exp(s).sum(-1) + np.exp(SINKS[:, None]))
    np.testing.assert_allclose(w.sum(-1), 1 - share, rtol=0, atol=1e-14)
    assert (share > 0).all()


def test_very_negative_sink_is_plain_attention():
    o, w = ref.attention_with_sinks(Q, K, V, np.full(3, -1e4))
    o2, w2 = ref.scaled_dot_product_attention(Q, K, V)
    np.testing.assert_allclose(o, o2, rtol=0, atol=1e-14)
    np.testing.assert_allclose(w, w2, rtol=0, atol=1e-14)


def test_fully_masked_row_gives_zero_not_nan():
    mask = np.ones((4, 6), bool)
    mask[2] = False
    o, w = ref.attention_with_sinks(Q, K, V, SINKS, mask=mask)
    assert np.isfinite(o).all() and np.isfinite(w).all()
    assert np.abs(o[:, :, 2]).max() == 0 and np.abs(w[:, :, 2]).max() == 0
    o_all, _ = ref.attention_with_sinks(Q, K, V, SINKS, mask=np.zeros((4, 6), bool))
    assert np.abs(o_all).max() == 0


def test_large_scores_do_not_overflow():
    o, w = ref.attention_with_sinks(Q * 100, K * 100, V, SINKS)
    assert np.isfinite(o).all() and np.isfinite(w).all()


@pytest.mark.parametrize("args, words", [
    ((Q, K, V, np.zeros(2)), "sinks must have shape (H,) = (3,)"),
    ((Q, K, V, np.zeros((3, 1))), "one logit per head"),
    ((Q, K[:, :2], V[:, :2], SINKS), "same"),
    ((Q, K[..., :4], V, SINKS), "same width d_k"),
    ((Q, K, V[..., :5, :], SINKS), "same number of keys"),
    ((Q[0, 0], K[0, 0], V[0, 0], SINKS), "need a head axis"),
])
def test_bad_shapes_are_named(args, words):
    with pytest.raises(ValueError) as err:
        ref.attention_with_sinks(*args)
    assert words in " ".join(str(err.value).split())


def test_mask_must_be_boolean_and_fit():
    with pytest.raises(TypeError, match="boolean"):
        ref.attention_with_sinks(Q, K, V, SINKS, mask=np.ones((4, 6)))
    with pytest.raises(ValueError, match="broadcast"):
        ref.attention_with_sinks(Q, K, V, SINKS, mask=np.ones((4, 5), bool))


def _reach_by_masks(position, types, window):
    """Boolean matrix products of the layers' masks: which keys reach query
    `position` through the stack."""
    n = position + 1
    reach = np.eye(n, dtype=bool)
    for t in types:
        m = ref.sliding_window_mask(n, n, window) if t == "sliding" else ref.causal_mask(n)
        reach = (reach.astype(int) @ m.astype(int)) > 0
    return int(np.argmax(reach[position]))


@pytest.mark.parametrize("position, types, window", [
    (10, ["sliding"], 4), (20, ["sliding"] * 3, 4), (5, ["sliding"] * 2, 4),
    (6, ["sliding"] * 3, 1), (40, ["sliding", "full"], 3), (9, [], 4),
    (300, ["sliding"] * 2, 128), (30, ["sliding"] * 4, 5)])
def test_reach_equals_the_mask_products(position, types, window):
    assert ref.reach_after_layers(position, types, window) == \
        _reach_by_masks(position, types, window)


def test_reach_rejects_bad_input():
    with pytest.raises(ValueError, match="'local'"):
        ref.reach_after_layers(5, ["local"], 3)
    with pytest.raises(ValueError, match="window"):
        ref.reach_after_layers(5, ["sliding"], 0)


def test_live_figure_numbers_follow_the_formula_over_the_whole_range():
    """Chapter 19's live figure (attnbook.live.SinkDrain): its Python numbers,
    which the browser tests compare with its JavaScript, equal the sink
    formula exp(z_j) / (sum exp(z) + exp(b)) at every slider value."""
    live = pytest.importorskip("attnbook.live")
    pytest.importorskip("anywidget")
    z, values = np.array([2.0, 0.5, -0.5, 1.0]), np.array([1.0, -2.0, 0.5, 3.0])
    fig = live.SinkDrain(z, values, b=0.0)
    steps = fig.control_values()
    assert steps[0] == -4.0 and steps[-1] == 6.0 and len(steps) == 41
    for b in steps:
        w = np.exp(z) / (np.exp(z).sum() + np.exp(b))
        share = 1 - w.sum()
        assert fig.numbers(b) == ([f"{x:.2f}" for x in w] + [f"{share:.2f}"]
                                  + [f"{share:.3f}", f"{w @ values:.3f}"])
    with pytest.raises(ValueError, match="one value per score"):
        live.SinkDrain([1.0, 2.0], [1.0])
