"""Chapter 25 on real processes: ring attention (contiguous and zigzag, causal and not)
forward and backward, and DeepSpeed-Ulysses, on 2 and 4 processes with torch.distributed
(gloo over 127.0.0.1), against one-process attention and its autograd gradients (float64).
A ring whose causal mask ignores the shards' true positions fails the same comparison.

Each run starts its processes with attnbook.distributed.run: bounded (a timeout ends every
process still alive), loopback only; the processes end by themselves.
"""

import time

import numpy as np
import pytest

from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", distributed="attnbook.distributed")


@pytest.mark.parametrize("world,n,causal", [(2, 16, False), (4, 32, True)])
def test_ring_and_ulysses_equal_one_process(world, n, causal):
    start = time.monotonic()
    out = distributed.demo(world=world, n=n, heads=4, d=8, causal=causal, timeout=120)
    for method, diffs in out["diff"].items():
        assert max(diffs.values()) < 1e-12, (method, diffs)
    assert set(out["diff"]["ring"]) == {"o", "dq", "dk", "dv"}   # backward too
    print(f"{world} processes, N = {n}: {time.monotonic() - start:.1f} s")


def local_mask_job(rank, world, n, heads, d):
    """A ring whose causal mask treats every tile as if its shard began at 0."""
    import torch
    import torch.distributed as dist

    from attnbook import distributed as D
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(heads, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    c = n // world
    local = torch.arange(c)
    positions = [local for _ in range(world)]     # the flip: every shard starts at 0
    sl = slice(rank * c, (rank + 1) * c)
    o, _ = D._ring_forward(q[:, sl], k[:, sl], v[:, sl], positions, True)
    dist.barrier()
    return o


def test_a_ring_with_per_shard_causal_masks_is_wrong():
    world, n, heads, d = 2, 16, 2, 4
    parts = distributed.run(local_mask_job, world, n, heads, d, timeout=120)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(heads, n, d, generator=g, dtype=torch.float64) for _ in range(3))
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    got = torch.cat(parts, dim=1)
    assert not torch.allclose(got, want)


def test_run_is_bounded():
    with pytest.raises(TimeoutError):
        distributed.run(sleeping_job, 2, timeout=3)


def sleeping_job(rank, world):
    time.sleep(60)
