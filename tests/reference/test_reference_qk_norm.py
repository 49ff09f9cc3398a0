"""QK-norm, soft-capping and the output gate in NumPy (chapter 20): the answer
key against loops written out here, its properties, and its error messages."""

import numpy as np
import pytest

from attnbook import reference as ref

RNG = np.random.default_rng(20)
D, H, H_KV, HD = 16, 4, 2, 4


def test_soft_cap_values_and_bounds():
    s = np.array([-1000.0, -50.0, -1.0, 0.0, 0.5, 50.0, 1000.0])
    got = ref.soft_cap(s, 50.0)
    np.testing.assert_allclose(got, 50 * np.tanh(s / 50), rtol=0, atol=0)
    assert np.all(np.abs(got) <= 50) and np.abs(got[1:-1]).max() < 50  # tanh(20) rounds to 1
    assert got[3] == 0.0 and abs(got[4] - 0.5) < 1e-4          # slope 1 at 0
    assert abs(got[5] - 50 * np.tanh(1.0)) < 1e-12             # 38.08, not 50
    np.testing.assert_allclose(ref.soft_cap(s, 50.0), -ref.soft_cap(-s, 50.0))
    for bad in (0.0, -3.0, np.inf):
        with pytest.raises(ValueError, match="cap must be a finite number > 0"):
            ref.soft_cap(s, bad)


def test_split_query_gate_is_per_head():
    qg = np.arange(2 * H * 2 * HD, dtype=float).reshape(2, H * 2 * HD)
    q, gate = ref.split_query_gate(qg, H)
    assert q.shape == gate.shape == (2, H * HD)
    for h in range(H):  # head h: columns [2*HD*h, 2*HD*h + HD) then the gate
        np.testing.assert_array_equal(q[:, h * HD:(h + 1) * HD],
                                      qg[:, 2 * HD * h: 2 * HD * h + HD])
        np.testing.assert_array_equal(gate[:, h * HD:(h + 1) * HD],
                                      qg[:, 2 * HD * h + HD: 2 * HD * (h + 1)])
    with pytest.raises(ValueError, match=r"qg must be \(\.\.\., N, H \* 2 \* hd\)"
                                         r" with H = 5, got shape \(2, 32\)"):
        ref.split_query_gate(qg, 5)


def test_gated_output():
    o, g = RNG.normal(size=(2, 5, 6)), RNG.normal(size=(2, 5, 6))
    w_o = RNG.normal(size=(6, 4))
    sig = 1 / (1 + np.exp(-g))
    np.testing.assert_allclose(ref.gated_attention_output(o, g, w_o), (o * sig) @ w_o)
    # a closed gate (logit -> -inf) silences the head's output entirely
    shut = ref.gated_attention_output(o, np.full(o.shape, -800.0), w_o)
    np.testing.assert_array_equal(shut, 0.0)
    with pytest.raises(ValueError, match=r"gate \(2, 5, 5\) must have the shape"):
        ref.gated_attention_output(o, g[..., :5], w_o)
    with pytest.raises(ValueError, match=r"w_o must be \(H \* hd, D\) with H \* hd = 6"):
        ref.gated_attention_output(o, g, w_o.T)


def _weights(gated=False, per_head=True):
    w = dict(w_q=RNG.normal(size=(D, H * HD * (2 if gated else 1))),
             w_k=RNG.normal(size=(D, H_KV * HD)), w_v=RNG.normal(size=(D, H_KV * HD)),
             w_o=RNG.normal(size=(H * HD, D)))
    w["q_norm"] = RNG.uniform(0.5, 1.5, size=HD if per_head else H * HD)
    w["k_norm"] = RNG.uniform(0.5, 1.5, size=HD if per_head else H_KV * HD)
    return w


def _loops(x, w, per_head, gated, cap):
    """One head at a time, one query at a time."""
    n = x.shape[0]
    qa = x @ w["w_q"]
    gate = None
    if gated:
        qa = qa.reshape(n, H, 2 * HD)
        qa, gate = qa[..., :HD].reshape(n, -1), qa[..., HD:].reshape(n, -1)
    ka, va = x @ w["w_k"], x @ w["w_v"]

    def norm(t, g):
        return t / np.sqrt(np.mean(t * t) + 1e-6) * g
    if not per_head:
        qa = np.stack([norm(r, w["q_norm"]) for r in qa])
        ka = np.stack([norm(r, w["k_norm"]) for r in ka])
    out = np.zeros((n, H * HD))
    for h in range(H):
        kv = h // (H // H_KV)
        q, k = qa[:, h * HD:(h + 1) * HD], ka[:, kv * HD:(kv + 1) * HD]
        v = va[:, kv * HD:(kv + 1) * HD]
        if per_head:
            q = np.stack([norm(r, w["q_norm"]) for r in q])
            k = np.stack([norm(r, w["k_norm"]) for r in k])
        q, k = ref.rope(q, np.arange(n)), ref.rope(k, np.arange(n))
        for i in range(n):
            s = k[:i + 1] @ q[i] / np.sqrt(HD)
            if cap is not None:
                s = cap * np.tanh(s / cap)
            p = np.exp(s - s.max())
            out[i, h * HD:(h + 1) * HD] = (p / p.sum()) @ v[:i + 1]
    if gated:
        out = out / (1 + np.exp(-gate))
    return out @ w["w_o"]


@pytest.mark.parametrize("per_head,gated,cap", [(True, False, None), (False, False, None),
                                                 (True, True, None), (True, False, 2.0)])
def test_layer_equals_loops(per_head, gated, cap):
    w = _weights(gated, per_head)
    x = RNG.normal(size=(6, D))
    got, weights = ref.qk_norm_attention(x, n_heads=H, n_kv_heads=H_KV, per_head=per_head,
                                         gated=gated, cap=cap, **w)
    np.testing.assert_allclose(got, _loops(x, w, per_head, gated, cap), rtol=1e-10, atol=1e-10)
    assert weights.shape == (H, 6, 6)
    np.testing.assert_allclose(weights.sum(-1), 1.0)
    # batched: each sequence on its own
    xb = RNG.normal(size=(3, 6, D))
    gotb, _ = ref.qk_norm_attention(xb, n_heads=H, n_kv_heads=H_KV, per_head=per_head,
                                    gated=gated, cap=cap, **w)
    for b in range(3):
        np.testing.assert_allclose(gotb[b], _loops(xb[b], w, per_head, gated, cap),
                                   rtol=1e-10, atol=1e-10)


def test_scores_are_bounded_by_the_norm_weights():
    """After QK-norm (eps 0 aside) every head's q and k have RMS 1 times the
    weights, so |q.k| / sqrt(hd) <= sqrt(hd) max|g_q| max|g_k|, however large
    the input: the property that keeps scores from growing."""
    w = _weights()
    x = 1e3 * RNG.normal(size=(5, D))
    _, weights = ref.qk_norm_attention(x, n_heads=H, n_kv_heads=H_KV, **w)
    bound = np.sqrt(HD) * np.abs(w["q_norm"]).max() * np.abs(w["k_norm"]).max()
    s = np.log(weights[..., 1, :2])  # two keys of query 1: their score gap
    assert np.all(np.abs(s[..., 0] - s[..., 1]) <= 2 * bound + 1e-9)


def test_errors_name_the_shapes():
    w = _weights()
    x = RNG.normal(size=(5, D))
    with pytest.raises(ValueError, match=r"q_norm must have shape \(4,\) \(hd = 4"):
        ref.qk_norm_attention(x, n_heads=H, n_kv_heads=H_KV, **(w | {"q_norm": np.ones(16)}))
    with pytest.raises(ValueError, match=r"k_norm must have shape \(8,\)"):
        ref.qk_norm_attention(x, n_heads=H, n_kv_heads=H_KV, per_head=False,
                              **(w | {"q_norm": np.ones(16)}))
    with pytest.raises(ValueError, match=r"w_q must be \(D, H_q \* 2 \* hd\) with D = 16"):
        ref.qk_norm_attention(x, n_heads=5, n_kv_heads=1, gated=True, **w)
    with pytest.raises(ValueError, match="H_q = 4 must be a multiple of H_kv = 3"):
        ref.qk_norm_attention(x, n_heads=H, n_kv_heads=3, **w)
