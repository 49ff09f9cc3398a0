"""Tests of the answer key, attnbook.reference: examples, edge cases, properties."""

from types import SimpleNamespace

import numpy as np
import pytest

from attnbook import reference as ref


def hypothesis():
    """given, settings and the strategies of the property tests below.

    Imported when a property test runs, not at collection: every xdist worker collects every
    module, and importing hypothesis costs a few tenths of a CPU-second. Each property test
    builds its @given function and calls it: the same property, strategies and settings.
    """
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    finite = st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False,
                       width=64)

    def arrays(shape):
        return hnp.arrays(np.float64, shape, elements=finite)

    any_arrays = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6).flatmap(arrays)
    return SimpleNamespace(given=given, props=settings(max_examples=60, deadline=None), st=st,
                           finite=finite, arrays=arrays, any_arrays=any_arrays)


# --- softmax -----------------------------------------------------------------

def test_softmax_known_values():
    got = ref.softmax(np.array([1.0, 2.0, 3.0]))
    e = np.exp([1.0, 2.0, 3.0])
    np.testing.assert_allclose(got, e / e.sum())


def test_softmax_large_values_do_not_overflow():
    got = ref.softmax(np.array([1000.0, 1001.0, 1002.0]))
    np.testing.assert_allclose(got, ref.softmax(np.array([0.0, 1.0, 2.0])))
    assert np.isfinite(got).all()


def test_softmax_neg_inf_gets_exactly_zero():
    got = ref.softmax(np.array([0.5, -np.inf, 1.5]))
    assert got[1] == 0.0
    np.testing.assert_allclose(got.sum(), 1.0)


def test_softmax_all_neg_inf_row_is_an_error():
    with pytest.raises(ValueError, match="entirely -inf"):
        ref.softmax(np.array([[0.0, 1.0], [-np.inf, -np.inf]]))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_softmax_rejects_nan_and_pos_inf(bad):
    with pytest.raises(ValueError, match="nan or \\+inf"):
        ref.softmax(np.array([0.0, bad]))


def test_softmax_empty_axis_returns_empty():
    got = ref.softmax(np.zeros((2, 0)))
    assert got.shape == (2, 0)


def test_softmax_scalar_is_an_error():
    with pytest.raises(ValueError, match="scalar"):
        ref.softmax(3.0)


def test_softmax_zero_temperature_is_the_argmax_limit():
    np.testing.assert_array_equal(ref.softmax(np.array([1.0, 3.0, 2.0]), temperature=0), [0, 1, 0])
    # ties share the weight equally, as the limit t -> 0+ does
    np.testing.assert_array_equal(ref.softmax(np.array([3.0, 1.0, 3.0]), temperature=0), [0.5, 0, 0.5])
    # and it is the limit: a tiny temperature gives nearly the same
    np.testing.assert_allclose(ref.softmax(np.array([1.0, 3.0, 2.0]), temperature=1e-3), [0, 1, 0], atol=1e-12)


@pytest.mark.parametrize("t", [-1.0, np.nan, np.inf])
def test_softmax_bad_temperature_is_an_error(t):
    with pytest.raises(ValueError, match="temperature"):
        ref.softmax(np.array([1.0, 2.0]), temperature=t)


def test_softmax_temperature_divides_the_scores():
    z = np.array([1.0, 2.0, 7.0, 12.0])
    np.testing.assert_allclose(ref.softmax(z, temperature=4.0), ref.softmax(z / 4.0))


def test_softmax_axis_argument():
    z = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(ref.softmax(z, axis=0).sum(axis=0), 1.0)
    np.testing.assert_allclose(ref.softmax(z, axis=0), ref.softmax(z.T).T)


def test_softmax_rejects_non_numeric():
    with pytest.raises(TypeError):
        ref.softmax(np.array([True, False]))


def test_softmax_rows_sum_to_one_and_lie_in_0_1():
    h = hypothesis()

    @h.props
    @h.given(h.any_arrays)
    def prop(z):
        p = ref.softmax(z)
        np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-12)
        assert (p >= 0).all() and (p <= 1).all()

    prop()


def test_softmax_is_shift_invariant():
    h = hypothesis()

    @h.props
    @h.given(h.any_arrays, h.finite)
    def prop(z, c):
        np.testing.assert_allclose(ref.softmax(z + c), ref.softmax(z), atol=1e-12)

    prop()


def test_softmax_preserves_order():
    h = hypothesis()

    @h.props
    @h.given(h.arrays((7,)))
    def prop(z):
        p = ref.softmax(z)
        i, j = np.argmin(z), np.argmax(z)
        assert p[i] <= p[j]
        # strict where the inputs differ enough for exp to tell them apart
        order = np.argsort(z, kind="stable")
        assert (np.diff(p[order]) >= -1e-15).all()

    prop()


# --- scaled_dot_product_attention ---------------------------------------------

def three_tokens():
    x = np.arange(12.0).reshape(3, 4)
    wq = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], float)
    wk = wq[:, ::-1]
    wv = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], float)
    return x @ wq, x @ wk, x @ wv


def test_three_token_example_matches_hand_computation():
    q, k, v = three_tokens()
    out, w = ref.scaled_dot_product_attention(q, k, v)
    scores = np.array([[10, 58, 106], [58, 234, 410], [106, 410, 714]]) / np.sqrt(2)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    np.testing.assert_allclose(w, e / e.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(out, [[18, 20]] * 3)


def test_shapes_with_dk_ne_dv_and_nq_ne_nk():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 5, 64)), rng.normal(size=(2, 7, 64)), rng.normal(size=(2, 7, 128))
    out, w = ref.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 5, 128) and w.shape == (2, 5, 7)


@pytest.mark.parametrize(
    "qs, ks, vs, match",
    [
        ((3, 4), (3, 5), (3, 2), "same last dimension dk"),
        ((3, 4), (3, 4), (2, 2), "same number of positions Nk"),
        ((2, 3, 4), (3, 3, 4), (3, 3, 2), "do not broadcast"),
        ((4,), (3, 4), (3, 2), "at least 2 dimensions"),
        ((3, 0), (3, 0), (3, 2), "dk is 0"),
    ],
)
def test_shape_errors_name_the_shapes(qs, ks, vs, match):
    with pytest.raises(ValueError, match=match) as info:
        ref.scaled_dot_product_attention(np.ones(qs), np.ones(ks), np.ones(vs))
    if match != "dk is 0":
        assert str(qs) in str(info.value) or str(ks) in str(info.value)


def test_mask_must_be_boolean_and_broadcastable():
    q, k, v = three_tokens()
    with pytest.raises(TypeError, match="boolean"):
        ref.scaled_dot_product_attention(q, k, v, mask=np.tril(np.ones((3, 3))))
    with pytest.raises(ValueError, match=r"\(2, 2\).*\(3, 3\)"):
        ref.scaled_dot_product_attention(q, k, v, mask=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="enlarge"):
        ref.scaled_dot_product_attention(q, k, v, mask=np.ones((4, 3, 3), bool))


def test_causal_mask_gives_exact_zeros_above_diagonal():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 5, 4))
    out, w = ref.scaled_dot_product_attention(x, x, x, mask=ref.causal_mask(5))
    assert (w[..., np.triu_indices(5, 1)[0], np.triu_indices(5, 1)[1]] == 0).all()
    np.testing.assert_allclose(w.sum(-1), 1.0)


def test_fully_masked_row_raises_by_default_and_names_it():
    q, k, v = three_tokens()
    mask = np.ones((3, 3), bool)
    mask[1] = False
    with pytest.raises(ValueError, match=r"query \(1,\).*every key masked"):
        ref.scaled_dot_product_attention(q, k, v, mask=mask)


def test_fully_masked_row_zeros_option():
    q, k, v = three_tokens()
    mask = np.ones((3, 3), bool)
    mask[1] = False
    out, w = ref.scaled_dot_product_attention(q, k, v, mask=mask, fully_masked="zeros")
    assert (w[1] == 0).all() and (out[1] == 0).all()
    full_out, full_w = ref.scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(w[[0, 2]], full_w[[0, 2]])
    np.testing.assert_allclose(out[[0, 2]], full_out[[0, 2]])
    with pytest.raises(ValueError, match="fully_masked"):
        ref.scaled_dot_product_attention(q, k, v, fully_masked="nan")


def test_empty_sequences():
    out, w = ref.scaled_dot_product_attention(np.ones((0, 2)), np.ones((3, 2)), np.ones((3, 5)))
    assert out.shape == (0, 5) and w.shape == (0, 3)
    with pytest.raises(ValueError, match="every key masked"):
        ref.scaled_dot_product_attention(np.ones((2, 2)), np.ones((0, 2)), np.ones((0, 5)))
    out, w = ref.scaled_dot_product_attention(np.ones((2, 2)), np.ones((0, 2)), np.ones((0, 5)), fully_masked="zeros")
    assert out.shape == (2, 5) and (out == 0).all() and w.shape == (2, 0)


def test_one_key_returns_its_value():
    h = hypothesis()
    st = h.st

    @h.props
    @h.given(st.integers(1, 4), st.integers(1, 5), st.integers(1, 4), st.integers(0, 10_000))
    def prop(nq, dk, dv, seed):
        rng = np.random.default_rng(seed)
        q, k, v = rng.normal(size=(nq, dk)) * 10, rng.normal(size=(1, dk)), rng.normal(size=(1, dv))
        out, w = ref.scaled_dot_product_attention(q, k, v)
        np.testing.assert_allclose(w, 1.0)
        np.testing.assert_allclose(out, np.repeat(v, nq, axis=0))

    prop()


def test_batch_equals_items_one_by_one():
    h = hypothesis()
    st = h.st

    @h.props
    @h.given(st.integers(1, 3), st.integers(1, 5), st.integers(1, 5), st.integers(0, 10_000),
             st.booleans())
    def prop(b, nq, nk, seed, use_mask):
        rng = np.random.default_rng(seed)
        q, k = rng.normal(size=(b, nq, 3)), rng.normal(size=(b, nk, 3))
        v = rng.normal(size=(b, nk, 2))
        mask = None
        if use_mask:
            mask = rng.random((b, nq, nk)) < 0.7
            mask[..., 0] = True  # keep every row attendable
        out, w = ref.scaled_dot_product_attention(q, k, v, mask=mask)
        for i in range(b):
            oi, wi = ref.scaled_dot_product_attention(q[i], k[i], v[i],
                                                      mask=None if mask is None else mask[i])
            np.testing.assert_allclose(out[i], oi)
            np.testing.assert_allclose(w[i], wi)

    prop()


def test_masked_positions_get_exactly_zero_weight():
    h = hypothesis()
    st = h.st

    @h.props
    @h.given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 10_000))
    def prop(nq, nk, seed):
        rng = np.random.default_rng(seed)
        q, k = rng.normal(size=(nq, 4)) * 5, rng.normal(size=(nk, 4)) * 5
        v = rng.normal(size=(nk, 2))
        mask = rng.random((nq, nk)) < 0.5
        mask[:, rng.integers(nk)] = True
        out, w = ref.scaled_dot_product_attention(q, k, v, mask=mask)
        assert (w[~mask] == 0).all()
        np.testing.assert_allclose(w.sum(-1), 1.0)

    prop()


# --- masks, heads, multi-head ---------------------------------------------------

def test_causal_and_padding_masks():
    np.testing.assert_array_equal(ref.causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert ref.causal_mask(0).shape == (0, 0)
    pm = ref.padding_mask([2, 3], 4)
    assert pm.shape == (2, 1, 4)
    np.testing.assert_array_equal(pm[:, 0], [[1, 1, 0, 0], [1, 1, 1, 0]])
    with pytest.raises(ValueError, match=r"\[0, 4\]"):
        ref.padding_mask([5], 4)
    with pytest.raises(ValueError, match=">= 0"):
        ref.causal_mask(-1)


def test_split_and_merge_heads_are_inverse_and_keep_tokens_apart():
    x = np.arange(2 * 3 * 8).reshape(2, 3, 8)  # (B, N, D)
    h = ref.split_heads(x, 4)  # (B, NH, N, HS)
    assert h.shape == (2, 4, 3, 2)
    np.testing.assert_array_equal(h[0, 1, 2], x[0, 2, 2:4])  # head 1 of token 2 = columns 2:4 of token 2
    np.testing.assert_array_equal(ref.merge_heads(h), x)
    with pytest.raises(ValueError, match="not divisible"):
        ref.split_heads(x, 3)


def _mha_loop(x, w_qkv, w_o, nh, mask=None):
    d = x.shape[-1]
    hs = d // nh
    wq, wk, wv = np.split(w_qkv, 3, axis=1)
    outs = []
    for h in range(nh):
        cols = slice(h * hs, (h + 1) * hs)
        o, _ = ref.scaled_dot_product_attention(x @ wq[:, cols], x @ wk[:, cols], x @ wv[:, cols], mask)
        outs.append(o)
    return np.concatenate(outs, axis=-1) @ w_o


def test_multihead_equals_loop_over_heads():
    h = hypothesis()
    st = h.st

    @h.props
    @h.given(st.integers(1, 3), st.integers(1, 5),
             st.sampled_from([(4, 1), (4, 2), (6, 3), (8, 4)]), st.integers(0, 10_000),
             st.booleans())
    def prop(b, n, d_nh, seed, causal):
        d, nh = d_nh
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(b, n, d))
        w_qkv, w_o = rng.normal(size=(d, 3 * d)), rng.normal(size=(d, d))
        mask = ref.causal_mask(n) if causal else None
        np.testing.assert_allclose(ref.multihead_attention(x, w_qkv, w_o, nh, mask),
                                   _mha_loop(x, w_qkv, w_o, nh, mask), atol=1e-10)

    prop()


def test_multihead_shape_errors():
    x = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match=r"w_qkv must have shape \(4, 12\), got \(4, 8\)"):
        ref.multihead_attention(x, np.ones((4, 8)), np.ones((4, 4)), 2)
    with pytest.raises(ValueError, match="not divisible"):
        ref.multihead_attention(x, np.ones((4, 12)), np.ones((4, 4)), 3)


def test_multihead_cross_attention_matches_loop():
    rng = np.random.default_rng(5)
    d, nh = 6, 3
    xq, xkv = rng.normal(size=(2, 4, d)), rng.normal(size=(2, 7, d))
    w_q, w_kv, w_o = rng.normal(size=(d, d)), rng.normal(size=(d, 2 * d)), rng.normal(size=(d, d))
    got = ref.multihead_cross_attention(xq, xkv, w_q, w_kv, w_o, nh)
    assert got.shape == (2, 4, d)
    wk, wv = np.split(w_kv, 2, axis=1)
    hs = d // nh
    outs = [ref.scaled_dot_product_attention(xq @ w_q[:, h * hs:(h + 1) * hs], xkv @ wk[:, h * hs:(h + 1) * hs],
                                             xkv @ wv[:, h * hs:(h + 1) * hs])[0] for h in range(nh)]
    np.testing.assert_allclose(got, np.concatenate(outs, -1) @ w_o, atol=1e-10)
    with pytest.raises(ValueError, match="same width D"):
        ref.multihead_cross_attention(xq, xkv[..., :4], w_q, w_kv, w_o, nh)
