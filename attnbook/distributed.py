"""Ring attention and DeepSpeed-Ulysses on real processes (torch.distributed).

Chapter 25 computes both in NumPy, one shard after another
(:mod:`attnbook.reference.distributed`); here each rank is a process and the
shards really travel: ``isend``/``irecv`` round a ring, ``all_to_all`` for
Ulysses. The same functions run on any back end; :func:`run` starts
``world`` processes on this machine with gloo over 127.0.0.1, which needs no
GPU. On GPUs, start one process per GPU (``torchrun --nproc-per-node=8``),
call ``dist.init_process_group("nccl")``, move the tensors to
``f"cuda:{rank}"``, and call the same functions.

* :func:`ring_attention`: rank r holds queries, keys and values of its
  positions (contiguous or zigzag); the key/value shards go round the ring and
  each partial result is merged by log-sum-exp. Differentiable: its backward
  pass sends the key/value shards round again, with their gradients
  accumulating beside them, and each shard's gradient comes home after P hops.
* :func:`ulysses_attention`: all-to-all from sequence shards to head shards,
  attention, all-to-all back.

Nothing here listens beyond the loopback address, and :func:`run` ends every
process it started before it returns (a bounded timeout, then terminate).
"""

from __future__ import annotations

import math
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist

__all__ = ["ring_attention", "ulysses_attention", "run", "free_port"]


def _ring_pass(tensors, rank, world):
    """Send ``tensors`` to rank + 1 and receive the same shapes from rank - 1."""
    got = [torch.empty_like(t) for t in tensors]
    reqs = []
    for tag, (t, g) in enumerate(zip(tensors, got)):
        reqs.append(dist.isend(t.contiguous(), (rank + 1) % world, tag=tag))
        reqs.append(dist.irecv(g, (rank - 1) % world, tag=tag))
    for req in reqs:
        req.wait()
    return got


def _tile_mask(pos_q, pos_k, causal):
    return (pos_k[None, :] <= pos_q[:, None]) if causal else None


def _ring_forward(q, k, v, positions, causal):
    """o (..., n, d_v) and lse (..., n) of rank's queries over every shard."""
    rank, world = dist.get_rank(), dist.get_world_size()
    scale = 1.0 / math.sqrt(q.shape[-1])
    m = torch.full(q.shape[:-1], -math.inf, dtype=q.dtype)
    l = torch.zeros(q.shape[:-1], dtype=q.dtype)
    o = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    kv = [k, v]
    for step in range(world):
        j = (rank - step) % world
        mask = _tile_mask(positions[rank], positions[j], causal)
        if mask is None or mask.any():
            s = (q @ kv[0].transpose(-1, -2)) * scale            # (..., n, n_j)
            if mask is not None:
                s = s.masked_fill(~mask, -math.inf)
            m_new = torch.maximum(m, s.amax(-1))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe[..., None])
            alpha = torch.exp(m - safe)
            l = alpha * l + p.sum(-1)
            o = alpha[..., None] * o + p @ kv[1]
            m = m_new
        if step < world - 1:
            kv = _ring_pass(kv, rank, world)
    return o / l[..., None], m + torch.log(l)


class _RingAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, positions, causal):
        o, lse = _ring_forward(q, k, v, positions, causal)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.positions, ctx.causal = positions, causal
        return o

    @staticmethod
    def backward(ctx, d_o):
        q, k, v, o, lse = ctx.saved_tensors
        rank, world = dist.get_rank(), dist.get_world_size()
        scale = 1.0 / math.sqrt(q.shape[-1])
        delta = (d_o * o).sum(-1)                                 # (..., n)
        dq = torch.zeros_like(q)
        moving = [k, v, torch.zeros_like(k), torch.zeros_like(v)]  # + dk, dv
        for step in range(world):
            j = (rank - step) % world
            kj, vj, dkj, dvj = moving
            mask = _tile_mask(ctx.positions[rank], ctx.positions[j], ctx.causal)
            if mask is None or mask.any():
                s = (q @ kj.transpose(-1, -2)) * scale
                if mask is not None:
                    s = s.masked_fill(~mask, -math.inf)
                p = torch.exp(s - lse[..., None])                 # final weights
                dvj = dvj + p.transpose(-1, -2) @ d_o
                ds = p * (d_o @ vj.transpose(-1, -2) - delta[..., None])
                dq = dq + ds @ kj * scale
                dkj = dkj + ds.transpose(-1, -2) @ q * scale
            # P hops in all: the last one brings each shard's gradient home
            moving = _ring_pass([kj, vj, dkj, dvj], rank, world)
        return dq, moving[2], moving[3], None, None


def ring_attention(q, k, v, *, causal=False, zigzag=False):
    """This rank's share of ring attention over the whole group.

    q, k, v (..., n, d): the tokens this rank holds (``n = N / P``, at the
    positions ``reference.shard_positions(N, P, zigzag=zigzag)[rank]``).
    Returns this rank's output (..., n, d_v); gradients flow to q, k, v.
    """
    world = dist.get_world_size()
    from .reference.distributed import shard_positions
    positions = [torch.as_tensor(p) for p in
                 shard_positions(q.shape[-2] * world, world, zigzag=zigzag)]
    return _RingAttention.apply(q, k, v, positions, causal)


def _all_to_all(x, split_dim, cat_dim):
    """Split ``x`` into P pieces along ``split_dim``, send piece p to rank p,
    and concatenate what arrives along ``cat_dim`` (in rank order)."""
    world = dist.get_world_size()
    send = [t.contiguous() for t in x.chunk(world, dim=split_dim)]
    recv = [torch.empty_like(send[0]) for _ in range(world)]
    dist.all_to_all(recv, send)
    return torch.cat(recv, dim=cat_dim)


def ulysses_attention(q, k, v, *, causal=False):
    """This rank's share of DeepSpeed-Ulysses attention.

    q, k, v (H, n, d): every head, this rank's contiguous n = N / P tokens.
    All-to-all 1 gives (H / P, N, d): this rank's heads, every token;
    ordinary attention; all-to-all 2 gives back (H, n, d_v).
    """
    qh, kh, vh = (_all_to_all(t, 0, 1) for t in (q, k, v))      # (H/P, N, d)
    o = torch.nn.functional.scaled_dot_product_attention(qh, kh, vh,
                                                         is_causal=causal)
    return _all_to_all(o, 1, 0)                                  # (H, n, d_v)


# --- starting processes on this machine ------------------------------------

def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, job, args, out_dir):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    import datetime
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    try:
        result = job(rank, world, *args)
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run(job, world, *args, timeout=60.0, attempts=2):
    """Run ``job(rank, world, *args)`` on ``world`` new processes (gloo over
    127.0.0.1) and return the list of what each returned, by rank.

    ``job`` must be importable (a module-level function). Bounded: after
    ``timeout`` seconds every process still alive is terminated and
    TimeoutError raised. A failed start (the free port taken by another
    program between its choice and its use) is tried again on a new port, up
    to ``attempts`` times; a job that fails raises here.
    """
    for attempt in range(attempts):
        try:
            return _run_once(job, world, args, timeout)
        except TimeoutError:
            raise
        except Exception as exc:
            if attempt == attempts - 1 or "address already in use" not in \
                    str(exc).lower():
                raise


def _run_once(job, world, args, timeout):
    import multiprocessing

    import torch.multiprocessing as mp

    # forkserver: one server process imports torch once; each rank is then a
    # fork of it (fast), not of this process (which may hold threads)
    multiprocessing.set_forkserver_preload(["torch", __name__])
    with tempfile.TemporaryDirectory() as out_dir:
        port = free_port()
        ctx = mp.start_processes(_worker, args=(world, port, job, args, out_dir),
                                 nprocs=world, join=False,
                                 start_method="forkserver")
        deadline = time.monotonic() + timeout
        try:
            while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the {world} processes did not end "
                                       f"within {timeout} s")
        finally:
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.terminate()
                    proc.join(5)
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt"))
                for r in range(world)]


def demo_job(rank, world, n, heads, d, causal, seed=0):
    """One rank of the demonstration: ring attention (contiguous and zigzag)
    forward and backward, and Ulysses, on the seeded full q, k, v (float64),
    each rank cutting out its own tokens. Returns this rank's outputs and
    gradients and the seconds its ring steps took."""
    from .reference.distributed import shard_positions
    g = torch.Generator().manual_seed(seed)
    q, k, v, d_o = (torch.randn(heads, n, d, generator=g, dtype=torch.float64)
                    for _ in range(4))
    result = {}
    for zigzag in (False, True):
        pos = torch.as_tensor(shard_positions(n, world, zigzag=zigzag)[rank])
        ql, kl, vl = (t[:, pos].clone().requires_grad_() for t in (q, k, v))
        start = time.perf_counter()
        o = ring_attention(ql, kl, vl, causal=causal, zigzag=zigzag)
        o.backward(d_o[:, pos])
        key = "zigzag" if zigzag else "ring"
        result[key] = (pos, o.detach(), ql.grad, kl.grad, vl.grad,
                       time.perf_counter() - start)
    pos = torch.as_tensor(shard_positions(n, world)[rank])
    result["ulysses"] = (pos, ulysses_attention(q[:, pos], k[:, pos], v[:, pos],
                                                causal=causal))
    return result


def demo(world=4, n=32, heads=4, d=8, causal=True, seed=0, timeout=60.0):
    """Run :func:`demo_job` on ``world`` processes and put the shards back
    together: a dict with the full outputs and gradients of each method,
    the one-process reference (autograd through plain attention) and the
    largest differences."""
    results = run(demo_job, world, n, heads, d, causal, seed, timeout=timeout)
    g = torch.Generator().manual_seed(seed)
    q, k, v, d_o = (torch.randn(heads, n, d, generator=g, dtype=torch.float64)
                    for _ in range(4))
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    o.backward(d_o)
    want = {"o": o.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}
    out = {"reference": want, "diff": {}, "seconds": {}}
    for key in ("ring", "zigzag"):
        full = {name: torch.zeros_like(want[name]) for name in want}
        for r in results:
            pos, *parts, secs = r[key]
            for name, part in zip(("o", "dq", "dk", "dv"), parts):
                full[name][:, pos] = part
        out[key] = full
        out["diff"][key] = {name: float((full[name] - want[name]).abs().max())
                            for name in want}
        out["seconds"][key] = [r[key][-1] for r in results]
    uly = torch.zeros_like(want["o"])
    for r in results:
        pos, part = r["ulysses"]
        uly[:, pos] = part
    out["ulysses"] = {"o": uly}
    out["diff"]["ulysses"] = {"o": float((uly - want["o"]).abs().max())}
    return out
