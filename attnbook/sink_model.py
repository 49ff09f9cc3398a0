"""A close cousin of chapter 12's tiny model, for chapter 20's attention sink.

Chapter 12's model (embeddings, one attention layer, a readout) with three
changes, so that a head sometimes has nothing to read:

* a causal mask and a fixed first token, ``BOS`` (token ``VOCAB``);
* a residual path: ``logits = x W^R + o W^O + b``, so a position can answer
  from its own token without attention;
* the task, :func:`previous_or_blank`: a "seek" token (``4 .. 7``) must name
  the token before it; a "rest" token (``0 .. 3``) must answer ``BLANK``
  (class ``VOCAB``), which its own embedding gives through the residual path;
  the attention output can only disturb it.

``gated=True`` adds Qwen3-Next's output gate: ``o * sigmoid(x W^G)`` before
``W^O``. Training is Adam (:class:`attnbook.tiny_model.Adam`) on the
cross-entropy of :func:`attnbook.reference.cross_entropy`; attention and its
gradient are the answer key's ``scaled_dot_product_attention`` and
``attention_backward``. Chapter 12 writes each of these steps out; this module
only assembles them.
"""

from __future__ import annotations

import numpy as np

from .reference import (attention_backward, causal_mask, cross_entropy,
                        merge_heads, scaled_dot_product_attention, split_heads)
from .tiny_model import Adam

__all__ = ["VOCAB", "N", "D", "BOS", "BLANK", "previous_or_blank",
           "init_params", "forward", "backward", "train"]

VOCAB, N, D = 8, 8, 16          # tokens 0..7, sequences of 8, model width 16
BOS = BLANK = VOCAB             # input token 8 is BOS; output class 8 is BLANK


def previous_or_blank(rng, n):
    """``n`` sequences: BOS then 7 random tokens; targets (n, N).

    Position i >= 1 with a seek token (4..7) must name token i-1 (BLANK when
    that is BOS); a rest token (0..3), and BOS itself, must answer BLANK.
    """
    x = rng.integers(0, VOCAB, size=(n, N))
    x[:, 0] = BOS
    seek = x >= VOCAB // 2
    seek[:, 0] = False
    y = np.full((n, N), BLANK)
    y[:, 1:] = np.where(seek[:, 1:], x[:, :-1], BLANK)
    return x, y


def init_params(rng, n_heads=1, d_k=8, gated=False):
    """Random parameters; entries of x = E[token] + P have variance ~1."""
    def normal(std, *shape):
        return rng.normal(0.0, std, size=shape)
    w = n_heads * d_k
    p = {"E": normal(np.sqrt(0.5), VOCAB + 1, D),
         "P": normal(np.sqrt(0.5), N, D),
         "Wq": normal(D ** -0.5, D, w), "Wk": normal(D ** -0.5, D, w),
         "Wv": normal(D ** -0.5, D, w),
         "Wr": normal(D ** -0.5, D, VOCAB + 1),      # residual readout
         "Wo": normal(w ** -0.5, w, VOCAB + 1),      # attention readout
         "b": np.zeros(VOCAB + 1)}
    if gated:
        p["Wg"] = normal(D ** -0.5, D, w)            # the gate's projection
    return p


def forward(p, tokens, n_heads=1):
    """Logits (B, N, VOCAB + 1) and a cache; ``cache["A"]`` the weights."""
    x = p["E"][tokens] + p["P"]                                  # (B, N, D)
    q, k, v = (split_heads(x @ p[w], n_heads) for w in ("Wq", "Wk", "Wv"))
    o, A = scaled_dot_product_attention(q, k, v, causal_mask(N))
    o = merge_heads(o)                                           # (B, N, w)
    g = None
    if "Wg" in p:
        g = 0.5 * (1.0 + np.tanh(0.5 * (x @ p["Wg"])))          # sigmoid
    og = o if g is None else o * g
    logits = x @ p["Wr"] + og @ p["Wo"] + p["b"]
    return logits, dict(tokens=tokens, x=x, q=q, k=k, v=v, A=A, o=o, g=g, og=og)


def backward(p, c, d_logits, n_heads=1):
    """The gradient of every parameter (a dict like ``p``)."""
    def flat(a):
        return a.reshape(-1, a.shape[-1])
    g = {"Wr": flat(c["x"]).T @ flat(d_logits),
         "Wo": flat(c["og"]).T @ flat(d_logits), "b": d_logits.sum(axis=(0, 1))}
    dx = d_logits @ p["Wr"].T                                    # (B, N, D)
    d_og = d_logits @ p["Wo"].T                                  # (B, N, w)
    do = d_og
    if c["g"] is not None:      # og = o * sigmoid(z), z = x Wg
        do = d_og * c["g"]
        dz = d_og * c["o"] * c["g"] * (1 - c["g"])
        g["Wg"] = flat(c["x"]).T @ flat(dz)
        dx = dx + dz @ p["Wg"].T
    dq, dk, dv = attention_backward(c["q"], c["k"], c["v"],
                                    split_heads(do, n_heads), causal_mask(N))
    for name, d in (("Wq", dq), ("Wk", dk), ("Wv", dv)):
        d = merge_heads(d)                                       # (B, N, w)
        g[name] = flat(c["x"]).T @ flat(d)
        dx = dx + d @ p[name].T
    g["P"] = dx.sum(axis=0)
    g["E"] = flat(np.eye(VOCAB + 1)[c["tokens"]]).T @ flat(dx)
    return g


def train(p, seed, n_heads=1, steps=300, batch=64, lr=1e-2):
    """Adam on fresh batches of :func:`previous_or_blank`; ``p`` in place.

    Returns a dict of per-step arrays: ``loss``, ``max_score`` (the largest
    |q . k| / sqrt(d_k) of the batch, over allowed pairs) and ``q_norm``,
    ``k_norm`` (the mean length of a query and of a key vector).
    """
    rng = np.random.default_rng(seed)
    opt = Adam(p, lr=lr)
    hist = {name: np.empty(steps) for name in ("loss", "max_score", "q_norm",
                                               "k_norm")}
    for t in range(steps):
        tokens, targets = previous_or_blank(rng, batch)
        logits, c = forward(p, tokens, n_heads)
        loss, d_logits = cross_entropy(logits, targets)
        s = c["q"] @ np.swapaxes(c["k"], -1, -2) / np.sqrt(c["q"].shape[-1])
        hist["loss"][t] = loss
        hist["max_score"][t] = np.abs(np.where(causal_mask(N), s, 0)).max()
        hist["q_norm"][t] = np.linalg.norm(c["q"], axis=-1).mean()
        hist["k_norm"][t] = np.linalg.norm(c["k"], axis=-1).mean()
        opt.step(p, backward(p, c, d_logits, n_heads))
    return hist
