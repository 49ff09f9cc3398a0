"""Answer key of chapter 14 (the KV cache): the sliding-window mask of a
rolling buffer."""

from __future__ import annotations

import numpy as np

from ..validate import _whole_number
from .attention import causal_mask  # noqa: F401

__all__ = ["sliding_window_mask"]


def sliding_window_mask(n_q, n_k, window):
    """Boolean sliding-window causal mask (n_q, n_k), True = may attend.

    Aligned bottom-right like :func:`~attnbook.reference.causal_mask`: query
    i sits at position ``p = n_k - n_q + i`` and may attend to the ``window``
    keys at positions ``p - window + 1 .. p``, itself included (fewer near
    the start). This is the mask of Mistral 7B (``"sliding_window": 4096``)
    and of Hugging Face's ``sliding_window_causal_mask_function``
    (``q_idx - window < kv_idx <= q_idx``), and what a rolling-buffer cache
    of ``window`` slots can hold.

    ``window >= n_k`` gives the plain causal mask. ``window`` must be an
    integer >= 1 (a window of 0 would hide every key). When n_q > n_k, the
    first n_q - n_k rows sit before the first key and are all False.
    """
    n_q, n_k = _whole_number(n_q, "n_q"), _whole_number(n_k, "n_k")
    window = _whole_number(window, "window")
    if n_q < 0 or n_k < 0:
        raise ValueError(f"sequence lengths must be >= 0, got n_q={n_q}, "
                         f"n_k={n_k}")
    if window < 1:
        raise ValueError(f"window must be >= 1 (the query sees itself), got "
                         f"window={window}")
    pos = n_k - n_q + np.arange(n_q)[:, None]  # (n_q, 1): position of query i
    key = np.arange(n_k)[None, :]  # (1, n_k)
    return (key <= pos) & (key > pos - window)  # (n_q, n_k)
