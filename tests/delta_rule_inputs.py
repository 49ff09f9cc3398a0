"""Shared by the delta-rule tests against transformers (Qwen3-Next's gated delta rule, chapter 22b;
Kimi Delta Attention, chapter 22c): the inputs in the answer key's layout, and one call of
transformers' function in its own layout, back to the answer key's."""

import warnings

import numpy as np

B, N, H, D_K, D_V = 2, 11, 3, 4, 5
TOL = 2e-6  # transformers computes in float32


def delta_inputs(seed=0, *, per_channel=False, g_high=0.7):
    """q, k, v, g, beta, s0 (float64), keys L2-normalised as both models do. g, the log decay, is
    below 0: one per head and token, or (Kimi) one per key channel too."""
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, B, H, N, D_K))                      # (B, H, N, d_k)
    k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=(B, H, N, D_V))                            # (B, H, N, d_v)
    g = -rng.uniform(0.01, g_high, size=(B, H, N, D_K) if per_channel else (B, H, N))
    beta = rng.uniform(0.05, 1.0, size=(B, H, N))
    s0 = rng.normal(size=(B, H, D_K, D_V))
    return q, k, v, g, beta, s0


def transformers_delta(torch, fn, q, k, v, g, beta, s0, **kwargs):
    """transformers' `fn` on the answer key's (B, H, N, ...) arrays: (output, final state)."""
    def t(a):  # (B, H, N, ...) -> transformers' (B, N, H, ...)
        return torch.tensor(np.swapaxes(a, 1, 2).copy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        o, s = fn(t(q), t(k), t(v), g=t(g), beta=t(beta), initial_state=torch.tensor(s0),
                  output_final_state=True, **kwargs)
    return np.swapaxes(o.double().numpy(), 1, 2), s.double().numpy()
