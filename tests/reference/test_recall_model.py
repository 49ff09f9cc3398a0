"""Chapter 22's training comparison (attnbook.recall_model): the task is what
its docstring says, and the backward pass of each mixer equals finite
differences."""

import numpy as np
import pytest

from attnbook import recall_model as rm
from attnbook import reference as ref


def test_task_targets_are_the_latest_value_of_the_query_key():
    rng = np.random.default_rng(0)
    keys, values, query, target = rm.recall_task(rng, 200, 6, 8, 5, repeats=2)
    assert keys.shape == values.shape == (200, 6)
    assert (np.sort(keys[:, :4], 1)[:, 1:] != np.sort(keys[:, :4], 1)[:, :-1]).all()
    for i in range(200):
        where = np.flatnonzero(keys[i] == query[i])
        assert len(where) >= 1 and target[i] == values[i, where[-1]]


def _loss(p, batch, mixer):
    logits, _ = rm.forward(p, *batch[:3], mixer)
    probs = ref.softmax(logits, axis=-1)
    return -np.log(probs[np.arange(len(batch[3])), batch[3]]).mean()


@pytest.mark.parametrize("mixer", rm.MIXERS)
def test_backward_equals_finite_differences(mixer):
    rng = np.random.default_rng(1)
    p = rm.init_params(rng, 6, 4, d_model=5, d=3)
    p["w_b"] = rng.normal(size=5)
    p["w_a"] = rng.normal(size=5)
    batch = rm.recall_task(rng, 3, 4, 6, 4, repeats=1)
    logits, c = rm.forward(p, *batch[:3], mixer)
    probs = ref.softmax(logits, axis=-1)
    d_logits = probs.copy()
    d_logits[np.arange(3), batch[3]] -= 1
    grads = rm.backward(p, c, d_logits / 3)
    eps = 1e-6
    for name, value in p.items():
        num = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            old = value[idx]
            value[idx] = old + eps
            up = _loss(p, batch, mixer)
            value[idx] = old - eps
            down = _loss(p, batch, mixer)
            value[idx] = old
            num[idx] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grads[name], num, rtol=1e-5, atol=1e-8, err_msg=name)
