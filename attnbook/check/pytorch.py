"""Checker of Part IV (chapter 10): attention written in PyTorch, its output,
weights and gradients. It imports torch only when called, so this module
imports without it."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, _split_result, _to_numpy, run_cases
from ._wrong import HINT_AXIS, HINT_DV, HINT_NO_SCALE, HINT_POLARITY

__all__ = ['check_torch_attention']


# --- PyTorch chapter ---
# These checkers import torch only when called, so this module still imports without it.

GRAD_NAMES = ("gradient of q", "gradient of k", "gradient of v")


def _call_torch(fn, case):
    """Call a learner's torch function on float64 tensors; report output, weights, gradients.

    The gradients are those of sum(output * g) for a fixed random g, with
    respect to q, k and v: a fully masked row must not make them nan.
    """
    import torch

    # the chapter may have turned gradients off (torch.set_grad_enabled(False)):
    # the check needs them, for this call only
    with torch.inference_mode(False), torch.enable_grad():
        return _call_torch_grad(fn, case)


def _call_torch_grad(fn, case):
    import torch

    tensors = []
    for a in case.args:
        if isinstance(a, np.ndarray) and a.dtype != bool:
            tensors.append(torch.tensor(a, dtype=torch.float64, requires_grad=True))
        elif isinstance(a, np.ndarray):
            tensors.append(torch.from_numpy(a.copy()))
        else:
            tensors.append(a)
    got = fn(*tensors, **case.kwargs)
    out, weights = _split_result(got, np.shape(case.expected))
    parts = {"output": _to_numpy(out), "weights": _to_numpy(weights)}
    leaves = [t for t in tensors[:3] if isinstance(t, torch.Tensor)]
    if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == case.expected.shape:
        g = torch.from_numpy(np.random.default_rng(0).normal(size=out.shape))
        grads = torch.autograd.grad((out * g.to(out.dtype)).sum(), leaves, allow_unused=True)
        for name, grad in zip(GRAD_NAMES, grads):
            parts[name] = None if grad is None else grad.detach().numpy()
    return parts


def torch_attention_cases() -> list[Case]:
    import torch

    from .. import torch_attention as ta

    rng = np.random.default_rng(10)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))
    pad = ref.padding_mask(np.array([5, 3]), 5)  # (2, 1, 5): the second sequence has 2 padded keys
    causal = ref.causal_mask(4)
    x = rng.normal(size=(1, 2, 4, 3))  # (B, NH, N, HS)
    one_empty = np.ones((3, 5), dtype=bool)
    one_empty[1] = False  # query 1 may attend to nothing
    zero_len = ref.padding_mask(np.array([0, 2]), 5)  # a sequence that is all padding
    cases = [
        ("no mask: 3 queries, 5 keys, dk = 4, dv = 6", (q, k, v, None)),
        ("a padding mask (True = may attend) hiding the last 2 keys of sequence 2",
         (q, k, v, pad)),
        ("a causal mask on 2 heads of 4 tokens", (x, x.copy(), x.copy(), causal)),
        ("query 1 has every key masked: its weights and output must be 0, not nan, "
         "and so must the gradients flowing back from it", (q, k, v, one_empty)),
        ("a sequence that is all padding: every one of its rows is fully masked",
         (q, k, v, zero_len)),
    ]
    out = []
    for label, args in cases:
        o, w = ref.scaled_dot_product_attention(*args, fully_masked="zeros")
        expected = Case(label, args, o, weights=w)
        parts = _call_torch(lambda *a: ta.attention(*a, fully_masked="zeros"), expected)
        expected.extra = {name: parts[name] for name in GRAD_NAMES}
        out.append(expected)
    del torch
    return out


def _torch_mistakes():
    import math

    import torch

    def make(fill=float("-inf"), empty="zeros", scale=None, axis=-1, invert=False,
             additive=False):
        def f(q, k, v, mask=None):
            d = q.shape[-1] if scale is None else scale(q, k, v)
            s = q @ k.transpose(-2, -1) / math.sqrt(d)
            if mask is not None and additive:
                s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, fill)
            elif mask is not None:
                s = s.masked_fill(mask if invert else ~mask, fill)
            if empty == "nan_to_num":
                w = torch.nan_to_num(torch.softmax(s, dim=axis))
            elif empty == "zeros" and mask is not None:
                rows = ~(mask if not invert else ~mask).any(dim=-1, keepdim=True)
                w = torch.softmax(s.masked_fill(rows, 0.0), dim=axis).masked_fill(rows, 0.0)
            else:
                w = torch.softmax(s, dim=axis)
            return w @ v, w
        return f

    return [
        Mistake("nan_to_num (or a where) after the softmax fixes the forward pass "
                "only: with an additive -inf mask, the gradient of a fully masked "
                "row is still nan. Give such a row finite scores (e.g. 0) before "
                "the softmax, then zero its weights",
                make(empty="nan_to_num", additive=True)),
        Mistake("a fully masked row is not handled: its softmax is 0/0 = nan. "
                "Find the rows with no allowed key and give them zero weights",
                make(empty="none")),
        Mistake("masked with a large finite number instead of -inf: a fully "
                "masked row then gets equal weights on every key instead of "
                "zeros", make(fill=-1e9, empty="none")),
        Mistake(HINT_POLARITY + " (nn.MultiheadAttention's polarity)",
                make(invert=True)),
        Mistake(HINT_NO_SCALE, make(scale=lambda q, k, v: 1.0)),
        Mistake(HINT_DV, make(scale=lambda q, k, v: v.shape[-1])),
        Mistake(HINT_AXIS, make(axis=-2)),
    ]


def check_torch_attention(fn: Callable) -> Verdict:
    """Check a learner's PyTorch ``attention(q, k, v, mask)``: mask True = may attend;
    a fully masked query gets zero weights and a zero output, and the backward pass
    stays finite. Returns the output, or ``(output, weights)`` (weights checked);
    the gradients of sum(output * g) with respect to q, k and v are checked too."""
    return run_cases(fn, torch_attention_cases(), "check_torch_attention", rtol=1e-5,
                     atol=1e-6, call=_call_torch, mistakes=_torch_mistakes())
