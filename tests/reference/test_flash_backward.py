"""FlashAttention's backward pass (chapter 17c): `ref.flash_attention_backward`
equals the plain `attention_backward` and PyTorch autograd, on shapes whose
blocks do not divide N, with masks, the causal skip and fully masked rows; its
peak memory stays O(N d) while the plain backward's grows as N^2.

The log-sum-exp the backward pass reads comes from `ref.flash_attention(...,
return_lse=True)`, tested here equal to the plain one. The PyTorch comparisons
are in tests/against/test_flash_backward_torch.py.
"""

import tracemalloc

import numpy as np
import pytest

from attnbook import reference as ref

flash_attention_backward = ref.flash_attention_backward


def log_sum_exp(q, k, keep=None):
    """The plain log-sum-exp of each query's scaled scores (-inf: sees no key)."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    m = s.max(axis=-1)
    safe = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(divide="ignore"):
        return m + np.log(np.exp(s - safe[..., None]).sum(axis=-1))

RNG = np.random.default_rng(1717)
TIGHT = dict(rtol=1e-10, atol=1e-12)


def _full_mask(nq, nk, mask=None, causal=False):
    keep = np.ones((nq, nk), bool)
    if causal:
        keep = ref.causal_mask(nq, nk)
    return keep if mask is None else keep & mask


def _plain(q, k, v, d_out, mask=None, causal=False):
    """o, lse and the plain gradients (fully masked rows: zeros)."""
    keep = _full_mask(q.shape[-2], k.shape[-2], mask, causal)
    o, _ = ref.scaled_dot_product_attention(q, k, v, keep, fully_masked="zeros")
    _, lse = ref.flash_attention(q, k, v, keep, return_lse=True)
    grads = ref.attention_backward(q, k, v, d_out, keep, fully_masked="zeros")
    return o, lse, grads


def _inputs(lead, nq, nk, dk=5, dv=3, rng=RNG):
    q = rng.normal(size=(*lead, nq, dk))
    k = rng.normal(size=(*lead, nk, dk))
    v = rng.normal(size=(*lead, nk, dv))
    g = rng.normal(size=(*lead, nq, dv))
    return q, k, v, g


@pytest.mark.parametrize("nq,nk,bq,bk", [(10, 13, 4, 5), (13, 13, 4, 3), (7, 7, 64, 64),
                                          (1, 9, 2, 4), (17, 11, 5, 7), (9, 9, 1, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_equals_attention_backward(nq, nk, bq, bk, causal):
    q, k, v, g = _inputs((2, 3), nq, nk)
    o, lse, want = _plain(q, k, v, g, causal=causal)
    got = flash_attention_backward(q, k, v, o, lse, g, causal=causal, block_q=bq, block_k=bk)
    for name, w, h in zip(("dq", "dk", "dv"), want, got):
        assert h.shape == w.shape, name
        np.testing.assert_allclose(h, w, **TIGHT, err_msg=name)


def test_with_a_mask_and_fully_masked_rows():
    q, k, v, g = _inputs((2,), 9, 11)
    mask = RNG.random((2, 9, 11)) < 0.6
    mask[:, 3] = False  # query 3 sees nothing, in both sequences
    mask[1, 7] = False  # and query 7 of the second
    o, lse, want = _plain(q, k, v, g, mask)
    assert np.isneginf(lse[:, 3]).all() and np.isneginf(lse[1, 7])
    got = flash_attention_backward(q, k, v, o, lse, g, mask, block_q=4, block_k=3)
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, **TIGHT)
    assert not got[0][:, 3].any() and not got[0][1, 7].any()  # no gradient to those queries


def test_causal_with_more_queries_than_keys_gives_zero_rows():
    # 7 queries, 4 keys, bottom-right: queries 0-2 see no key
    q, k, v, g = _inputs((), 7, 4)
    o, lse, want = _plain(q, k, v, g, causal=True)
    assert np.isneginf(lse[:3]).all() and np.isfinite(lse[3:]).all()
    got = flash_attention_backward(q, k, v, o, lse, g, causal=True, block_q=3, block_k=2)
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, **TIGHT)
    assert not got[0][:3].any()


def test_causal_and_mask_combined_and_broadcast_inputs():
    q, _, _, g = _inputs((2, 3), 8, 8)
    k, v = RNG.normal(size=(1, 3, 8, 5)), RNG.normal(size=(1, 3, 8, 3))  # shared by the batch
    mask = RNG.random((8,)) < 0.8  # one padding row of keys, (Nk,)
    mask[0] = True
    o, lse, want = _plain(q, k, v, g, mask, causal=True)
    got = flash_attention_backward(q, k, v, o, lse, g, mask, causal=True, block_q=3, block_k=5)
    assert got[1].shape == k.shape and got[2].shape == v.shape
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, **TIGHT)


def test_a_wrong_lse_gives_wrong_gradients():
    # the weights are rebuilt from lse: the test could not pass without it
    q, k, v, g = _inputs((), 6, 6)
    o, lse, want = _plain(q, k, v, g)
    got = flash_attention_backward(q, k, v, o, lse + 0.1, g, block_q=4, block_k=4)
    assert not np.allclose(got[2], want[2])


def test_the_causal_skip_is_exact_at_block_edges():
    # blocks that start exactly on a query's position: the skip must not drop them
    for nq, nk, bq, bk in [(8, 8, 4, 4), (8, 8, 3, 4), (5, 12, 2, 7), (12, 12, 4, 3)]:
        q, k, v, g = _inputs((), nq, nk)
        o, lse, want = _plain(q, k, v, g, causal=True)
        got = flash_attention_backward(q, k, v, o, lse, g, causal=True, block_q=bq, block_k=bk)
        for w, h in zip(want, got):
            np.testing.assert_allclose(h, w, **TIGHT)


def test_float32_inputs_stay_float32():
    q, k, v, g = (a.astype(np.float32) for a in _inputs((), 9, 9))
    o, lse, want = _plain(q, k, v, g)
    got = flash_attention_backward(q, k, v, o.astype(np.float32), lse.astype(np.float32), g)
    assert all(h.dtype == np.float32 for h in got)
    for w, h in zip(want, got):
        np.testing.assert_allclose(h, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("change,error,words", [
    (dict(o=np.zeros((4, 3))), ValueError, r"o must have the output's shape"),
    (dict(d_out=np.zeros((5, 2))), ValueError, r"d_out must have the output's shape"),
    (dict(lse=np.zeros((5, 1))), ValueError, r"lse must have one number per query"),
    (dict(lse=np.full(5, np.nan)), ValueError, r"lse contains nan"),
    (dict(k=np.zeros((6, 3))), ValueError, r"same last dimension dk"),
    (dict(v=np.zeros((5, 3))), ValueError, r"same number of positions Nk"),
    (dict(mask=np.ones((5, 6), int)), TypeError, r"mask must be boolean"),
    (dict(mask=np.ones((4, 6), bool)), ValueError, r"does not broadcast"),
    (dict(block_q=0), ValueError, r"block_q must be a positive integer"),
    (dict(block_k=2.0), TypeError, r"block_k must be a positive integer"),
    (dict(causal="yes"), TypeError, r"causal must be True or False"),
])
def test_errors_name_the_shapes(change, error, words):
    args = dict(q=np.zeros((5, 4)), k=np.zeros((6, 4)), v=np.zeros((6, 3)),
                o=np.zeros((5, 3)), lse=np.zeros(5), d_out=np.zeros((5, 3)))
    kwargs = {key: change.pop(key) for key in ("mask", "causal", "block_q", "block_k")
              if key in change}
    args |= change
    with pytest.raises(error, match=words):
        flash_attention_backward(*args.values(), **kwargs)


# --- memory ----------------------------------------------------------------

def _peak(fn, *args, **kwargs):
    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_grows_as_n_d_while_the_plain_backward_grows_as_n_squared():
    d = 16
    flash, plain = [], []
    sizes = (512, 1024, 2048)
    for n in sizes:
        q, k, v, g = (a.astype(np.float32) for a in
                      _inputs((), n, n, d, d, np.random.default_rng(n)))
        o, lse = ref.flash_attention(q, k, v, return_lse=True)
        flash.append(_peak(flash_attention_backward, q, k, v, o, lse, g))
        plain.append(_peak(ref.attention_backward, q, k, v, g))
    # doubling N: the plain peak about quadruples, the tiled peak at most doubles
    for a, b in zip(plain, plain[1:]):
        assert 3.5 < b / a < 4.5
    for a, b in zip(flash, flash[1:]):
        assert b / a < 2.2
    n = sizes[-1]
    assert plain[-1] > 2 * n * n * 4  # at least two (N, N) float32 arrays
    assert flash[-1] < 8 * n * d * 4  # a few (N, d) arrays: dq, dk, dv, D, tiles
    assert flash[-1] < 0.05 * plain[-1]


# --- the forward pass's log-sum-exp ----------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_returns_the_log_sum_exp_on_request(causal):
    q, k, v, _ = _inputs((2,), 9, 6)
    mask = RNG.random((2, 9, 6)) < 0.7
    mask[0, 2] = False  # a query that sees nothing
    out, lse = ref.flash_attention(q, k, v, mask, causal=causal, block_q=4, block_k=4,
                                   return_lse=True)
    keep = _full_mask(9, 6, mask, causal)
    want = log_sum_exp(q, k, keep)
    assert lse.shape == (2, 9) and np.isneginf(lse[0, 2])
    np.testing.assert_allclose(lse, want, **TIGHT)
    same, none = ref.flash_attention(q, k, v, mask, causal=causal, block_q=4, block_k=4)
    assert none is None and np.array_equal(out, same)  # the callers' form is unchanged


def test_return_lse_must_be_a_bool():
    with pytest.raises(TypeError, match="return_lse must be True or False"):
        ref.flash_attention(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros((2, 3)),
                            return_lse="yes")
