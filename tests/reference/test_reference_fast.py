"""The answer key of "Making attention fast": online softmax, partial
attention states and their merge, and tiled (Flash) attention, each tested
equal to the plain attention of `attnbook.reference`; its memory measured.
"""

import tracemalloc

import numpy as np
import pytest

from attnbook import reference as ref
from attnbook.reference import fast

RNG = np.random.default_rng(17)


def plain(q, k, v, mask=None, causal=False):
    if causal:
        cm = ref.causal_mask(q.shape[-2], k.shape[-2])
        mask = cm if mask is None else (mask & cm)
    return ref.scaled_dot_product_attention(q, k, v, mask, fully_masked="zeros")[0]


# --- online softmax and merging ------------------------------------------

def test_online_softmax_state_matches_two_passes():
    x = RNG.normal(size=(3, 4, 9)) * 30
    m, l = fast.online_softmax_state(x)
    assert np.array_equal(m, x.max(axis=-1))
    np.testing.assert_allclose(l, np.exp(x - m[..., None]).sum(axis=-1), rtol=1e-12)
    np.testing.assert_allclose(np.exp(x - m[..., None]) / l[..., None], ref.softmax(x), rtol=1e-12)


def test_online_softmax_state_axis_and_masked_entries():
    x = np.array([[0.5, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf]])
    m, l = fast.online_softmax_state(x.T, axis=0)
    assert m[0] == 2.0 and np.isneginf(m[1])
    np.testing.assert_allclose(l, [1 + np.exp(-1.5), 0.0])


def test_online_softmax_state_rejects_nan_and_scalars():
    with pytest.raises(ValueError, match="nan"):
        fast.online_softmax_state(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="scalar"):
        fast.online_softmax_state(3.0)


# The property tests import hypothesis when they run, not at collection (every xdist worker
# collects every module; importing hypothesis costs a few tenths of a CPU-second). Each builds
# its @given function and calls it: the same property, strategies and settings.

def test_merge_of_two_blocks_is_attention_over_both():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @given(st.integers(1, 12), st.integers(0, 12))
    @settings(max_examples=40, deadline=None)
    def prop(n_a, split):
        split = min(split, n_a)
        q = RNG.normal(size=(2, 3, 4)) * 3
        k, v = RNG.normal(size=(2, n_a, 4)) * 3, RNG.normal(size=(2, n_a, 5))
        a = ref.attention_state(q, k[:, :split], v[:, :split])
        b = ref.attention_state(q, k[:, split:], v[:, split:])
        m, l, o = ref.merge_attention_states(a, b)
        full = ref.attention_state(q, k, v)
        np.testing.assert_allclose(m, full[0])
        np.testing.assert_allclose(l, full[1], rtol=1e-12)
        np.testing.assert_allclose(o / l[..., None], plain(q, k, v), rtol=1e-10, atol=1e-12)

    prop()


def test_merge_with_an_empty_side_changes_nothing_and_gives_no_nan():
    q, k, v = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4)), RNG.normal(size=(5, 2))
    a = ref.attention_state(q, k, v)
    empty = ref.attention_state(q, k, v, mask=np.zeros(5, bool))
    assert np.isneginf(empty[0]).all() and not empty[1].any() and not empty[2].any()
    for merged in (ref.merge_attention_states(a, empty), ref.merge_attention_states(empty, a)):
        for got, want in zip(merged, a):
            np.testing.assert_allclose(got, want)
    m, l, o = ref.merge_attention_states(empty, empty)
    assert np.isneginf(m).all() and not np.isnan(l).any() and not np.isnan(o).any()
    assert not l.any() and not o.any()


# --- flash_attention equals the plain version ----------------------------

SHAPES = [
    # (lead q, lead k, lead v, Nq, Nk, dk, dv, block_q, block_k)
    ((), (), (), 7, 7, 4, 4, 3, 2),
    ((2,), (2,), (2,), 5, 11, 6, 3, 4, 4),        # Nq != Nk, dk != dv
    ((2, 3), (2, 3), (2, 3), 13, 9, 5, 8, 5, 4),  # batch and heads
    ((2, 3), (1, 3), (2, 1), 10, 10, 4, 4, 3, 7),  # broadcast leads
    ((), (), (), 6, 9, 3, 2, 64, 64),             # block bigger than N
    ((), (), (), 1, 1, 2, 3, 4, 4),               # N = 1
    ((2,), (2,), (2,), 1, 17, 4, 4, 1, 5),        # one query (decoding)
    ((), (), (), 17, 4, 4, 2, 4, 3),              # more queries than keys
]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_flash_equals_plain_on_random_shapes(shape, causal):
    lq, lk, lv, nq, nk, dk, dv, bq, bk = shape
    q = RNG.normal(size=(*lq, nq, dk)) * 2
    k = RNG.normal(size=(*lk, nk, dk)) * 2
    v = RNG.normal(size=(*lv, nk, dv))
    out, weights = ref.flash_attention(q, k, v, causal=causal, block_q=bq, block_k=bk)
    assert weights is None
    want = plain(q, k, v, causal=causal)
    assert out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mask_shape", [(9,), (1, 9), (6, 9), (2, 1, 6, 9), (2, 3, 1, 9),
                                        (3, 6, 9), (1, 1, 1, 9)])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_with_masks_of_several_broadcast_shapes(mask_shape, causal):
    q, k, v = RNG.normal(size=(2, 3, 6, 4)), RNG.normal(size=(2, 3, 9, 4)), RNG.normal(size=(2, 3, 9, 5))
    mask = RNG.random(mask_shape) < 0.6
    out, _ = ref.flash_attention(q, k, v, mask, causal=causal, block_q=4, block_k=4)
    np.testing.assert_allclose(out, plain(q, k, v, mask, causal), rtol=1e-10, atol=1e-12)


def test_flash_equals_plain_property():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @given(nq=st.integers(0, 20), nk=st.integers(0, 20), bq=st.integers(1, 8),
           bk=st.integers(1, 8), causal=st.booleans(), seed=st.integers(0, 10**6))
    @settings(max_examples=60, deadline=None)
    def prop(nq, nk, bq, bk, causal, seed):
        rng = np.random.default_rng(seed)
        q, k = rng.normal(size=(2, nq, 3)) * 4, rng.normal(size=(2, nk, 3)) * 4
        v = rng.normal(size=(2, nk, 2))
        mask = rng.random((2, nq, nk)) < 0.7
        out, _ = ref.flash_attention(q, k, v, mask, causal=causal, block_q=bq, block_k=bk)
        np.testing.assert_allclose(out, plain(q, k, v, mask, causal), rtol=1e-10, atol=1e-12)

    prop()


def test_flash_matches_the_plain_causal_version_exactly_where_it_skips_tiles():
    # Bottom-right alignment: with 4 queries and 10 keys, query 0 sees keys 0..6.
    q, k, v = RNG.normal(size=(4, 3)), RNG.normal(size=(10, 3)), RNG.normal(size=(10, 2))
    out, _ = ref.flash_attention(q, k, v, causal=True, block_q=2, block_k=3)
    np.testing.assert_allclose(out, plain(q, k, v, ref.causal_mask(4, 10)), rtol=1e-12)
    top_left = np.tril(np.ones((4, 10), bool))  # the other alignment: must differ
    assert not np.allclose(out, plain(q, k, v, top_left))


def test_fully_masked_rows_give_zeros_not_nan():
    q, k, v = RNG.normal(size=(2, 5, 3)), RNG.normal(size=(2, 6, 3)), RNG.normal(size=(2, 6, 4))
    mask = RNG.random((2, 5, 6)) < 0.5
    mask[0, 1] = False
    mask[1] = False  # a whole sequence with nothing to see
    out, _ = ref.flash_attention(q, k, v, mask, block_q=2, block_k=4)
    assert not np.isnan(out).any()
    assert not out[0, 1].any() and not out[1].any()
    np.testing.assert_allclose(out, plain(q, k, v, mask), atol=1e-12)
    # more queries than keys, causal: the first Nq - Nk queries see nothing
    out, _ = ref.flash_attention(q[0], k[0, :3], v[0, :3], causal=True, block_q=2, block_k=2)
    assert not out[:2].any() and out[2:].any()


def test_empty_sequences():
    q, k, v = np.zeros((2, 0, 3)), RNG.normal(size=(2, 4, 3)), RNG.normal(size=(2, 4, 5))
    out, _ = ref.flash_attention(q, k, v)
    assert out.shape == (2, 0, 5)
    out, _ = ref.flash_attention(RNG.normal(size=(2, 3, 3)), k[:, :0], v[:, :0])
    assert out.shape == (2, 3, 5) and not out.any()


def test_float32_stays_float32_and_large_scores_do_not_overflow():
    q = (RNG.normal(size=(8, 4)) * 300).astype(np.float32)
    out, _ = ref.flash_attention(q, q, q, block_q=3, block_k=3)
    assert out.dtype == np.float32 and np.isfinite(out).all()
    np.testing.assert_allclose(out, plain(q.astype(float), q.astype(float), q.astype(float)),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("args,kwargs,error,words", [
    ((np.zeros((3, 4)), np.zeros((5, 3)), np.zeros((5, 2))), {}, ValueError, r"q \(3, 4\) vs k \(5, 3\)"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((6, 2))), {}, ValueError, r"k \(5, 4\) vs v \(6, 2\)"),
    ((np.zeros(4), np.zeros((5, 4)), np.zeros((5, 2))), {}, ValueError, r"shape \(4,\)"),
    ((np.zeros((2, 3, 4)), np.zeros((3, 5, 4)), np.zeros((3, 5, 2))), {}, ValueError, "do not broadcast"),
    ((np.zeros((3, 0)), np.zeros((5, 0)), np.zeros((5, 2))), {}, ValueError, "dk is 0"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2)), np.ones((3, 4), bool)), {}, ValueError,
     r"mask of shape \(3, 4\).*\(3, 5\)"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2)), np.ones((3, 5))), {}, TypeError, "boolean"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))), {"block_q": 0}, ValueError, "block_q"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))), {"block_k": 2.5}, TypeError, "block_k"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))), {"block_k": True}, TypeError, "block_k"),
    ((np.zeros((3, 4)), np.zeros((5, 4)), np.zeros((5, 2))), {"causal": "yes"}, TypeError, "causal"),
    ((np.zeros((3, 4), bool), np.zeros((5, 4)), np.zeros((5, 2))), {}, TypeError, "q must be a numeric"),
])
def test_flash_errors_name_the_shapes(args, kwargs, error, words):
    with pytest.raises(error, match=words):
        ref.flash_attention(*args, **kwargs)


# --- memory ----------------------------------------------------------------

def _peak(fn, *args, **kwargs):
    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _plain_three_lines(q, k, v):
    s = q @ k.T / np.float32(np.sqrt(q.shape[-1]))  # (N, N)
    w = np.exp(s - s.max(axis=-1, keepdims=True))  # (N, N)
    return (w / w.sum(axis=-1, keepdims=True)) @ v


def test_peak_memory_at_4096_is_a_small_fraction_of_the_plain_version():
    # float32 (4 bytes a number) keeps this test light: about 200 MB and a
    # second or two for the plain version
    n, d = 4096, 16
    q = np.random.default_rng(0).normal(size=(n, d)).astype(np.float32)
    plain_peak = _peak(_plain_three_lines, q, q, q)
    flash_peak = _peak(ref.flash_attention, q, q, q, block_q=64, block_k=64)
    ratio = flash_peak / plain_peak
    print(f"N = {n}, d = {d}, float32: plain {plain_peak / 2**20:.1f} MiB, "
          f"tiled {flash_peak / 2**20:.2f} MiB, ratio {ratio:.4f}")
    assert plain_peak > 2 * n * n * 4  # at least two (N, N) float32 arrays
    assert ratio < 0.01
