"""Kernels that run a learner's ``@triton.jit`` piece (pages 17d and 17e's exercises).

Each takes the learner's function as a ``tl.constexpr`` argument, calls it
inside a kernel and stores what it returned, so a checker
(:mod:`attnbook.check.triton_kernels`) compares plain tensors. Imported only
after :func:`attnbook.kernels.load_triton`.
"""

import triton
import triton.language as tl


@triton.jit
def run_load(x_ptr, out_ptr, start, n, fn: tl.constexpr, D: tl.constexpr,
             BLOCK: tl.constexpr):
    tile = fn(x_ptr, start, n, D, BLOCK)             # (BLOCK, D)
    rows, cols = tl.arange(0, BLOCK), tl.arange(0, D)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], tile)


@triton.jit
def run_update(m_ptr, l_ptr, acc_ptr, s_ptr, v_ptr, fn: tl.constexpr,
               BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    tile = r[:, None] * BLOCK + r[None, :]
    m, l = tl.load(m_ptr + r), tl.load(l_ptr + r)
    acc, s, v = tl.load(acc_ptr + tile), tl.load(s_ptr + tile), tl.load(v_ptr + tile)
    m, l, acc = fn(m, l, acc, s, v)
    tl.store(m_ptr + r, m)
    tl.store(l_ptr + r, l)
    tl.store(acc_ptr + tile, acc)


@triton.jit
def run_causal(q_ptr, k_ptr, v_ptr, o_ptr, tiles_ptr, N, scale, fn: tl.constexpr,
               D: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr):
    """A causal forward kernel whose key loop ends where the learner's fn says."""
    i = tl.program_id(0)
    rows = i * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + rows[:, None] * D + cols[None, :], mask=rows[:, None] < N,
                other=0.0)
    m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, D), tl.float32)
    tiles = i * 0                              # an int32 counter
    for j in range(0, fn(i, N, BLOCK_Q), BLOCK_K):
        keys = j + tl.arange(0, BLOCK_K)
        k = tl.load(k_ptr + keys[:, None] * D + cols[None, :], mask=keys[:, None] < N,
                    other=0.0)
        v = tl.load(v_ptr + keys[:, None] * D + cols[None, :], mask=keys[:, None] < N,
                    other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        keep = (keys[None, :] < N) & (keys[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        l = alpha * l + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
        m = m_new
        tiles += 1
    tl.store(o_ptr + rows[:, None] * D + cols[None, :], acc / l[:, None],
             mask=rows[:, None] < N)
    tl.store(tiles_ptr + i, tiles)


@triton.jit
def run_row_dots(o_ptr, do_ptr, out_ptr, fn: tl.constexpr, BLOCK: tl.constexpr,
                 D: tl.constexpr):
    rows, cols = tl.arange(0, BLOCK), tl.arange(0, D)
    tile = rows[:, None] * D + cols[None, :]
    o, do = tl.load(o_ptr + tile), tl.load(do_ptr + tile)
    tl.store(out_ptr + rows, fn(o, do))
