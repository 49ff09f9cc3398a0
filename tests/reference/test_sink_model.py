"""The sink model of chapter 20: its task, and its gradient (with and without
the output gate) against finite differences."""

import numpy as np
import pytest

from attnbook import reference as ref
from attnbook import sink_model as sm


def test_task():
    x, y = sm.previous_or_blank(np.random.default_rng(0), 200)
    assert x.shape == y.shape == (200, sm.N) and (x[:, 0] == sm.BOS).all()
    for row, target in zip(x, y):
        for i in range(sm.N):
            seek = i >= 1 and row[i] >= sm.VOCAB // 2
            want = row[i - 1] if seek else sm.BLANK     # row[0] is BOS = BLANK
            assert target[i] == want


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("n_heads", [1, 2])
def test_gradient_matches_finite_differences(gated, n_heads):
    rng = np.random.default_rng(3)
    p = sm.init_params(rng, n_heads=n_heads, d_k=3, gated=gated)
    x, y = sm.previous_or_blank(rng, 4)

    def loss(p):
        return ref.cross_entropy(sm.forward(p, x, n_heads)[0], y)[0]
    logits, cache = sm.forward(p, x, n_heads)
    g = sm.backward(p, cache, ref.cross_entropy(logits, y)[1], n_heads)
    assert set(g) == set(p)
    for name in p:
        for _ in range(3):
            idx = tuple(int(i) for i in rng.integers(0, p[name].shape))
            old = p[name][idx]
            p[name][idx] = old + 1e-6
            up = loss(p)
            p[name][idx] = old - 1e-6
            down = loss(p)
            p[name][idx] = old
            assert abs((up - down) / 2e-6 - g[name][idx]) < 1e-7, (name, idx)


def test_training_learns_the_task():
    p = sm.init_params(np.random.default_rng(0))
    hist = sm.train(p, seed=0, steps=300)
    assert hist["loss"][-1] < 0.01 < hist["loss"][0]
