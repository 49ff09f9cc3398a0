"""Checkers of Part IV (chapter 10, pages 10b and 10c): attention written in
PyTorch, its output, weights and gradients; the 3-D ``attn_mask`` of
``nn.MultiheadAttention``. They import torch only when called, so this module
imports without it."""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import (Case, Mistake, Verdict, _as_number_array, _quiet, _report, _say,
                        _split_result, _to_numpy, run_cases)
from ._wrong import HINT_AXIS, HINT_DV, HINT_NO_SCALE, HINT_POLARITY, HINT_TOKENS

__all__ = ['check_torch_attention', 'check_mha_attn_mask']


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
    # the check needs them, for this call only. F.scaled_dot_product_attention
    # runs as PyTorch before 2.5 ran it (nan for a fully masked row), so that an
    # answer whose result depends on the version fails on every version.
    mode = _as_in_old_torch()
    with torch.inference_mode(False), torch.enable_grad(), mode:
        parts = _call_torch_grad(fn, case)
    parts[CALLED_SDPA] = mode.called  # not a part that is compared
    return parts


CALLED_SDPA = "called F.scaled_dot_product_attention"


def _sdpa_before_2_5(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                     scale=None, enable_gqa=False):
    """F.scaled_dot_product_attention as PyTorch before 2.5 computed it on the CPU: a
    fully masked row comes out nan (the chapter's warning). Dropout is ignored."""
    import torch

    s = query @ key.transpose(-2, -1)
    s = s * (1 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        n_q, n_k = s.shape[-2:]
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask
    return torch.softmax(s, dim=-1) @ value


def _as_in_old_torch():
    """A TorchFunctionMode in which F.scaled_dot_product_attention runs as PyTorch
    before 2.5 did; ``mode.called`` says whether it was called."""
    import torch
    from torch.overrides import TorchFunctionMode

    class OldSdpa(TorchFunctionMode):
        called = False

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func is torch.nn.functional.scaled_dot_product_attention:
                self.called = True
                return _sdpa_before_2_5(*args, **kwargs)
            return func(*args, **kwargs)

    return OldSdpa()


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
    # query 0's allowed scores are -2.4e9 and -2.4e9 + 0.5, below -1e9; query 1 sees
    # nothing: -1e9 in place of -inf and unzeroed weights give different numbers
    # the hidden key 2 scores -4.8e9 for query 0: weights multiplied by the mask
    # after the softmax come out right there, and are told apart from -1e9
    q_low = np.array([[[-48000.0, 1.0, 0.0, 0.0], [0.0, -1.0, 2.0, 0.0],
                       [0.0, 0.2, -0.5, 1.0]]])                            # (1, 3, 4)
    k_low = np.array([[[1e5, 0.0, 0.0, 0.0], [1e5, 1.0, 0.0, 0.0],
                       [2e5, 0.0, 1.0, 0.0]]])                             # (1, 3, 4)
    v_low = np.array([[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]])                # (1, 3, 2)
    m_low = np.array([[True, True, False], [False, False, False],
                      [True, True, True]])                                 # (Nq, Nk)
    cases = [
        ("no mask: 3 queries, 5 keys, dk = 4, dv = 6", (q, k, v, None)),
        ("a padding mask (True = may attend) hiding the last 2 keys of sequence 2",
         (q, k, v, pad)),
        ("a causal mask on 2 heads of 4 tokens", (x, x.copy(), x.copy(), causal)),
        ("query 0's allowed scores are about -2.4e9 (below -1e9) and query 1 has "
         "every key masked", (q_low, k_low, v_low, m_low)),
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


HINT_SDPA = ("you called F.scaled_dot_product_attention, and this check runs it as "
             "PyTorch before 2.5 did: a fully masked row comes out nan (2.5 and later "
             "give zeros on the CPU). The exercise asks you to handle that row "
             "yourself: give it finite scores before the softmax, zero weights after")
HINT_NOT_ZEROED = ("the fully masked row's scores were made finite, but its weights "
                   "were never set to zero: it gets equal weights on every key (the "
                   "mean of the values) instead of zeros. Zero those rows after the "
                   "softmax")
HINT_1E9 = ("masked with a large finite number (-1e9) instead of -inf: a query whose "
            "allowed scores are below -1e9 then puts its weight on the hidden keys, "
            "and a fully masked row gets equal weights instead of zeros")

HINT_TIMES_MASK = ("the weights were multiplied by the mask after the softmax, so a "
                   "row's remaining weights no longer sum to 1: hide the scores (-inf) "
                   "before the softmax instead")


def _torch_mistakes():
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
            elif empty in ("zeros", "finite") and mask is not None:
                rows = ~(mask if not invert else ~mask).any(dim=-1, keepdim=True)
                w = torch.softmax(s.masked_fill(rows, 0.0), dim=axis)
                if empty == "zeros":
                    w = w.masked_fill(rows, 0.0)
            else:
                w = torch.softmax(s, dim=axis)
            return w @ v, w
        return f

    def times_mask(q, k, v, mask=None):
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
        if mask is not None:
            w = w * mask
        return w @ v, w

    def sdpa(invert=False):
        def f(q, k, v, mask=None):
            m = None if mask is None else (~mask if invert else mask)
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m)
            return o
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
        Mistake(HINT_NOT_ZEROED, make(empty="finite")),
        Mistake(HINT_1E9, make(fill=-1e9, empty="none")),
        Mistake(HINT_1E9, make(fill=-1e9, empty="zeros")),
        Mistake(HINT_POLARITY + " (nn.MultiheadAttention's polarity)",
                make(invert=True)),
        Mistake(HINT_NO_SCALE, make(scale=lambda q, k, v: 1.0)),
        Mistake(HINT_DV, make(scale=lambda q, k, v: v.shape[-1])),
        Mistake(HINT_TOKENS, make(scale=lambda q, k, v: k.shape[-2])),
        Mistake(HINT_AXIS, make(axis=-2)),
        Mistake(HINT_TIMES_MASK, times_mask),
    ], [
        Mistake(HINT_SDPA, sdpa()),
        Mistake(HINT_SDPA + "; and " + HINT_POLARITY, sdpa(invert=True)),
    ]


def _calls_sdpa(fn, cases) -> bool:
    """True when ``fn`` calls F.scaled_dot_product_attention on one of the cases."""
    for case in cases:
        try:
            if _quiet(_call_torch, fn, case).get(CALLED_SDPA):
                return True
        except Exception:  # run_cases reports it
            continue
    return False


def check_torch_attention(fn: Callable) -> Verdict:
    """Check a learner's PyTorch ``attention(q, k, v, mask)``: mask True = may attend;
    a fully masked query gets zero weights and a zero output, and the backward pass
    stays finite. Returns the output, or ``(output, weights)`` (weights checked);
    the gradients of sum(output * g) with respect to q, k and v are checked too."""
    cases = torch_attention_cases()
    own, with_sdpa = _torch_mistakes()
    # an answer built on PyTorch's function is told about that function only
    mistakes = with_sdpa if _calls_sdpa(fn, cases) else own
    return run_cases(fn, cases, "check_torch_attention", rtol=1e-5, atol=1e-6,
                     call=_call_torch, mistakes=mistakes)
# --- the 3-D attn_mask of nn.MultiheadAttention (10b) ---

HINT_MHA_NOT_NEGATED = ("True must mean 'ignore' for nn.MultiheadAttention: negate the "
                        "book's mask (~keep) before copying it")
HINT_MHA_REPEAT = ("repeat(NH, 1, 1) puts the sequences in turn (0, 1, 0, 1, ...), so "
                   "head 1 of sequence 0 gets sequence 1's mask; entry b*NH + h must be "
                   "sequence b: use repeat_interleave(NH, dim=0)")
HINT_MHA_NO_COPY = ("one mask per sequence, (B, Nq, Nk); nn.MultiheadAttention wants one "
                    "per sequence and head, (B*NH, Nq, Nk): repeat_interleave(NH, dim=0)")
HINT_MHA_4D = ("(B, NH, Nq, Nk) is the right content, but nn.MultiheadAttention takes a "
               "3-D mask: reshape it to (B*NH, Nq, Nk)")
HINT_MHA_AXIS = ("copied along the wrong axis: the copies go on axis 0, giving "
                 "(B*NH, Nq, Nk), not along the queries or keys")


def mha_attn_mask_cases() -> list[Case]:
    import torch

    rng = np.random.default_rng(21)

    def keep(b, n_q, n_k):
        m = rng.random((b, n_q, n_k)) < 0.6
        m[..., 0] = True  # every query may see key 0
        return m

    causal_pad = ref.causal_mask(4) & ref.padding_mask(np.array([2, 4]), 4)  # (2, 4, 4)
    specs = [
        ("2 sequences of 4 tokens (causal, lengths 2 and 4) under 2 heads",
         causal_pad, 2),
        ("3 sequences, 3 queries against 5 keys, under 2 heads", keep(3, 3, 5), 2),
        ("2 sequences under 1 head: the mask is only negated", keep(2, 3, 3), 1),
        ("2 sequences of 4 tokens under 3 heads", keep(2, 4, 4), 3),
    ]
    out = []
    for label, m, nh in specs:
        t = torch.from_numpy(np.ascontiguousarray(m))
        expected = (~t).repeat_interleave(nh, dim=0).numpy()
        out.append(Case(f"{label}: keep {m.shape} -> {expected.shape}", (t, nh), expected))
    return out


def _mha_mask_mistakes():
    def neg(m):
        return ~m

    return [
        Mistake(HINT_MHA_NOT_NEGATED, lambda m, nh: m.repeat_interleave(nh, dim=0)),
        Mistake(HINT_MHA_REPEAT, lambda m, nh: neg(m).repeat(nh, 1, 1)),
        Mistake(HINT_MHA_REPEAT + "; " + HINT_MHA_NOT_NEGATED,
                lambda m, nh: m.repeat(nh, 1, 1)),
        Mistake(HINT_MHA_NO_COPY, lambda m, nh: neg(m)),
        Mistake(HINT_MHA_4D, lambda m, nh: neg(m)[:, None].expand(-1, nh, -1, -1)),
        Mistake(HINT_MHA_AXIS, lambda m, nh: neg(m).repeat_interleave(nh, dim=1)),
        Mistake(HINT_MHA_AXIS, lambda m, nh: neg(m).repeat_interleave(nh, dim=2)),
    ]


def _call_mha_mask(fn, case):
    m, nh = case.args
    got = fn(m.clone(), nh)
    return {"output": _to_numpy(got)}


def check_mha_attn_mask(fn: Callable) -> Verdict:
    """Check ``fn(keep, n_heads)``: the book's (B, Nq, Nk) mask, True = may attend, as
    nn.MultiheadAttention's 3-D attn_mask, (B*NH, Nq, Nk) with True = ignore."""
    cases = mha_attn_mask_cases()
    name = "check_mha_attn_mask"
    try:
        got = _quiet(_call_mha_mask, fn, cases[0])["output"]
    except Exception:
        got = None  # run_cases reports it
    arr = _as_number_array(got)
    if arr is not None and arr.dtype != bool and arr.shape == cases[0].expected.shape:
        _report(name, 1, len(cases), cases[0].label)
        kind = ("an additive 0 / -inf mask" if np.isneginf(arr).any()
                else f"of dtype {arr.dtype}")
        _say(f"your mask is {kind}. nn.MultiheadAttention accepts float masks "
             "too, but this exercise asks for the boolean one, True = ignore "
             "(a float 0 / -inf mask would be 0 where a query may look)", 4, 4)
        return Verdict(False, name)
    return run_cases(fn, cases, name, call=_call_mha_mask, want_bool=True,
                     mistakes=_mha_mask_mistakes())
