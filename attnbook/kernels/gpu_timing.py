"""Timing attention on a CUDA GPU (page 17e, last section): the Triton kernel of
this book, torch's sdpa restricted to its FlashAttention back end, and the naive
form, as TFLOP/s and as a fraction of the device's own matrix multiply (the
ceiling of chapter 18, measured on the GPU in the same run).

Nothing here runs without a GPU: :func:`attention_timings` raises, and the
page prints why it times nothing. No timing is stored in the book.
"""

from __future__ import annotations

__all__ = ["attention_timings", "format_timings"]

BACKWARD_FACTOR = 2.5   # backward FLOPs / forward FLOPs, counted as in chapter 18


def attention_timings(sizes=(1024, 2048, 4096, 8192, 16384), *, batch=1, heads=16,
                      head_dim=64, dtype=None, causal=False) -> list[dict]:
    """One dict per (N, version): forward and forward + backward, in TFLOP/s and
    as a fraction of the ceiling (``torch.matmul`` at the size of Q K^T). Times
    are medians of ``triton.testing.do_bench``'s runs; the ceiling's is the
    fastest run, as in chapter 18.

    FLOPs are the algorithm's, the same for every version: 4 B H N^2 d for the
    forward pass (half with ``causal``), 2.5 times that for the backward pass,
    whatever each implementation recomputes. The naive form is skipped when its
    (B, H, N, N) scores and weights would not fit in half the free memory, and a
    version that raises (sdpa's FlashAttention back end on a GPU older than
    Ampere, say) is reported as skipped. The dtype is bfloat16 from Ampere on,
    float16 before.
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    from . import flash_attention_triton

    if not torch.cuda.is_available():
        raise RuntimeError("attention_timings needs a CUDA GPU; the interpreter "
                           "is for correctness only")
    if dtype is None:   # bfloat16 from Ampere (compute capability 8.0) on
        new = torch.cuda.get_device_capability() >= (8, 0)
        dtype = torch.bfloat16 if new else torch.float16
    free = torch.cuda.mem_get_info()[0]

    def naive(q, k, v):
        s = q @ k.transpose(-2, -1) / head_dim**0.5          # (B, H, N, N)
        if causal:
            n = s.shape[-1]
            s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool,
                                          device=s.device).tril(), float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(q.dtype) @ v

    def sdpa_flash(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    def triton_kernel(q, k, v):
        return flash_attention_triton(q, k, v, causal=causal)

    versions = {"Triton kernel (this book)": triton_kernel,
                "sdpa, flash back end": sdpa_flash, "naive": naive}
    rows = []
    for n in sizes:
        q, k, v = (torch.randn(batch, heads, n, head_dim, device="cuda", dtype=dtype,
                               requires_grad=True) for _ in range(3))
        d_out = torch.randn_like(q)
        flops = 4 * batch * heads * n * n * head_dim * (0.5 if causal else 1.0)
        a = q.detach().reshape(batch * heads, n, head_dim)
        b = k.detach().reshape(batch * heads, n, head_dim).transpose(1, 2)
        matmul_flops = 2 * batch * heads * n * n * head_dim
        ceiling = matmul_flops / (do_bench(lambda: a @ b, return_mode="min") * 1e-3)
        for name, fn in versions.items():
            if name == "naive" and 3 * batch * heads * n * n * 4 > free / 2:
                rows.append({"N": n, "version": name, "skipped": "out of memory"})
                continue
            try:
                fwd = do_bench(lambda: fn(q, k, v), return_mode="median") * 1e-3
            except RuntimeError as exc:   # e.g. no FlashAttention back end here
                rows.append({"N": n, "version": name,
                             "skipped": str(exc).split("\n")[0][:30]})
                continue
            both = do_bench(lambda: fn(q, k, v).backward(d_out),
                            grad_to_none=(q, k, v), return_mode="median") * 1e-3
            total = flops * (1 + BACKWARD_FACTOR)
            rows.append({"N": n, "version": name, "forward TFLOP/s": flops / fwd / 1e12,
                         "forward / ceiling": flops / fwd / ceiling,
                         "fwd+bwd TFLOP/s": total / both / 1e12,
                         "fwd+bwd / ceiling": total / both / ceiling,
                         "ceiling TFLOP/s": ceiling / 1e12})
    return rows


def format_timings(rows) -> str:
    """The rows as a table of at most 79 columns."""
    lines = [f"{'N':>6}  {'version':<26}{'fwd TFLOP/s':>12}{'%':>5}"
             f"{'fwd+bwd':>10}{'%':>5}{'ceiling':>9}"]
    for r in rows:
        if "skipped" in r:
            lines.append(f"{r['N']:>6}  {r['version']:<26}  skipped ({r['skipped']})")
            continue
        lines.append(f"{r['N']:>6}  {r['version']:<26}{r['forward TFLOP/s']:>12.1f}"
                     f"{r['forward / ceiling']:>5.0%}{r['fwd+bwd TFLOP/s']:>10.1f}"
                     f"{r['fwd+bwd / ceiling']:>5.0%}{r['ceiling TFLOP/s']:>9.1f}")
    return "\n".join(lines)
