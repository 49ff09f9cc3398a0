"""FlashAttention-2's forward and backward kernels, in Triton (pages 17d and 17e).

Imported only by :func:`attnbook.kernels.load_triton`'s callers, after the
decision "interpreter or GPU" is made (``TRITON_INTERPRET=1`` must be set
before ``import triton``). The tensors are contiguous (B*H, N, d): one program
handles one block of rows of one (batch, head), ``tl.program_id(1)``; the
head dimension is padded to ``BLOCK_D`` (a power of two, at least 16) by the
masks of the loads, as the rows of a last block are.

Three kernels do the backward pass, without atomics: ``_row_dots`` computes
``D_i = rowsum(dO_i * O_i)``; ``_dk_dv`` keeps one key block and sweeps the
query blocks; ``_dq`` keeps one query block and sweeps the key blocks.
Each tile's weights are thus rebuilt twice (once per kernel), the price of
writing each gradient exactly once, in a fixed order.
"""

import triton
import triton.language as tl


@triton.jit
def _load_rows(ptr, start, n, D: tl.constexpr, BLOCK: tl.constexpr,
               BLOCK_D: tl.constexpr):
    """Rows start .. start + BLOCK of a row-major (n, D) matrix, zeros outside."""
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK_D)
    inside = (rows[:, None] < n) & (cols[None, :] < D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :], mask=inside, other=0.0)


@triton.jit
def _store_rows(ptr, start, n, tile, D: tl.constexpr, BLOCK: tl.constexpr,
                BLOCK_D: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, BLOCK_D)
    inside = (rows[:, None] < n) & (cols[None, :] < D)
    tl.store(ptr + rows[:, None] * D + cols[None, :],
             tile.to(ptr.dtype.element_ty), mask=inside)


@triton.jit
def _forward(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, N, scale,
             D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_Q: tl.constexpr,
             BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    i = tl.program_id(0)                       # the query block
    head = tl.program_id(1) * N * D            # where this (batch, head) starts
    rows = i * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q = _load_rows(q_ptr + head, i * BLOCK_Q, N, D, BLOCK_Q, BLOCK_D)
    m = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    l = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, BLOCK_D), tl.float32)
    end = N
    if CAUSAL:
        end = tl.minimum((i + 1) * BLOCK_Q, N)  # later key tiles: all future
    for j in range(0, end, BLOCK_K):
        keys = j + tl.arange(0, BLOCK_K)
        k = _load_rows(k_ptr + head, j, N, D, BLOCK_K, BLOCK_D)
        v = _load_rows(v_ptr + head, j, N, D, BLOCK_K, BLOCK_D)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
        keep = keys[None, :] < N
        if CAUSAL:
            keep = keep & (keys[None, :] <= rows[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        alpha = tl.exp(m - m_new)              # rescales what came before
        p = tl.exp(s - m_new[:, None])
        l = alpha * l + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v,
                                            input_precision=PRECISION)
        m = m_new
    _store_rows(o_ptr + head, i * BLOCK_Q, N, acc / l[:, None], D, BLOCK_Q, BLOCK_D)
    tl.store(lse_ptr + tl.program_id(1) * N + rows, m + tl.log(l), mask=rows < N)


@triton.jit
def _row_dots(o_ptr, do_ptr, delta_ptr, N, D: tl.constexpr, BLOCK_D: tl.constexpr,
              BLOCK_Q: tl.constexpr):
    i = tl.program_id(0)
    head = tl.program_id(1) * N * D
    rows = i * BLOCK_Q + tl.arange(0, BLOCK_Q)
    o = _load_rows(o_ptr + head, i * BLOCK_Q, N, D, BLOCK_Q, BLOCK_D)
    do = _load_rows(do_ptr + head, i * BLOCK_Q, N, D, BLOCK_Q, BLOCK_D)
    d_i = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)   # D_i = dO_i . O_i
    tl.store(delta_ptr + tl.program_id(1) * N + rows, d_i, mask=rows < N)


@triton.jit
def _weights(q, k, lse, rows, keys, N, scale, CAUSAL: tl.constexpr,
             PRECISION: tl.constexpr):
    """A tile of weights rebuilt from the log-sum-exp: exp(s - lse), 0 if masked."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * scale
    keep = (rows[:, None] < N) & (keys[None, :] < N)
    if CAUSAL:
        keep = keep & (keys[None, :] <= rows[:, None])
    return tl.where(keep, tl.exp(s - lse[:, None]), 0.0)


@triton.jit
def _dk_dv(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dk_ptr, dv_ptr, N, scale,
           D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_Q: tl.constexpr,
           BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    j = tl.program_id(0)                       # the key block
    head = tl.program_id(1) * N * D
    row0 = tl.program_id(1) * N
    keys = j * BLOCK_K + tl.arange(0, BLOCK_K)
    k = _load_rows(k_ptr + head, j * BLOCK_K, N, D, BLOCK_K, BLOCK_D)
    v = _load_rows(v_ptr + head, j * BLOCK_K, N, D, BLOCK_K, BLOCK_D)
    dk = tl.zeros((BLOCK_K, BLOCK_D), tl.float32)
    dv = tl.zeros((BLOCK_K, BLOCK_D), tl.float32)
    start = 0
    if CAUSAL:
        start = (j * BLOCK_K) // BLOCK_Q * BLOCK_Q  # earlier queries: all past
    for i in range(start, N, BLOCK_Q):
        rows = i + tl.arange(0, BLOCK_Q)
        q = _load_rows(q_ptr + head, i, N, D, BLOCK_Q, BLOCK_D)
        do = _load_rows(do_ptr + head, i, N, D, BLOCK_Q, BLOCK_D)
        lse = tl.load(lse_ptr + row0 + rows, mask=rows < N, other=0.0)
        delta = tl.load(delta_ptr + row0 + rows, mask=rows < N, other=0.0)
        p = _weights(q, k, lse, rows, keys, N, scale, CAUSAL, PRECISION)
        dv += tl.dot(tl.trans(p).to(do.dtype), do, input_precision=PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds).to(q.dtype), q, input_precision=PRECISION)
    _store_rows(dk_ptr + head, j * BLOCK_K, N, dk * scale, D, BLOCK_K, BLOCK_D)
    _store_rows(dv_ptr + head, j * BLOCK_K, N, dv, D, BLOCK_K, BLOCK_D)


@triton.jit
def _dq(q_ptr, k_ptr, v_ptr, do_ptr, lse_ptr, delta_ptr, dq_ptr, N, scale,
        D: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_Q: tl.constexpr,
        BLOCK_K: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    i = tl.program_id(0)                       # the query block
    head = tl.program_id(1) * N * D
    rows = i * BLOCK_Q + tl.arange(0, BLOCK_Q)
    q = _load_rows(q_ptr + head, i * BLOCK_Q, N, D, BLOCK_Q, BLOCK_D)
    do = _load_rows(do_ptr + head, i * BLOCK_Q, N, D, BLOCK_Q, BLOCK_D)
    lse = tl.load(lse_ptr + tl.program_id(1) * N + rows, mask=rows < N, other=0.0)
    delta = tl.load(delta_ptr + tl.program_id(1) * N + rows, mask=rows < N, other=0.0)
    dq = tl.zeros((BLOCK_Q, BLOCK_D), tl.float32)
    end = N
    if CAUSAL:
        end = tl.minimum((i + 1) * BLOCK_Q, N)
    for j in range(0, end, BLOCK_K):
        keys = j + tl.arange(0, BLOCK_K)
        k = _load_rows(k_ptr + head, j, N, D, BLOCK_K, BLOCK_D)
        v = _load_rows(v_ptr + head, j, N, D, BLOCK_K, BLOCK_D)
        p = _weights(q, k, lse, rows, keys, N, scale, CAUSAL, PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    _store_rows(dq_ptr + head, i * BLOCK_Q, N, dq * scale, D, BLOCK_Q, BLOCK_D)
