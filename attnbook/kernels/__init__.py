"""FlashAttention as Triton kernels (pages 17d and 17e): a drop-in attention.

``flash_attention_triton(q, k, v, causal=False)`` takes torch tensors
(B, H, N, d) and returns the output (B, H, N, d); it is differentiable, and
its backward pass is Triton kernels too (no torch attention is called). On a
machine without a CUDA GPU the kernels run in Triton's interpreter on CPU
tensors (``TRITON_INTERPRET=1``, for correctness, not speed); with a GPU they
are compiled and run on CUDA tensors.

This module imports neither torch nor triton until a kernel is asked for, so
the package imports without them; :func:`triton_missing` says why the
kernels cannot run here, or returns None.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys

__all__ = ["flash_attention_triton", "flash_attention_forward",
           "flash_attention_backward", "load_triton", "triton_missing",
           "interpreting", "default_blocks"]


def triton_missing() -> str | None:
    """Why the Triton kernels cannot run here (a sentence), or None."""
    for name, command in (("torch", "make torch"), ("triton", "make triton")):
        if importlib.util.find_spec(name) is None:
            return (f"needs {name}, which is not installed: run `{command}` "
                    "to install it")
    return None


def load_triton():
    """``(triton, tl)``, imported after choosing interpreter or GPU.

    Without a CUDA GPU, ``TRITON_INTERPRET=1`` is set before triton is first
    imported (it must be: triton.language is built for the interpreter or not when it is
    imported), so the kernels run on CPU tensors. An explicit ``TRITON_INTERPRET`` is
    kept. If another package imported triton first without it, a clear error says so.
    """
    reason = triton_missing()
    if reason:
        raise ModuleNotFoundError(f"the Triton kernels {reason}")
    if "triton" not in sys.modules:
        import torch

        if not torch.cuda.is_available():
            os.environ.setdefault("TRITON_INTERPRET", "1")
    elif not interpreting():
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError(
                "triton was imported before TRITON_INTERPRET=1 was set, and there is no CUDA "
                "GPU: Triton interprets kernels on the CPU only when the setting comes before "
                "its first import (transformers imports triton to see whether it is there). "
                "Set TRITON_INTERPRET=1 before importing torch, transformers or triton (the "
                "book's pages do), or restart and import attnbook.kernels first.")
    import triton
    import triton.language as tl

    return triton, tl


def interpreting() -> bool:
    """True when Triton runs kernels in its interpreter (on CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def default_blocks():
    """(block_q, block_k): 64 x 64 compiled on a GPU; 32 x 32 in the interpreter,
    where each program is a step of a Python loop over numpy arrays."""
    return (32, 32) if interpreting() else (64, 64)


def _kernels():
    load_triton()
    from . import _flash_triton

    return _flash_triton


def _check(q, k, v, causal, block_q, block_k):
    """The one shape, dtype and device the kernels take, or a clear error."""
    load_triton()   # first: it decides interpreter or GPU
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch tensor, got {type(t).__name__}")
    if q.dim() != 4:
        raise ValueError(f"q must be (B, H, N, d), got {q.dim()} axes, shape {tuple(q.shape)}")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("q, k and v must have the same shape (B, H, N, d) (self-attention, "
                         f"d_v = d); got q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}")
    dtypes = (torch.float32, torch.float16, torch.bfloat16)
    if q.dtype not in dtypes or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError("q, k and v must share one dtype, float32, float16 or bfloat16; "
                        f"got {q.dtype}, {k.dtype}, {v.dtype}")
    if q.dtype == torch.bfloat16 and interpreting():
        raise TypeError("bfloat16 runs on a GPU only: Triton 3.9's interpreter gets it "
                        "wrong (measured: outputs of order 1e8); use float32 or float16 "
                        "on the CPU")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k and v must be on one device; got {q.device}, {k.device}, "
                         f"{v.device}")
    want = "cpu" if interpreting() else "cuda"
    if q.device.type != want:
        raise ValueError(
            f"q, k and v are on {q.device.type}, but Triton here runs on {want} tensors "
            + ("(TRITON_INTERPRET=1: the interpreter reads CPU memory; use .cpu())"
               if want == "cpu" else "(compiled for the GPU; use .cuda())"))
    if q.shape[-1] < 1 or q.shape[-1] > 256:
        raise ValueError(f"the head dimension d must be 1 to 256, got {q.shape[-1]}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    for name, b in (("block_q", block_q), ("block_k", block_k)):
        if not (isinstance(b, int) and b >= 16 and b & (b - 1) == 0):
            raise ValueError(f"{name} must be a power of two, at least 16 (tl.dot's "
                             f"smallest tile), got {b!r}")


def _setup(q, block_q, block_k):
    B, H, N, d = q.shape
    block_d = max(16, 1 << (d - 1).bit_length())   # d padded to a power of two
    precision = "ieee" if q.dtype.itemsize == 4 else None  # float32: no TF32
    return B * H, N, d, block_d, precision, 1.0 / math.sqrt(d)


def flash_attention_forward(q, k, v, *, causal=False, block_q=None, block_k=None):
    """The forward kernel alone: ``(o, lse)``, o (B, H, N, d) in q's dtype and the
    log-sum-exp of each query's scaled scores, lse (B, H, N) in float32."""
    import torch

    dq, dk = default_blocks()
    block_q, block_k = block_q or dq, block_k or dk
    _check(q, k, v, causal, block_q, block_k)
    kern = _kernels()
    bh, N, d, block_d, precision, scale = _setup(q, block_q, block_k)
    q, k, v = (t.contiguous() for t in (q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    if N and bh:
        grid = (triton_cdiv(N, block_q), bh)
        kern._forward[grid](q, k, v, o, lse, N, scale, D=d, BLOCK_D=block_d,
                            BLOCK_Q=block_q, BLOCK_K=block_k, CAUSAL=causal,
                            PRECISION=precision)
    return o, lse


def flash_attention_backward(q, k, v, o, lse, d_out, *, causal=False, block_q=None,
                             block_k=None):
    """The backward kernels: ``(dq, dk, dv)`` from the forward pass's o and lse."""
    import torch

    dq_, dk_ = default_blocks()
    block_q, block_k = block_q or dq_, block_k or dk_
    _check(q, k, v, causal, block_q, block_k)
    if o.shape != q.shape or d_out.shape != q.shape or lse.shape != q.shape[:-1]:
        raise ValueError(f"o and d_out must be {tuple(q.shape)} and lse "
                         f"{tuple(q.shape[:-1])}; got {tuple(o.shape)}, "
                         f"{tuple(d_out.shape)}, {tuple(lse.shape)}")
    kern = _kernels()
    bh, N, d, block_d, precision, scale = _setup(q, block_q, block_k)
    q, k, v, o, d_out = (t.contiguous() for t in (q, k, v, o, d_out.to(q.dtype)))
    lse = lse.contiguous()
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if not (N and bh):
        return dq.zero_(), dk.zero_(), dv.zero_()
    delta = torch.empty_like(lse)
    kern._row_dots[(triton_cdiv(N, block_q), bh)](
        o, d_out, delta, N, D=d, BLOCK_D=block_d, BLOCK_Q=block_q)
    common = dict(D=d, BLOCK_D=block_d, BLOCK_Q=block_q, BLOCK_K=block_k,
                  CAUSAL=causal, PRECISION=precision)
    kern._dk_dv[(triton_cdiv(N, block_k), bh)](
        q, k, v, d_out, lse, delta, dk, dv, N, scale, **common)
    kern._dq[(triton_cdiv(N, block_q), bh)](
        q, k, v, d_out, lse, delta, dq, N, scale, **common)
    return dq, dk, dv


def triton_cdiv(a: int, b: int) -> int:
    """How many blocks of b cover a: the grid's size (triton.cdiv)."""
    return -(-a // b)


_FUNCTION = None


def _autograd_function():
    """The torch.autograd.Function, defined on first use (torch is optional)."""
    global _FUNCTION
    if _FUNCTION is None:
        import torch

        class FlashAttentionTriton(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal, block_q, block_k):
                o, lse = flash_attention_forward(q, k, v, causal=causal,
                                                 block_q=block_q, block_k=block_k)
                ctx.save_for_backward(q, k, v, o, lse)
                ctx.options = dict(causal=causal, block_q=block_q, block_k=block_k)
                return o

            @staticmethod
            def backward(ctx, d_out):
                q, k, v, o, lse = ctx.saved_tensors
                dq, dk, dv = flash_attention_backward(q, k, v, o, lse, d_out,
                                                      **ctx.options)
                return dq, dk, dv, None, None, None

        _FUNCTION = FlashAttentionTriton
    return _FUNCTION


def flash_attention_triton(q, k, v, *, causal=False, block_q=None, block_k=None):
    """softmax(q k^T / sqrt(d)) v by Triton kernels, differentiable.

    q, k, v: torch tensors (B, H, N, d), one dtype (float32, float16 or
    bfloat16), on the CPU under the interpreter or on a CUDA GPU. ``causal``:
    query i sees keys 0..i. N need not be a multiple of the blocks (masks
    handle the last one); d is padded to a power of two inside the kernels.
    Returns the output (B, H, N, d); ``loss.backward()`` runs the backward
    kernels (FlashAttention-2's: D first, then dK and dV per key block and dQ
    per query block, no atomic adds).
    """
    dq, dk = default_blocks()
    block_q, block_k = block_q or dq, block_k or dk
    _check(q, k, v, causal, block_q, block_k)
    return _autograd_function().apply(q, k, v, causal, block_q, block_k)
