"""attention_backward, self_attention_backward and cross_entropy against PyTorch
autograd (float64).

Skipped, with the reason, when torch is missing (`make torch` installs it).
Two references: torch's own scaled_dot_product_attention (boolean mask, True
= may attend) differentiated by autograd, and, for fully masked rows under
fully_masked="zeros", the same computation written out in torch with those
rows set to zero. Each comparison is also run with one convention flipped (the
scale forgotten, dA transposed, the rowsum over the wrong axis, dK without
its transpose) to show that it would catch the mistake.
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", F="torch.nn.functional")


RNG = np.random.default_rng(161)


def _leaf(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64, requires_grad=True)


def _torch_grads(q, k, v, g, mask=None, *, zeros_rows=False):
    """dq, dk, dv by autograd: sdpa, or (zeros_rows) attention with fully masked rows set to 0."""
    tq, tk, tv = _leaf(q), _leaf(k), _leaf(v)
    tm = None if mask is None else torch.tensor(np.asarray(mask))
    if zeros_rows:
        scores = tq @ tk.transpose(-2, -1) / np.sqrt(q.shape[-1])
        keep = torch.broadcast_to(tm, scores.shape)
        empty = ~keep.any(dim=-1, keepdim=True)
        scores = torch.where(keep, scores, torch.tensor(-torch.inf, dtype=torch.float64))
        scores = torch.where(empty, torch.zeros_like(scores), scores)  # no 0/0 on the way
        weights = torch.where(empty, torch.zeros_like(scores), torch.softmax(scores, dim=-1))
        out = weights @ tv
    else:
        out = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm)
    (out * torch.tensor(g)).sum().backward()
    return tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


def _agree(ours, theirs):
    return all(a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-11)
               for a, b in zip(ours, theirs))


CASES = [
    # q, k, v shapes: Nq != Nk, dk != dv, batch and head axes, broadcasting
    ((3, 4), (5, 4), (5, 2)),
    ((2, 6, 8), (2, 6, 8), (2, 6, 8)),
    ((2, 3, 4, 5), (2, 3, 7, 5), (2, 3, 7, 3)),
    ((2, 1, 4, 5), (1, 3, 6, 5), (1, 3, 6, 2)),
]


@pytest.mark.parametrize("shapes", CASES, ids=str)
@pytest.mark.parametrize("mask_kind", ["none", "random", "causal"])
def test_attention_backward_equals_torch_autograd(shapes, mask_kind):
    q, k, v = (RNG.normal(size=s) for s in shapes)
    out, _ = ref.scaled_dot_product_attention(q, k, v)
    g = RNG.normal(size=out.shape)
    n_q, n_k = q.shape[-2], k.shape[-2]
    mask = None
    if mask_kind == "random":
        mask = RNG.random(out.shape[:-1] + (n_k,)) < 0.5
        mask[..., -1] = True  # every query sees at least one key
    elif mask_kind == "causal":
        mask = ref.causal_mask(n_q, n_k)  # bottom-right: every query sees a key when n_q <= n_k
        if n_q > n_k:
            pytest.skip("a causal mask with more queries than keys has fully masked rows")
    ours = ref.attention_backward(q, k, v, g, mask)
    assert _agree(ours, _torch_grads(q, k, v, g, mask))


@pytest.mark.parametrize("shapes", CASES[:3], ids=str)
def test_fully_masked_rows_zeros_equal_torch_with_rows_zeroed(shapes):
    q, k, v = (RNG.normal(size=s) for s in shapes)
    out, _ = ref.scaled_dot_product_attention(q, k, v)
    g = RNG.normal(size=out.shape)
    mask = RNG.random(out.shape[:-1] + (k.shape[-2],)) < 0.5
    mask[..., 0] = True
    mask[..., 1, :] = False  # query 1 of every sequence and head sees nothing
    ours = ref.attention_backward(q, k, v, g, mask, fully_masked="zeros")
    theirs = _torch_grads(q, k, v, g, mask, zeros_rows=True)
    assert _agree(ours, theirs)
    assert np.all(ours[0][..., 1, :] == 0)
    # the written-out torch reference is itself sdpa where no row is fully masked
    mask[..., 1, 0] = True
    assert _agree(_torch_grads(q, k, v, g, mask, zeros_rows=True), _torch_grads(q, k, v, g, mask))


def _flipped(q, k, v, g, flip):
    """Gradients with one convention flipped (square shapes, so every variant runs)."""
    c = 1 / np.sqrt(q.shape[-1])
    _, a = ref.scaled_dot_product_attention(q, k, v)
    da = g @ np.swapaxes(v, -2, -1)
    if flip == "dA transposed":
        da = np.swapaxes(da, -2, -1)
    axis = -2 if flip == "rowsum over queries" else -1
    ds = a * (da - (da * a).sum(axis=axis, keepdims=True))
    if flip == "scale forgotten":
        c = 1.0
    dq = ds @ k * c
    dk = (ds if flip == "dK without transpose" else np.swapaxes(ds, -2, -1)) @ q * c
    return dq, dk, np.swapaxes(a, -2, -1) @ g


@pytest.mark.parametrize("flip", ["scale forgotten", "dA transposed", "rowsum over queries",
                                  "dK without transpose"])
def test_a_flipped_convention_does_not_match_torch(flip):
    q, k, v, g = (RNG.normal(size=(2, 5, 4)) for _ in range(4))
    theirs = _torch_grads(q, k, v, g)
    assert _agree(ref.attention_backward(q, k, v, g), theirs)
    assert _agree(_flipped(q, k, v, g, "none"), theirs)  # the flip helper is right when unflipped
    assert not _agree(_flipped(q, k, v, g, flip), theirs)


@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 6)])
def test_cross_entropy_equals_torch(shape):
    z = RNG.normal(size=shape) * 3
    t = RNG.integers(0, shape[-1], size=shape[:-1])
    loss, d = ref.cross_entropy(z, t)
    tz = _leaf(z)
    tl = F.cross_entropy(tz.reshape(-1, shape[-1]), torch.tensor(t.reshape(-1)))
    tl.backward()
    assert np.isclose(loss, tl.item(), rtol=1e-12)
    np.testing.assert_allclose(d, tz.grad.numpy(), rtol=1e-10, atol=1e-13)
    assert not np.allclose(d * t.size, tz.grad.numpy())  # a sum instead of a mean would not match


# --- self_attention_backward (chapter 11, third exercise) ---

def _torch_self_grads(x, w_q, w_k, w_v, g):
    tx, tq, tk, tv = (_leaf(a) for a in (x, w_q, w_k, w_v))
    out = F.scaled_dot_product_attention(tx @ tq, tx @ tk, tx @ tv)
    (out * torch.tensor(g)).sum().backward()
    return tx.grad.numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


def _self_case(lead, n, d_model, d_k, d_v):
    x = RNG.normal(size=lead + (n, d_model))
    w = [RNG.normal(size=(d_model, m)) / np.sqrt(d_model) for m in (d_k, d_k, d_v)]
    return (x, *w, RNG.normal(size=lead + (n, d_v)))


@pytest.mark.parametrize("lead", [(), (3,), (2, 2)])
def test_self_attention_backward_equals_autograd(lead):
    args = _self_case(lead, 4, 5, 3, 2)
    assert _agree(ref.self_attention_backward(*args), _torch_self_grads(*args))


@pytest.mark.parametrize("flip", ["no V path", "dW transposed", "no scale"])
def test_self_attention_autograd_rejects_a_flipped_convention(flip):
    from attnbook.check.learn import _self_backward_variant
    args = _self_case((2,), 4, 5, 3, 2)
    try:
        wrong = _self_backward_variant(flip)(*args)
    except ValueError:  # the wrong form does not even run here
        return
    assert not _agree(wrong, _torch_self_grads(*args))
