"""What chapter 22's training comparison needs that is not the lesson: an
associative-recall task and a one-layer model whose token mixer is softmax
attention, linear attention or the gated delta rule, with its backward pass
(checked against finite differences in the tests) and a training loop.

The task: P (key, value) pairs, then a query key; the answer is the value
stored with that key (with ``repeats``, some keys come back later with a new
value, and the answer is the latest one). Each step of the sequence is one
pair, embedded as ``E_k[key] + E_v[value]``; the last step is the query,
``E_k[query] + E_v[BLANK]``. The mixer reads the whole sequence at the last
step only; a readout gives the logits over the values.
"""

from __future__ import annotations

import numpy as np

from . import reference as ref
from .tiny_model import Adam

__all__ = ["recall_task", "init_params", "forward", "backward", "train", "MIXERS"]

MIXERS = ("softmax", "linear", "gated delta")


def recall_task(rng, n, pairs, n_keys, n_values, repeats=0):
    """``(keys, values, query, target)``: keys, values (n, pairs) ints, query
    and target (n,). Keys are distinct within a sequence, except that the
    last ``repeats`` pairs reuse earlier keys with new values; the query is
    one of the keys, and the target its latest value."""
    if pairs - repeats > n_keys or repeats > pairs - repeats:
        raise ValueError(f"need pairs - repeats <= n_keys and repeats <= pairs - "
                         f"repeats, got pairs={pairs}, repeats={repeats}, "
                         f"n_keys={n_keys}")
    distinct = pairs - repeats
    keys = np.argsort(rng.random((n, n_keys)), axis=1)[:, :distinct]
    if repeats:
        again = np.argsort(rng.random((n, distinct)), axis=1)[:, :repeats]
        keys = np.concatenate([keys, np.take_along_axis(keys, again, 1)], axis=1)
    values = rng.integers(0, n_values, size=(n, pairs))
    pick = rng.integers(0, distinct, size=n)
    if repeats:  # ask for a repeated key half of the time
        pick = np.where(rng.random(n) < 0.5, again[np.arange(n), rng.integers(
            0, repeats, size=n)], pick)
    query = keys[np.arange(n), pick]
    latest = np.where(keys == query[:, None], np.arange(pairs), -1).max(axis=1)
    return keys, values, query, values[np.arange(n), latest]


def init_params(rng, n_keys, n_values, d_model=32, d=16):
    def w(*shape):
        return rng.normal(size=shape) / np.sqrt(shape[0])
    return {"E_k": rng.normal(size=(n_keys, d_model)),
            "E_v": rng.normal(size=(n_values + 1, d_model)),   # + BLANK
            "W_q": w(d_model, d), "W_k": w(d_model, d), "W_v": w(d_model, d),
            # the gate starts slow: g = -softplus(-4) = -0.018, a half-life
            # of about 38 tokens (softplus(0) would halve the state each token)
            "w_b": np.zeros(d_model), "w_a": np.zeros(d_model), "a0": np.full(1, -4.0),
            "W_o": w(d, n_values)}


def _l2(x):
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / n, n


def _l2_back(dy, y, n):
    return (dy - y * (dy * y).sum(-1, keepdims=True)) / n


def forward(p, keys, values, query, mixer):
    """Logits (n, n_values) and a cache for :func:`backward`."""
    blank = p["E_v"].shape[0] - 1
    x = np.concatenate([p["E_k"][keys] + p["E_v"][values],
                        (p["E_k"][query] + p["E_v"][blank])[:, None]], axis=1)  # (n, T, D)
    q, k, v = x[:, -1] @ p["W_q"], x @ p["W_k"], x @ p["W_v"]  # (n, d), (n, T, d) x 2
    c = {"x": x, "keys": keys, "values": values, "query": query, "mixer": mixer}
    d = q.shape[-1]
    if mixer == "softmax":
        o, w = ref.scaled_dot_product_attention(q[:, None], k, v)
        c.update(q=q, k=k, v=v)
        o = o[:, 0]
    else:
        (qn, q_len), (kn, k_len) = _l2(q), _l2(k)
        c.update(qn=qn, q_len=q_len, kn=kn, k_len=k_len, v=v)
        if mixer == "linear":
            s = np.einsum("ntd,nd->nt", kn, qn) / np.sqrt(d)           # (n, T)
            o = np.einsum("nt,ntv->nv", s, v)
            c["s"] = s
        else:
            beta = 1 / (1 + np.exp(-(x @ p["w_b"])))                   # (n, T)
            a_in = x @ p["w_a"] + p["a0"]
            g = -np.logaddexp(0, a_in)                                 # -softplus
            states = [np.zeros((x.shape[0], d, d))]
            for t in range(x.shape[1]):
                _, s_new = ref.delta_rule_step(states[-1], qn, kn[:, t], v[:, t],
                                               g[:, t], beta[:, t])
                states.append(s_new)
            o = np.einsum("nkv,nk->nv", states[-1], qn) / np.sqrt(d)
            c.update(beta=beta, g=g, a_in=a_in, states=states)
    c["o"] = o
    return o @ p["W_o"], c


def backward(p, c, d_logits):
    """Gradients of every parameter, given dL/dlogits."""
    x, v, o = c["x"], c["v"], c["o"]
    d = v.shape[-1]
    grads = {name: np.zeros_like(val) for name, val in p.items()}
    grads["W_o"] = o.T @ d_logits
    d_o = d_logits @ p["W_o"].T                                         # (n, d)
    dx = np.zeros_like(x)
    if c["mixer"] == "softmax":
        dq, dk, dv = ref.attention_backward(c["q"][:, None], c["k"], v, d_o[:, None])
        dq = dq[:, 0]
    else:
        qn, kn = c["qn"], c["kn"]
        if c["mixer"] == "linear":
            dv = c["s"][..., None] * d_o[:, None]
            ds = np.einsum("ntv,nv->nt", v, d_o) / np.sqrt(d)
            dqn = np.einsum("nt,ntd->nd", ds, kn)
            dkn = ds[..., None] * qn[:, None]
        else:
            dqn, dkn, dv, dbeta, dg = _delta_backward(c, d_o)
            dbeta_in = dbeta * c["beta"] * (1 - c["beta"])
            da_in = -dg / (1 + np.exp(-c["a_in"]))                      # d softplus
            grads["w_b"] = np.einsum("nt,ntd->d", dbeta_in, x)
            grads["w_a"] = np.einsum("nt,ntd->d", da_in, x)
            grads["a0"] = np.array([da_in.sum()])
            dx += dbeta_in[..., None] * p["w_b"] + da_in[..., None] * p["w_a"]
        dq = _l2_back(dqn, qn, c["q_len"])
        dk = _l2_back(dkn, kn, c["k_len"])
    grads["W_q"] = x[:, -1].T @ dq
    grads["W_k"] = np.einsum("ntd,nte->de", x, dk)
    grads["W_v"] = np.einsum("ntd,nte->de", x, dv)
    dx += dk @ p["W_k"].T + dv @ p["W_v"].T
    dx[:, -1] += dq @ p["W_q"].T
    np.add.at(grads["E_k"], c["keys"], dx[:, :-1])
    np.add.at(grads["E_k"], c["query"], dx[:, -1])
    np.add.at(grads["E_v"], c["values"], dx[:, :-1])
    grads["E_v"][-1] += dx[:, -1].sum(0)
    return grads


def _delta_backward(c, d_o):
    """Reverse-mode through S_t = a S_{t-1} + k (beta (v - (a S_{t-1})^T k))^T,
    o = S_T^T q / sqrt(d), a = exp(g), one step at a time backwards."""
    qn, kn, v, beta, g, states = c["qn"], c["kn"], c["v"], c["beta"], c["g"], c["states"]
    d = qn.shape[-1]
    s_last = states[-1]
    dS = qn[:, :, None] * d_o[:, None, :] / np.sqrt(d)                 # (n, d, d)
    dqn = np.einsum("nkv,nv->nk", s_last, d_o) / np.sqrt(d)
    dkn, dv = np.zeros_like(kn), np.zeros_like(v)
    dbeta, dg = np.zeros_like(beta), np.zeros_like(g)
    for t in range(kn.shape[1] - 1, -1, -1):
        a = np.exp(g[:, t])[:, None, None]
        s1 = a * states[t]                                             # decayed
        k_t = kn[:, t]
        pred = np.einsum("nkv,nk->nv", s1, k_t)
        err = v[:, t] - pred
        delta = beta[:, t, None] * err
        dk_t = np.einsum("nkv,nv->nk", dS, delta)                      # from k delta^T
        d_delta = np.einsum("nkv,nk->nv", dS, k_t)
        dbeta[:, t] = (d_delta * err).sum(-1)
        dv[:, t] = beta[:, t, None] * d_delta
        d_pred = -dv[:, t]
        ds1 = dS + k_t[:, :, None] * d_pred[:, None, :]
        dk_t += np.einsum("nkv,nv->nk", s1, d_pred)
        dkn[:, t] = dk_t
        dg[:, t] = (ds1 * s1).sum((-1, -2))
        dS = a * ds1
    return dqn, dkn, dv, dbeta, dg


def train(p, mixer, seed, *, pairs, n_keys, n_values, repeats=0, steps=300, batch=64,
          lr=1e-2):
    """Adam on fresh batches of the task; returns the loss of every step."""
    rng = np.random.default_rng(seed)
    opt = Adam(p, lr=lr)
    losses = []
    for _ in range(steps):
        keys, values, query, target = recall_task(rng, batch, pairs, n_keys, n_values,
                                                  repeats)
        logits, c = forward(p, keys, values, query, mixer)
        probs = ref.softmax(logits, axis=-1)
        losses.append(-np.log(probs[np.arange(batch), target]).mean())
        d_logits = probs.copy()
        d_logits[np.arange(batch), target] -= 1
        opt.step(p, backward(p, c, d_logits / batch))
    return np.array(losses)
