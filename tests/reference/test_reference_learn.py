"""The answer key of "Attention that learns" (NumPy only): attention_backward,
cross_entropy, and the tiny model's helpers (reversal_task, Adam).

The gradients are checked against central finite differences of the forward
pass, and the check is shown to reject gradients with a convention flipped.
The comparison with PyTorch autograd is in test_learn_vs_torch.py.
"""

import numpy as np
import pytest

from attnbook import reference as ref
from attnbook.tiny_model import Adam, reversal_task

RNG = np.random.default_rng(160)


def _loss(q, k, v, g, mask, fully_masked):
    out, _ = ref.scaled_dot_product_attention(q, k, v, mask, fully_masked=fully_masked)
    return (out * g).sum()


def _finite_differences(q, k, v, g, mask=None, fully_masked="raise", h=1e-6):
    grads = []
    for which in range(3):
        arrays = [q, k, v]
        x = arrays[which]
        d = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            up, down = x.copy(), x.copy()
            up[idx] += h
            down[idx] -= h
            a_up, a_down = list(arrays), list(arrays)
            a_up[which], a_down[which] = up, down
            d[idx] = (_loss(*a_up, g, mask, fully_masked) - _loss(*a_down, g, mask, fully_masked)) / (2 * h)
        grads.append(d)
    return grads


SHAPES = [
    # q, k, v shapes (d_out follows): Nq != Nk, dk != dv, leading axes that broadcast
    ((2, 4), (3, 4), (3, 5)),
    ((3, 2), (3, 2), (3, 2)),
    ((2, 3, 4), (2, 5, 4), (2, 5, 2)),
    ((2, 1, 3, 2), (1, 3, 4, 2), (3, 4, 3)),  # q broadcast over heads, k over batch, v without batch
    ((1, 2), (4, 2), (4, 1)),
]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_backward_equals_finite_differences(shapes, masked):
    q, k, v = (RNG.normal(size=s) for s in shapes)
    out, _ = ref.scaled_dot_product_attention(q, k, v)
    g = RNG.normal(size=out.shape)
    mask = None
    if masked:
        mask = RNG.random(out.shape[:-1] + (k.shape[-2],)) < 0.6
        mask[..., 0] = True  # no fully masked row here
    got = ref.attention_backward(q, k, v, g, mask)
    for name, a, b, x in zip("qkv", got, _finite_differences(q, k, v, g, mask), (q, k, v)):
        assert a.shape == x.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8, err_msg=name)


def test_fully_masked_rows_zeros_contribute_no_gradient():
    q, k, v = RNG.normal(size=(2, 4, 3)), RNG.normal(size=(2, 5, 3)), RNG.normal(size=(2, 5, 2))
    g = RNG.normal(size=(2, 4, 2))
    mask = RNG.random((2, 4, 5)) < 0.5
    mask[..., 0] = True
    mask[0, 1] = False  # query 1 of sequence 0 sees nothing
    mask[1, 3] = False
    dq, dk, dv = ref.attention_backward(q, k, v, g, mask, fully_masked="zeros")
    assert np.all(dq[0, 1] == 0) and np.all(dq[1, 3] == 0)
    # the same as if those rows' upstream gradient were zero
    g0 = g.copy()
    g0[0, 1] = 0
    g0[1, 3] = 0
    same = ref.attention_backward(q, k, v, g0, mask, fully_masked="zeros")
    for a, b in zip((dq, dk, dv), same):
        np.testing.assert_array_equal(a, b)
    # and the finite differences of the forward with fully_masked="zeros" agree
    for a, b in zip((dq, dk, dv), _finite_differences(q, k, v, g, mask, "zeros")):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_fully_masked_rows_raise_by_default():
    q, k, v = RNG.normal(size=(3, 2)), RNG.normal(size=(4, 2)), RNG.normal(size=(4, 2))
    mask = np.ones((3, 4), bool)
    mask[2] = False
    with pytest.raises(ValueError, match="every key masked"):
        ref.attention_backward(q, k, v, np.ones((3, 2)), mask)


def test_hidden_key_gets_no_gradient():
    q, k, v = RNG.normal(size=(3, 4)), RNG.normal(size=(5, 4)), RNG.normal(size=(5, 2))
    mask = np.ones((3, 5), bool)
    mask[:, 2] = False  # key 2 hidden from every query (padding)
    _, dk, dv = ref.attention_backward(q, k, v, RNG.normal(size=(3, 2)), mask)
    assert np.all(dk[2] == 0) and np.all(dv[2] == 0)
    assert np.any(dk[1] != 0)


def test_key_gradients_sum_to_zero():
    q, k, v = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 6, 4)), RNG.normal(size=(2, 6, 3))
    _, dk, _ = ref.attention_backward(q, k, v, RNG.normal(size=(2, 3, 3)))
    np.testing.assert_allclose(dk.sum(axis=-2), 0, atol=1e-12)


def test_broadcast_input_gets_the_summed_gradient():
    q = RNG.normal(size=(2, 3, 4, 5))
    k_shared = RNG.normal(size=(1, 1, 6, 5))
    v = RNG.normal(size=(2, 3, 6, 2))
    g = RNG.normal(size=(2, 3, 4, 2))
    _, dk, _ = ref.attention_backward(q, k_shared, v, g)
    _, dk_full, _ = ref.attention_backward(q, np.broadcast_to(k_shared, (2, 3, 6, 5)), v, g)
    assert dk.shape == k_shared.shape
    np.testing.assert_allclose(dk[0, 0], dk_full.sum(axis=(0, 1)))


def test_d_out_of_the_wrong_shape_is_named():
    q, k, v = RNG.normal(size=(2, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=(4, 5))
    with pytest.raises(ValueError, match=r"\(2, 5\).*got \(2, 3\)"):
        ref.attention_backward(q, k, v, np.ones((2, 3)))


def test_bad_inputs_are_rejected_like_the_forward():
    q, k, v = RNG.normal(size=(2, 3)), RNG.normal(size=(4, 2)), RNG.normal(size=(4, 5))
    with pytest.raises(ValueError, match="same last dimension"):
        ref.attention_backward(q, k, v, np.ones((2, 5)))
    with pytest.raises(TypeError, match="boolean"):
        ref.attention_backward(q, q, q, np.ones((2, 3)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="fully_masked"):
        ref.attention_backward(q, q, q, np.ones((2, 3)), fully_masked="nan")


def test_empty_sequences():
    q0, k, v = np.zeros((0, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=(4, 2))
    dq, dk, dv = ref.attention_backward(q0, k, v, np.zeros((0, 2)))
    assert dq.shape == (0, 3) and np.all(dk == 0) and np.all(dv == 0)
    q, k0, v0 = RNG.normal(size=(2, 3)), np.zeros((0, 3)), np.zeros((0, 2))
    dq, dk, dv = ref.attention_backward(q, k0, v0, np.ones((2, 2)), fully_masked="zeros")
    assert dq.shape == (2, 3) and np.all(dq == 0) and dk.shape == (0, 3) and dv.shape == (0, 2)
    with pytest.raises(ValueError, match="every key masked"):
        ref.attention_backward(q, k0, v0, np.ones((2, 2)))


# --- a gradient check that cannot pass by accident -------------------------------


def _wrong_backward(q, k, v, g, flip):
    c = 1 / np.sqrt(q.shape[-1])
    _, a = ref.scaled_dot_product_attention(q, k, v)
    da = g @ np.swapaxes(v, -2, -1)
    axis = -2 if flip == "rowsum axis" else -1
    ds = a * (da - (da * a).sum(axis=axis, keepdims=True))
    if flip == "no rowsum":
        ds = a * da
    if flip == "no scale":
        c = 1.0
    dq = ds @ k * c
    dk = (ds if flip == "dk without transpose" else np.swapaxes(ds, -2, -1)) @ q * c
    dv = (a if flip == "dv without transpose" else np.swapaxes(a, -2, -1)) @ g
    return dq, dk, dv


@pytest.mark.parametrize("flip", ["no rowsum", "rowsum axis", "no scale", "dk without transpose",
                                  "dv without transpose"])
def test_finite_differences_reject_a_flipped_convention(flip):
    q, k, v = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))  # square
    g = RNG.normal(size=(4, 3))
    fd = _finite_differences(q, k, v, g)
    right = ref.attention_backward(q, k, v, g)
    wrong = _wrong_backward(q, k, v, g, flip)
    assert all(np.allclose(a, b, atol=1e-8) for a, b in zip(right, fd))
    assert not all(np.allclose(a, b, atol=1e-6) for a, b in zip(wrong, fd))


# --- cross-entropy -------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 6), (1, 1)])
def test_cross_entropy_gradient_equals_finite_differences(shape):
    z = RNG.normal(size=shape)
    t = RNG.integers(0, shape[-1], size=shape[:-1])
    loss, d = ref.cross_entropy(z, t)
    p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
    assert np.isclose(loss, -np.log(np.take_along_axis(p, t[..., None], -1)).mean())
    fd = np.zeros_like(z)
    for idx in np.ndindex(z.shape):
        up, down = z.copy(), z.copy()
        up[idx] += 1e-6
        down[idx] -= 1e-6
        fd[idx] = (ref.cross_entropy(up, t)[0] - ref.cross_entropy(down, t)[0]) / 2e-6
    np.testing.assert_allclose(d, fd, atol=1e-8)


def test_cross_entropy_large_logits_and_limits():
    loss, d = ref.cross_entropy(np.array([[1000.0, 0.0, -1000.0]]), np.array([0]))
    assert loss == 0.0 and np.all(np.isfinite(d))
    loss, _ = ref.cross_entropy(np.zeros((3, 8)), np.array([1, 2, 3]))
    assert np.isclose(loss, np.log(8))  # uniform guess: log V


def test_cross_entropy_bad_inputs():
    z = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"targets must have the shape.*\(2,\)"):
        ref.cross_entropy(z, np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="integer"):
        ref.cross_entropy(z, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="0 .. 2"):
        ref.cross_entropy(z, np.array([0, 3]))
    with pytest.raises(ValueError, match="no positions"):
        ref.cross_entropy(np.zeros((0, 3)), np.zeros(0, dtype=int))


# --- tiny_model helpers ---------------------------------------------------------


def test_reversal_task_is_disjoint_and_reversed():
    (tx, ty), (vx, vy) = reversal_task(np.random.default_rng(0), 60, 20, 4, 3)  # of 81
    assert tx.shape == (60, 4) and vx.shape == (20, 4)
    np.testing.assert_array_equal(ty, tx[:, ::-1])
    np.testing.assert_array_equal(vy, vx[:, ::-1])
    train = {tuple(r) for r in tx.tolist()}
    assert not any(tuple(r) in train for r in vx.tolist())
    assert len({tuple(r) for r in vx.tolist()}) == 20  # held-out sequences distinct
    with pytest.raises(ValueError, match="too many"):
        reversal_task(np.random.default_rng(0), 10, 50, 2, 3)  # 9 sequences in all
    with pytest.raises(ValueError, match="too many"):
        reversal_task(np.random.default_rng(0), 300, 30, 4, 3)  # 300 draws cover most of 81


def test_adam_first_step_and_convergence():
    p = {"w": np.array([1.0, -2.0])}
    g = {"w": np.array([0.5, -4.0])}
    Adam(p, lr=0.1).step(p, g)
    # the first step is lr * sign(g) (m_hat = g, v_hat = g^2), up to eps
    np.testing.assert_allclose(p["w"], [0.9, -1.9], rtol=1e-6)
    q = {"x": np.array([3.0, -1.0])}
    opt = Adam(q, lr=0.05)
    for _ in range(500):
        opt.step(q, {"x": 2 * q["x"]})  # minimise |x|^2
    assert np.abs(q["x"]).max() < 0.05
    with pytest.raises(ValueError, match="same names"):
        opt.step(q, {"y": np.zeros(2)})
    with pytest.raises(ValueError, match="shape"):
        opt.step(q, {"x": np.zeros(3)})


# --- self_attention_backward (chapter 11, third exercise) ---

def test_self_attention_backward_equals_finite_differences():
    x = RNG.normal(size=(2, 3, 4))
    w_q, w_k, w_v = RNG.normal(size=(4, 2)), RNG.normal(size=(4, 2)), RNG.normal(size=(4, 3))
    g = RNG.normal(size=(2, 3, 3))

    def loss(x, w_q, w_k, w_v):
        out, _ = ref.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
        return (out * g).sum()

    args = [x, w_q, w_k, w_v]
    grads = ref.self_attention_backward(*args, g)
    for i, (a, grad) in enumerate(zip(args, grads)):
        assert grad.shape == a.shape
        fd = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            up = [b.copy() for b in args]
            down = [b.copy() for b in args]
            up[i][idx] += 1e-6
            down[i][idx] -= 1e-6
            fd[idx] = (loss(*up) - loss(*down)) / 2e-6
        assert np.allclose(grad, fd, atol=1e-7), i


def test_self_attention_backward_bad_shapes_are_named():
    x = RNG.normal(size=(3, 5))
    w, w_v, g = RNG.normal(size=(5, 2)), RNG.normal(size=(5, 3)), RNG.normal(size=(3, 3))
    with pytest.raises(ValueError, match=r"w_q must be \(D, width\) with D = 5.*\(4, 2\)"):
        ref.self_attention_backward(x, RNG.normal(size=(4, 2)), w, w_v, g)
    with pytest.raises(ValueError, match=r"w_q and w_k must have the same shape"):
        ref.self_attention_backward(x, w, RNG.normal(size=(5, 3)), w_v, g)
    with pytest.raises(ValueError, match=r"d_out must have the output's shape \(3, 3\)"):
        ref.self_attention_backward(x, w, w, w_v, g[:, :2])
    with pytest.raises(ValueError, match=r"x must be \(\.\.\., N, D\)"):
        ref.self_attention_backward(x[0], w, w, w_v, g)
