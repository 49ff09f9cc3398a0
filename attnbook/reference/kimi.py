"""Answer key of chapter 22c (Part VIII): Kimi Delta Attention (KDA), the
gated delta rule of Kimi Linear.

Gated DeltaNet (chapter 22, :func:`attnbook.reference.gated_delta_rule`)
decays the whole state by one number per token, ``exp(g_t)``. KDA decays
each key channel (each row of the state S (d_k, d_v)) by its own number:
g (..., N, d_k), and for each token t, in order (queries scaled by
1/sqrt(d_k), as in ``gated_delta_rule``):

    S <- diag(exp(g_t)) S                      forget, channel by channel
    S <- S + beta_t k_t (v_t - S^T k_t)^T      the delta rule
    o_t = S^T q_t / sqrt(d_k)

:func:`kimi_delta_rule` is the recurrence, :func:`chunked_kimi_delta_rule`
the same numbers a chunk of tokens at a time. With every channel of g_t
equal, both are ``gated_delta_rule``.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _lines, _whole_number

__all__ = ["kimi_delta_rule", "chunked_kimi_delta_rule"]


def _kimi_inputs(q, k, v, g, beta, initial_state):
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim < 2 or q.shape != k.shape:
        raise ValueError(_lines(
            f"q {q.shape} and k {k.shape} must have the same shape (..., N, d_k)"))
    if v.ndim != k.ndim or v.shape[:-1] != k.shape[:-1]:
        raise ValueError(_lines(
            f"v {v.shape} must be (..., N, d_v) with the same leading axes",
            f"as k {k.shape}"))
    g, beta = _as_float_array(g, "g"), _as_float_array(beta, "beta")
    if g.shape != k.shape:
        hint = (["(one per token: that is gated_delta_rule's g; repeat it",
                 "as g[..., None] * ones(d_k) for KDA)"]
                if g.shape == k.shape[:-1] else [])
        raise ValueError(_lines(
            f"g must have shape (..., N, d_k) = {k.shape}, one log-decay",
            f"per key channel, got {g.shape}", *hint))
    if beta.shape != k.shape[:-1]:
        raise ValueError(_lines(
            f"beta must have shape (..., N) = {k.shape[:-1]}, one number per",
            f"token, got {beta.shape}"))
    shape = k.shape[:-2] + (k.shape[-1], v.shape[-1])
    if initial_state is None:
        state = np.zeros(shape)
    else:
        state = _as_float_array(initial_state, "initial_state")
        if state.shape != shape:
            raise ValueError(_lines(
                f"initial_state must have shape (..., d_k, d_v) = {shape},",
                f"got {state.shape}"))
    return q, k, v, g, beta, state


def kimi_delta_rule(q, k, v, g, beta, *, initial_state=None):
    """Kimi Delta Attention, token by token.

    q, k (..., N, d_k), v (..., N, d_v); g (..., N, d_k): the log of the
    decay of each key channel (``exp(g)`` multiplies row i of the state,
    so g <= 0 forgets); beta (..., N): the write strength of each token.
    ``initial_state`` (..., d_k, d_v), zeros by default. Queries are
    scaled by 1/sqrt(d_k) inside. Returns ``(output, final_state)``:
    (..., N, d_v) and (..., d_k, d_v).
    """
    q, k, v, g, beta, state = _kimi_inputs(q, k, v, g, beta, initial_state)
    scale = 1 / np.sqrt(q.shape[-1])
    out = np.zeros(v.shape)
    for t in range(k.shape[-2]):
        k_t, v_t = k[..., t, :], v[..., t, :]
        state = np.exp(g[..., t, :])[..., :, None] * state        # per channel
        predicted = np.einsum("...kv,...k->...v", state, k_t)     # S^T k
        delta = beta[..., t, None] * (v_t - predicted)            # (..., d_v)
        state = state + k_t[..., :, None] * delta[..., None, :]
        out[..., t, :] = np.einsum("...kv,...k->...v", state, q[..., t, :]) * scale
    return out, state


def chunked_kimi_delta_rule(q, k, v, g, beta, *, chunk_size=64, initial_state=None):
    """Kimi Delta Attention a chunk of tokens at a time: the same result as
    :func:`kimi_delta_rule` (up to rounding) for any ``chunk_size``.

    Inside a chunk, c_t = g_1 + ... + g_t is now a vector (d_k,), and
    e^{c_t - c_s} a decay per channel. With S_0 the state entering the
    chunk, the corrections u_t = beta_t (v_t - (D_t S_{t-1})^T k_t) solve

        u_t + beta_t sum_{s<t} (k_t . (e^{c_t - c_s} * k_s)) u_s
            = beta_t (v_t - S_0^T (e^{c_t} * k_t)),

    then o_t = (S_0^T (e^{c_t} * q_t) + sum_{s<=t} (q_t . (e^{c_t - c_s}
    * k_s)) u_s) / sqrt(d_k), and the state leaving the chunk is
    diag(e^{c_C}) S_0 + sum_s (e^{c_C - c_s} * k_s) u_s^T.
    """
    q, k, v, g, beta, state = _kimi_inputs(q, k, v, g, beta, initial_state)
    chunk_size = _whole_number(chunk_size, "chunk_size")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    n, d_k = k.shape[-2:]
    q = q / np.sqrt(d_k)
    out = np.zeros(v.shape)
    for start in range(0, n, chunk_size):
        sl = slice(start, min(start + chunk_size, n))
        qc, kc, vc = q[..., sl, :], k[..., sl, :], v[..., sl, :]   # (..., C, d)
        bc = beta[..., sl]                                          # (..., C)
        c = np.cumsum(g[..., sl, :], axis=-2)                       # (..., C, d_k)
        size = c.shape[-2]
        lower = np.tril(np.ones((size, size), dtype=bool))[..., None]
        # decay[t, s, i] = e^{c_t,i - c_s,i} for s <= t, else 0: (..., C, C, d_k)
        diff = c[..., :, None, :] - c[..., None, :, :]
        decay = np.where(lower, np.exp(np.where(lower, diff, 0)), 0)
        kk = np.einsum("...ti,...tsi,...si->...ts", kc, decay, kc)  # (..., C, C)
        system = np.eye(size) + bc[..., :, None] * np.tril(kk, -1)
        rhs = bc[..., :, None] * (vc - (np.exp(c) * kc) @ state)
        u = np.linalg.solve(system, rhs)                            # (..., C, d_v)
        qk = np.einsum("...ti,...tsi,...si->...ts", qc, decay, kc)  # (..., C, C)
        out[..., sl, :] = (np.exp(c) * qc) @ state + qk @ u
        tail = np.exp(c[..., -1:, :] - c) * kc                      # (..., C, d_k)
        state = (np.exp(c[..., -1, :])[..., :, None] * state
                 + np.swapaxes(tail, -1, -2) @ u)
    return out, state
