"""The PyTorch chapter's attention code, kept here so that tests can import it.

This module needs PyTorch (``make torch``); nothing else in :mod:`attnbook`
imports it, so the NumPy chapters run without it. The chapter "From NumPy to
PyTorch" writes each of these functions line by line, next to its NumPy twin in
:mod:`attnbook.reference`, and checks that its own definitions agree with the
ones here; ``tests/against/test_torch_equivalence.py`` compares them with the answer
key, ``torch.nn.functional.scaled_dot_product_attention`` and
``torch.nn.MultiheadAttention`` on random shapes.

Conventions are the answer key's: masks are boolean with **True = may attend**,
and a query whose every key is masked raises ``ValueError`` by default, or gets
zero weights and a zero output with ``fully_masked="zeros"``. The mask of
:class:`MultiHeadSelfAttention` follows the answer key's one rule,
:func:`attnbook.reference.mask_for_heads`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from . import reference as ref
from .validate import _check_mask_shape

__all__ = [
    "attention",
    "split_heads",
    "merge_heads",
    "MultiHeadSelfAttention",
    "load_linear",
    "from_answer_key",
    "to_mha",
]


def attention(q, k, v, mask=None, *, fully_masked="raise"):
    """Scaled dot-product attention; returns ``(output, weights)``.

    q (..., Nq, dk), k (..., Nk, dk), v (..., Nk, dv); mask bool, True = may
    attend, broadcastable to (..., Nq, Nk).
    """
    if fully_masked not in ("raise", "zeros"):
        raise ValueError("fully_masked must be 'raise' or 'zeros',\n"
                         f"got {fully_masked!r}")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Nq, Nk)
    if mask is not None:
        if mask.dtype != torch.bool:
            raise TypeError("mask must be boolean (True = may attend),\n"
                            f"got {mask.dtype}")
        _check_mask_shape(mask.shape, scores.shape)
        scores = scores.masked_fill(~mask, float("-inf"))
        empty = torch.isneginf(scores).all(dim=-1, keepdim=True)  # (..., Nq, 1)
        if empty.any():
            if fully_masked == "raise":
                raise ValueError("a query has every key masked,\n"
                                 "so its softmax is 0/0; pass fully_masked='zeros'\n"
                                 "to give it zero weights")
            scores = scores.masked_fill(empty, 0.0)  # any finite row: replaced below
    weights = torch.softmax(scores, dim=-1)  # (..., Nq, Nk)
    if mask is not None and empty.any():
        weights = weights.masked_fill(empty, 0.0)
    return weights @ v, weights  # (..., Nq, dv), (..., Nq, Nk)


def split_heads(x, n_heads):
    """(B, N, D) -> (B, NH, N, HS): view, then swap the N and NH axes."""
    b, n, d = x.shape
    return x.view(b, n, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x):
    """(B, NH, N, HS) -> (B, N, NH*HS): the inverse of :func:`split_heads`."""
    b, nh, n, hs = x.shape
    return x.transpose(1, 2).contiguous().view(b, n, nh * hs)


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention with separate q, k, v projections.

    ``input_dim`` is the width of a token; ``hidden_dim`` the total width of
    the heads (n_heads * head size), which need not equal ``input_dim``.

    ``forward(x, mask=None, fully_masked="raise")`` takes x of shape
    (B, N, D) and a boolean mask, True = may attend, in the shapes of
    :func:`attnbook.reference.mask_for_heads`: one head's (N, N), (B, N, N),
    (B, 1, N), the same for every head (never read as one mask per head,
    even when B == NH); or the multi-head (B, 1, 1, N), (B, 1, N, N),
    (B, NH, N, N). It returns the output (B, N, input_dim) and the weights
    (B, NH, N, N).
    """

    def __init__(self, input_dim, hidden_dim, n_heads, bias=False):
        super().__init__()
        if hidden_dim % n_heads:
            raise ValueError(f"hidden_dim {hidden_dim} is not divisible\n"
                             f"by n_heads {n_heads}")
        self.n_heads = n_heads
        self.query = nn.Linear(input_dim, hidden_dim, bias=bias)
        self.key = nn.Linear(input_dim, hidden_dim, bias=bias)
        self.value = nn.Linear(input_dim, hidden_dim, bias=bias)
        self.out = nn.Linear(hidden_dim, input_dim, bias=bias)

    def forward(self, x, mask=None, fully_masked="raise"):
        if x.ndim != 3:
            raise ValueError(f"x must be (B, N, D), got shape {tuple(x.shape)}")
        if mask is not None:
            if mask.dtype != torch.bool:
                raise TypeError("mask must be boolean (True = may attend),\n"
                                f"got {mask.dtype}")
            n = x.shape[1]
            mask = ref.mask_for_heads(mask, x.shape[:1], self.n_heads, n, n)
        q = split_heads(self.query(x), self.n_heads)  # (B, NH, N, HS)
        k = split_heads(self.key(x), self.n_heads)    # (B, NH, N, HS)
        v = split_heads(self.value(x), self.n_heads)  # (B, NH, N, HS)
        out, weights = attention(q, k, v, mask, fully_masked=fully_masked)  # (B, NH, N, HS)
        return self.out(merge_heads(out)), weights  # (B, N, D), (B, NH, N, N)


@torch.no_grad()
def load_linear(linear, w):
    """Load a NumPy weight ``w`` of shape (in, out), used as ``x @ w``, into an nn.Linear.

    nn.Linear stores its weight as (out, in) and computes ``x @ weight.T``, so
    it receives ``w.T``.
    """
    w = torch.as_tensor(np.asarray(w), dtype=linear.weight.dtype)
    if tuple(w.T.shape) != tuple(linear.weight.shape):
        raise ValueError(f"weight {tuple(w.shape)} (in, out) does not fit\n"
                         "nn.Linear with weight "
                         f"{tuple(linear.weight.shape)} (out, in)")
    linear.weight.copy_(w.T)
    return linear


def from_answer_key(w_qkv, w_o, n_heads, dtype=torch.float64):
    """A :class:`MultiHeadSelfAttention` holding the answer key's weights.

    w_qkv (D, 3D) is [W_q | W_k | W_v]; w_o (D, D).
    """
    d = w_o.shape[0]
    m = MultiHeadSelfAttention(d, d, n_heads).to(dtype)
    w_q, w_k, w_v = np.split(np.asarray(w_qkv), 3, axis=-1)  # 3 x (D, D)
    for lin, w in ((m.query, w_q), (m.key, w_k), (m.value, w_v), (m.out, w_o)):
        load_linear(lin, w)
    return m


@torch.no_grad()
def to_mha(w_qkv, w_o, n_heads, dtype=torch.float64):
    """An ``nn.MultiheadAttention`` (batch_first, no biases) holding the answer key's weights.

    in_proj_weight (3D, D) stacks the q, k and v weights as (out, in) blocks,
    which is exactly ``w_qkv.T``; out_proj.weight is ``w_o.T``.
    """
    d = w_o.shape[0]
    mha = nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True, dtype=dtype)
    mha.in_proj_weight.copy_(torch.as_tensor(np.asarray(w_qkv).T))
    mha.out_proj.weight.copy_(torch.as_tensor(np.asarray(w_o).T))
    return mha
