"""The tiny decoder of the KV-cache chapter, for its second page.

Page 1 of the chapter (``chapters/14_kv_cache.ipynb``) writes this decoder cell by
cell and asserts, in its last section, that this copy gives the same weights, the
same tokens and the same logits. Page 2 (``chapters/14b_cost_and_windows.ipynb``)
imports it to count and time what the cache saves, without writing it again.

The weights are drawn from ``np.random.default_rng(0)`` in the order page 1 draws
them: the embedding, then each layer's W_q, W_k, W_v, W_o, W_1, W_2, then W_out.
"""

from __future__ import annotations

import numpy as np

from . import reference as ref

__all__ = ["words", "V", "D", "NH", "HS", "n_layers", "F", "embed", "layers", "W_out",
           "FLOPS", "mm", "split", "merge", "qkv", "attention", "finish", "forward",
           "new_cache", "forward_cached", "generate", "generate_cached"]

words = ["the", "cat", "dog", "sat", "on", "mat", "ran", "to", "a", "red", "big", "."]
V, D, NH, HS, n_layers, F = len(words), 16, 2, 8, 2, 32  # F: the MLP's width

_rng = np.random.default_rng(0)


def _init(n_in, n_out):
    return _rng.normal(size=(n_in, n_out)) / np.sqrt(n_in)


embed = _rng.normal(size=(V, D))                       # (V, D)
layers = [{"W_q": _init(D, D), "W_k": _init(D, D),     # (D, D) each
           "W_v": _init(D, D), "W_o": _init(D, D),
           "W_1": _init(D, F), "W_2": _init(F, D)}     # (D, F), (F, D)
          for _ in range(n_layers)]
W_out = _init(D, V)                                    # (D, V)

FLOPS = [0]  # the running count of matmul FLOPs


def mm(a, b):
    """a @ b, adding its FLOPs (2 per multiply-add) to FLOPS[0]."""
    out = a @ b
    FLOPS[0] += 2 * out.size * a.shape[-1]
    return out


def split(x):   # (N, D) -> (NH, N, HS)
    return x.reshape(len(x), NH, HS).transpose(1, 0, 2)


def merge(x):   # (NH, N, HS) -> (N, D)
    return x.transpose(1, 0, 2).reshape(x.shape[1], NH * HS)


def qkv(x, p, positions):
    q = ref.rope(split(mm(x, p["W_q"])), positions)  # (NH, n, HS)
    k = ref.rope(split(mm(x, p["W_k"])), positions)  # (NH, n, HS)
    v = split(mm(x, p["W_v"]))                       # (NH, n, HS)
    return q, k, v


def attention(q, k, v, mask):
    s = mm(q, k.transpose(0, 2, 1)) / np.sqrt(HS)    # (NH, n_q, n_k)
    s = np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)            # (NH, n_q, n_k)
    return mm(w, v)                                  # (NH, n_q, HS)


def finish(x, a, p):
    x = x + mm(merge(a), p["W_o"])                   # (n, D)
    h = np.maximum(mm(x, p["W_1"]), 0)               # (n, F)
    return x + mm(h, p["W_2"])                       # (n, D)


def forward(ids, mask=None):
    """ids (N,) -> logits (N, V), and each layer's (k, v), (NH, N, HS) each."""
    n = len(ids)
    mask = ref.causal_mask(n) if mask is None else mask  # (N, N)
    x = embed[ids]                                       # (N, D)
    kv = []
    for p in layers:
        q, k, v = qkv(x, p, np.arange(n))
        kv.append((k, v))
        x = finish(x, attention(q, k, v, mask), p)
    return mm(x, W_out), kv                              # (N, V)


def new_cache():
    return [{"k": np.zeros((NH, 0, HS)), "v": np.zeros((NH, 0, HS))}
            for _ in range(n_layers)]


def forward_cached(ids, cache):
    """ids (n,): the new tokens. Returns their logits (n, V); grows the cache."""
    n, start = len(ids), cache[0]["k"].shape[1]
    positions = np.arange(start, start + n)
    x = embed[ids]                                   # (n, D)
    for p, c in zip(layers, cache):
        q, k, v = qkv(x, p, positions)               # (NH, n, HS) each
        c["k"] = np.concatenate([c["k"], k], axis=1)
        c["v"] = np.concatenate([c["v"], v], axis=1)
        mask = ref.causal_mask(n, start + n)         # (n, start + n)
        x = finish(x, attention(q, c["k"], c["v"], mask), p)
    return mm(x, W_out)                              # (n, V)


def generate(prompt, n_new):
    """Greedy generation without a cache: token ids and the logit rows used."""
    ids, rows = list(prompt), []
    for _ in range(n_new):
        logits, _ = forward(np.array(ids))
        rows.append(logits[-1])
        ids.append(int(np.argmax(logits[-1])))
    return ids, np.array(rows)


def generate_cached(prompt, n_new):
    """Greedy generation with the cache (prefill, then one decode per token)."""
    cache, ids, rows = new_cache(), list(prompt), []
    logits = forward_cached(np.array(ids), cache)
    for step in range(n_new):
        rows.append(logits[-1])
        ids.append(int(np.argmax(logits[-1])))
        if step < n_new - 1:
            logits = forward_cached(np.array(ids[-1:]), cache)
    return ids, np.array(rows)
