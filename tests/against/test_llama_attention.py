"""reference.llama_attention in NumPy: equal to the same layer written out
with the answer key's pieces, causal, relative in position, and clear errors
for bad input. (Against transformers: test_llm_layer_vs_transformers.py.)"""

import numpy as np
import pytest

from attnbook import reference as ref

RNG = np.random.default_rng(1515)


def _weights(d, h_q, h_kv, hd):
    return {"w_q": RNG.normal(size=(d, h_q * hd)),
            "w_k": RNG.normal(size=(d, h_kv * hd)),
            "w_v": RNG.normal(size=(d, h_kv * hd)),
            "w_o": RNG.normal(size=(h_q * hd, d))}


def _by_hand(x, w, h_q, h_kv, base=10000.0, b=None, interleaved=False):
    """One head at a time, KV head h // group, with loops."""
    n, d = x.shape
    hd = w["w_q"].shape[1] // h_q
    b = b or {}
    q = x @ w["w_q"] + b.get("b_q", 0)
    k = x @ w["w_k"] + b.get("b_k", 0)
    v = x @ w["w_v"] + b.get("b_v", 0)
    heads = []
    for h in range(h_q):
        g = h // (h_q // h_kv)
        qh = ref.rope(q[:, h * hd:(h + 1) * hd], np.arange(n), base=base,
                      interleaved=interleaved)
        kh = ref.rope(k[:, g * hd:(g + 1) * hd], np.arange(n), base=base,
                      interleaved=interleaved)
        vh = v[:, g * hd:(g + 1) * hd]
        heads.append(ref.scaled_dot_product_attention(
            qh, kh, vh, ref.causal_mask(n))[0])
    return np.concatenate(heads, axis=-1) @ w["w_o"]


@pytest.mark.parametrize("h_q,h_kv", [(4, 2), (4, 1), (3, 3), (6, 2)])
def test_equals_the_layer_by_hand(h_q, h_kv):
    w = _weights(12, h_q, h_kv, 4)
    x = RNG.normal(size=(5, 12))
    out = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_kv, **w)
    np.testing.assert_allclose(out, _by_hand(x, w, h_q, h_kv), rtol=1e-10,
                               atol=1e-10)
    b = {"b_q": RNG.normal(size=h_q * 4), "b_k": RNG.normal(size=h_kv * 4),
         "b_v": RNG.normal(size=h_kv * 4)}
    out_b = ref.llama_attention(x, n_heads=h_q, n_kv_heads=h_kv, base=500.0,
                                **w, **b)
    np.testing.assert_allclose(out_b, _by_hand(x, w, h_q, h_kv, 500.0, b),
                               rtol=1e-10, atol=1e-10)


def test_interleaved_rotates_queries_and_keys_alike():
    """Catches the mutation of issue 33 that survived: llama_attention(
    interleaved=True) applying the other pairing (split halves) to the keys
    than to the queries (or the reverse). The layer must equal the one
    written out with interleaved RoPE on both, and stay relative in
    position, which a query/key pairing mismatch breaks."""
    w = _weights(12, 4, 2, 4)
    x = RNG.normal(size=(6, 12))
    out = ref.llama_attention(x, n_heads=4, n_kv_heads=2, interleaved=True, **w)
    np.testing.assert_allclose(out, _by_hand(x, w, 4, 2, interleaved=True),
                               rtol=1e-10, atol=1e-10)
    shifted = ref.llama_attention(x, n_heads=4, n_kv_heads=2, interleaved=True,
                                  positions=np.arange(100, 106), **w)
    np.testing.assert_allclose(shifted, out, rtol=1e-9, atol=1e-9)
    split = ref.llama_attention(x, n_heads=4, n_kv_heads=2, **w)
    assert np.abs(split - out).max() > 1e-3   # the pairing matters here


def test_batch_equals_items_one_by_one():
    w = _weights(8, 4, 2, 2)
    x = RNG.normal(size=(3, 4, 8))
    out = ref.llama_attention(x, n_heads=4, n_kv_heads=2, **w)
    for i in range(3):
        np.testing.assert_allclose(
            out[i], ref.llama_attention(x[i], n_heads=4, n_kv_heads=2, **w),
            rtol=1e-12, atol=1e-12)


def test_causal_and_relative():
    w = _weights(8, 2, 1, 4)
    x = RNG.normal(size=(6, 8))
    out = ref.llama_attention(x, n_heads=2, n_kv_heads=1, **w)
    changed = x.copy()
    changed[-1] += 1.0
    again = ref.llama_attention(changed, n_heads=2, n_kv_heads=1, **w)
    assert np.array_equal(out[:-1], again[:-1])  # the future cannot leak
    shifted = ref.llama_attention(x, n_heads=2, n_kv_heads=1,
                                  positions=np.arange(100, 106), **w)
    np.testing.assert_allclose(shifted, out, rtol=1e-9, atol=1e-9)


def test_extra_mask_is_combined_with_the_causal_mask():
    w = _weights(8, 2, 1, 4)
    x = RNG.normal(size=(2, 4, 8))
    pad = ref.padding_mask([4, 2], 4)  # (B, 1, N)
    out = ref.llama_attention(x, n_heads=2, n_kv_heads=1, mask=pad, **w)
    short = ref.llama_attention(x[1, :2], n_heads=2, n_kv_heads=1, **w)
    np.testing.assert_allclose(out[1, :2], short, rtol=1e-12, atol=1e-12)


def test_empty_sequence():
    w = _weights(8, 2, 1, 4)
    out = ref.llama_attention(np.zeros((0, 8)), n_heads=2, n_kv_heads=1, **w)
    assert out.shape == (0, 8)


def test_bad_input_names_the_shapes():
    w = _weights(8, 4, 2, 2)
    x = RNG.normal(size=(3, 8))
    with pytest.raises(ValueError, match=r"H_q = 4.*H_kv = 3"):
        ref.llama_attention(x, n_heads=4, n_kv_heads=3, **w)
    with pytest.raises(ValueError, match=r"w_q must be \(D, H_q \* hd\)"):
        ref.llama_attention(x[:, :6], n_heads=4, n_kv_heads=2, **w)
    bad = dict(w, w_k=w["w_k"][:, :2])
    with pytest.raises(ValueError, match=r"w_k must have shape \(8, 4\)"):
        ref.llama_attention(x, n_heads=4, n_kv_heads=2, **bad)
    with pytest.raises(ValueError, match=r"b_k must have shape \(4,\)"):
        ref.llama_attention(x, n_heads=4, n_kv_heads=2, b_k=np.ones(8), **w)
    with pytest.raises(ValueError, match=r"x must be \(\.\.\., N, D\)"):
        ref.llama_attention(np.ones(8), n_heads=4, n_kv_heads=2, **w)


@pytest.mark.parametrize("module", ["attnbook.reference.gqa", "attnbook.check.gqa",
                                    "attnbook.check.rope", "attnbook.check.kv_cache"])
def test_part_modules_import_on_their_own(module):
    """Imported first, before attnbook.reference / attnbook.check."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", f"import {module}"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
