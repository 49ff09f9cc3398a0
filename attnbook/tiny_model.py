"""What the tiny model of chapter 12 needs that is not the lesson.

* :func:`reversal_task`: the data, random token sequences and their reverses,
  split into a training set and a held-out set that share no sequence.
* :class:`Adam`: the optimiser of Kingma and Ba (2015), for a dict of NumPy
  parameters.

The model itself (embeddings, attention, readout, the backward pass) is
written in the chapter.
"""

from __future__ import annotations

import numpy as np

__all__ = ["reversal_task", "Adam"]


def reversal_task(rng, n_train, n_test, length, vocab):
    """Random sequences of ``length`` tokens from ``0 .. vocab-1``, reversed.

    Returns ``(train_x, train_y), (test_x, test_y)``, int arrays of shape
    (n_train, length) and (n_test, length), with ``y = x[:, ::-1]``. No
    held-out sequence occurs in the training set. Raises ``ValueError`` when
    there are not enough distinct sequences (vocab ** length) for both.
    """
    n_train, n_test = int(n_train), int(n_test)
    total = vocab ** length
    if n_train < 0 or n_test < 0 or length < 1 or vocab < 1:
        raise ValueError(f"need n_train, n_test >= 0 and length, vocab >= 1, "
                         f"got {n_train}, {n_test}, {length}, {vocab}")
    train_x = rng.integers(0, vocab, size=(n_train, length))
    seen = {tuple(row) for row in train_x.tolist()}
    if n_test > total - len(seen):
        raise ValueError(f"{n_test} held-out sequences are too many: of the "
                         f"{total} sequences of {length} tokens from {vocab}, "
                         f"{total - len(seen)} are not in the training set")
    test_rows = []
    while len(test_rows) < n_test:
        row = tuple(rng.integers(0, vocab, size=length).tolist())
        if row not in seen:
            seen.add(row)
            test_rows.append(row)
    test_x = np.array(test_rows, dtype=train_x.dtype).reshape(n_test, length)
    return (train_x, train_x[:, ::-1].copy()), (test_x, test_x[:, ::-1].copy())


class Adam:
    """Adam (Kingma and Ba, 2015) for a dict of NumPy arrays, updated in place.

    For each parameter, running averages of the gradient (m) and of its
    square (v), corrected for their start at zero, give the step
    ``lr * m_hat / (sqrt(v_hat) + eps)``: about ``lr`` in size whatever the
    gradient's scale. The defaults are those of the paper except ``lr``.
    """

    def __init__(self, params, lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.t = 0
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}

    def step(self, params, grads):
        """One update of every parameter in ``params`` from ``grads``."""
        if set(grads) != set(params):
            raise ValueError(f"grads and params must have the same names: "
                             f"{sorted(grads)} vs {sorted(params)}")
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        for name, p in params.items():
            g = grads[name]
            if g.shape != p.shape:
                raise ValueError(f"the gradient of {name} has shape "
                                 f"{g.shape}, the parameter {p.shape}")
            self.m[name] = b1 * self.m[name] + (1 - b1) * g
            self.v[name] = b2 * self.v[name] + (1 - b2) * g * g
            m_hat = self.m[name] / (1 - b1 ** self.t)
            v_hat = self.v[name] / (1 - b2 ** self.t)
            p -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)
