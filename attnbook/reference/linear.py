"""Answer key of chapter 22 (Part VIII): linear attention and the gated delta
rule (Gated DeltaNet, as Qwen3-Next runs it).

Linear attention keeps, per head, a fixed-size state S (d_k, d_v) instead of
a growing KV cache. For each token t, in order (queries scaled by
1/sqrt(d_k)):

* plain linear attention:   S <- S + k v^T,                 o = S^T q
* the delta rule:           S <- S + beta k (v - S^T k)^T,  o = S^T q
* the gated delta rule:     S <- exp(g) S first, then the delta rule.

:func:`delta_rule_step` is one step, :func:`gated_delta_rule` the whole
recurrence, :func:`chunked_gated_delta_rule` the same numbers computed a
chunk of tokens at a time with matrix products (the form that trains in
parallel). :func:`linear_attention` is plain causal linear attention.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _lines, _whole_number

__all__ = ["linear_attention", "delta_rule_step", "gated_delta_rule",
           "chunked_gated_delta_rule"]


def linear_attention(q, k, v):
    """Causal linear attention without normalisation: o_t = sum_{s<=t}
    (q_t . k_s) v_s / sqrt(d_k), i.e. S_t = S_{t-1} + k_t v_t^T and
    o_t = S_t^T q_t / sqrt(d_k). q, k (..., N, d_k), v (..., N, d_v);
    apply a feature map to q and k first if you want one. Returns
    (..., N, d_v)."""
    q, k, v = _inputs(q, k, v)
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])  # (..., N, N)
    return np.tril(scores) @ v


def _inputs(q, k, v):
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim < 2 or q.shape != k.shape:
        raise ValueError(_lines(
            f"q {q.shape} and k {k.shape} must have the same shape (..., N, d_k)"))
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(_lines(
            f"v {v.shape} must be (..., N, d_v) with the same leading axes",
            f"as k {k.shape}"))
    return q, k, v


def _gates(g, beta, lead):
    g, beta = _as_float_array(g, "g"), _as_float_array(beta, "beta")
    for name, a in (("g", g), ("beta", beta)):
        if a.shape != lead:
            raise ValueError(_lines(
                f"{name} must have shape (..., N) = {lead}, one number per",
                f"token, got {a.shape}"))
    return g, beta


def delta_rule_step(state, q, k, v, g, beta):
    """One token of the gated delta rule: ``state`` (..., d_k, d_v), q and k
    (..., d_k), v (..., d_v), g and beta (...,). Returns ``(o, new_state)``:

        S = exp(g) S;  S = S + beta k (v - S^T k)^T;  o = S^T q / sqrt(d_k)
    """
    state = _as_float_array(state, "state")
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    g, beta = np.asarray(g, float), np.asarray(beta, float)
    s = np.exp(g)[..., None, None] * state                     # forget first
    predicted = np.einsum("...kv,...k->...v", s, k)             # S^T k: (..., d_v)
    delta = beta[..., None] * (v - predicted)                   # (..., d_v)
    s = s + k[..., :, None] * delta[..., None, :]               # + k delta^T
    o = np.einsum("...kv,...k->...v", s, q) / np.sqrt(q.shape[-1])
    return o, s


def gated_delta_rule(q, k, v, g, beta, *, initial_state=None):
    """The gated delta rule, token by token (Gated DeltaNet).

    q, k (..., N, d_k), v (..., N, d_v), g and beta (..., N): the log of
    the decay (``exp(g)`` multiplies the state, so g <= 0 forgets) and the
    write strength of each token. ``initial_state`` (..., d_k, d_v), zeros
    by default. Queries are scaled by 1/sqrt(d_k) inside. Returns
    ``(output, final_state)``: (..., N, d_v) and (..., d_k, d_v).
    """
    q, k, v = _inputs(q, k, v)
    g, beta = _gates(g, beta, k.shape[:-1])
    state = (np.zeros(k.shape[:-2] + (k.shape[-1], v.shape[-1]))
             if initial_state is None else _as_float_array(initial_state, "initial_state"))
    out = np.zeros(v.shape)
    for t in range(k.shape[-2]):
        out[..., t, :], state = delta_rule_step(
            state, q[..., t, :], k[..., t, :], v[..., t, :], g[..., t], beta[..., t])
    return out, state


def chunked_gated_delta_rule(q, k, v, g, beta, *, chunk_size=64, initial_state=None):
    """The gated delta rule a chunk of tokens at a time: the same result as
    :func:`gated_delta_rule` (up to rounding) for any ``chunk_size``.

    Inside a chunk of C tokens, with c_t = g_1 + ... + g_t (the log decay
    from the chunk's start) and S_0 the state entering it, each token's
    correction u_t = beta_t (v_t - S_{t-1}^T k_t) depends on the earlier
    corrections of the chunk through a unit lower-triangular system,

        u_t + beta_t sum_{s<t} e^{c_t - c_s} (k_t . k_s) u_s
            = beta_t (v_t - e^{c_t} S_0^T k_t),

    solved for the whole chunk at once. Then o_t = (e^{c_t} S_0^T q_t +
    sum_{s<=t} e^{c_t - c_s} (q_t . k_s) u_s) / sqrt(d_k) and the state
    leaving the chunk is e^{c_C} S_0 + sum_s e^{c_C - c_s} k_s u_s^T.
    """
    q, k, v = _inputs(q, k, v)
    g, beta = _gates(g, beta, k.shape[:-1])
    chunk_size = _whole_number(chunk_size, "chunk_size")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    n, d_k = k.shape[-2:]
    state = (np.zeros(k.shape[:-2] + (d_k, v.shape[-1]))
             if initial_state is None else _as_float_array(initial_state, "initial_state"))
    q = q / np.sqrt(d_k)
    out = np.zeros(v.shape)
    for start in range(0, n, chunk_size):
        sl = slice(start, min(start + chunk_size, n))
        qc, kc, vc = q[..., sl, :], k[..., sl, :], v[..., sl, :]   # (..., C, d)
        bc = beta[..., sl]                                          # (..., C)
        c = np.cumsum(g[..., sl], axis=-1)                          # (..., C)
        size = c.shape[-1]
        lower = np.tril(np.ones((size, size), dtype=bool))
        # decay[t, s] = e^{c_t - c_s} for s <= t, else 0
        decay = np.where(lower, np.exp(np.where(lower, c[..., :, None] - c[..., None, :], 0)), 0)
        kk = kc @ np.swapaxes(kc, -1, -2) * decay                   # (..., C, C)
        system = np.eye(size) + bc[..., :, None] * np.tril(kk, -1)
        rhs = bc[..., :, None] * (vc - np.exp(c)[..., :, None] * (kc @ state))
        u = np.linalg.solve(system, rhs)                            # (..., C, d_v)
        qk = qc @ np.swapaxes(kc, -1, -2) * decay                   # (..., C, C)
        out[..., sl, :] = np.exp(c)[..., :, None] * (qc @ state) + qk @ u
        tail = np.exp(c[..., -1:] - c)[..., :, None] * kc          # (..., C, d_k)
        state = np.exp(c[..., -1])[..., None, None] * state + np.swapaxes(tail, -1, -2) @ u
    return out, state
