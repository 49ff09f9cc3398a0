"""Multi-head latent attention in NumPy: the naive and the absorbed path agree,
the latent cache reproduces the full computation, and bad weights are named."""

import numpy as np
import pytest

from attnbook import reference as ref

RNG = np.random.default_rng(16)


def _w(seed=0, **kw):
    dims = dict(d=16, n_heads=4, r_q=12, r_kv=8, d_nope=6, d_rope=4, d_v=5) | kw
    return ref.MLAWeights.random(np.random.default_rng(seed), **dims)


def test_rms_norm():
    x = RNG.normal(size=(3, 5))
    g = RNG.normal(size=5)
    y = ref.rms_norm(x, g, eps=0.0)
    np.testing.assert_allclose(np.sqrt(np.mean((y / g) ** 2, axis=-1)), 1.0)
    with pytest.raises(ValueError, match=r"weight \(4,\).*x \(3, 5\)"):
        ref.rms_norm(x, np.ones(4))


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_naive_and_absorbed_paths_agree(lead):
    w = _w()
    x = RNG.normal(size=(*lead, 7, 16))
    a, (c, kr) = ref.mla_attention(x, w, mask=ref.causal_mask(7))
    b, _ = ref.mla_attention(x, w, mask=ref.causal_mask(7), absorbed=True)
    assert a.shape == x.shape and c.shape == (*lead, 7, 8) and kr.shape == (*lead, 7, 4)
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_without_a_mask_the_paths_agree_and_differ_from_causal():
    w = _w(1)
    x = RNG.normal(size=(5, 16))
    a, _ = ref.mla_attention(x, w)
    b, _ = ref.mla_attention(x, w, absorbed=True)
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    assert not np.allclose(a, ref.mla_attention(x, w, mask=ref.causal_mask(5))[0])


@pytest.mark.parametrize("absorbed", [False, True])
def test_decoding_and_chunked_prefill_with_the_latent_cache(absorbed):
    w = _w(2)
    x = RNG.normal(size=(2, 9, 16))
    full, _ = ref.mla_attention(x, w, mask=ref.causal_mask(9))
    # prefill 4 tokens, then a chunk of 3, then 2 tokens one by one
    o1, cache = ref.mla_attention(x[:, :4], w, mask=ref.causal_mask(4), absorbed=absorbed)
    o2, cache = ref.mla_attention(x[:, 4:7], w, cache=cache, mask=ref.causal_mask(3, 7),
                                  absorbed=absorbed)
    outs = [o1, o2]
    for t in (7, 8):
        o, cache = ref.mla_attention(x[:, t:t + 1], w, cache=cache, absorbed=absorbed)
        outs.append(o)
    np.testing.assert_allclose(np.concatenate(outs, axis=1), full, rtol=1e-10, atol=1e-12)
    # without the bottom-right mask the chunk would see its own future
    bad, _ = ref.mla_attention(x[:, 4:7], w, cache=(cache[0][:, :4], cache[1][:, :4]),
                               absorbed=absorbed)
    assert not np.allclose(bad, full[:, 4:7])


def test_the_cache_holds_the_latent_not_keys_and_values():
    w = _w(3, d=64, n_heads=8, r_kv=8, d_nope=16, d_rope=4, d_v=16)
    _, (c, kr) = ref.mla_attention(RNG.normal(size=(10, 64)), w)
    per_token = c.shape[-1] + kr.shape[-1]
    mha_per_token = 2 * 8 * 16
    assert per_token == 12 and per_token < mha_per_token


def test_bad_weights_and_inputs_are_named():
    w = _w()
    with pytest.raises(ValueError, match=r"w_o must have shape \(20, 16\)"):
        ref.MLAWeights(w.w_dq, w.q_norm, w.w_uq, w.w_dkv, w.kv_norm, w.w_ukv,
                       np.ones((16, 16)), 4, 6, 4, 5)
    with pytest.raises(ValueError, match=r"D = 16, got \(3, 8\)"):
        ref.mla_attention(np.ones((3, 8)), w)
    with pytest.raises(ValueError, match=r"query \(.*\) .*every key masked"):
        ref.mla_attention(np.ones((3, 16)), w, mask=np.zeros((3, 3), bool))
    out, _ = ref.mla_attention(np.ones((3, 16)), w, mask=np.zeros((3, 3), bool),
                               fully_masked="zeros")
    assert (out == 0).all()
