"""A learner's answers to the Triton exercises of pages 17d and 17e, right and wrong,
as @triton.jit functions (imported by tests/check/test_check_triton_torch.py after
attnbook.kernels.load_triton chose the interpreter). Each wrong one is a plausible
mistake that its checker must name with its own hint."""

import triton
import triton.language as tl


# --- the masked tile load ---------------------------------------------------

@triton.jit
def load_right(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows[:, None] < n_rows, other=0.0)


@triton.jit
def load_no_mask(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :])


@triton.jit
def load_drops_tail(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    full = n_rows // BLOCK * BLOCK          # whole blocks only
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows[:, None] < full, other=0.0)


@triton.jit
def load_le(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows[:, None] <= n_rows, other=0.0)


@triton.jit
def load_minus_one(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows[:, None] < n_rows - 1, other=0.0)


@triton.jit
def load_offset_mask(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=tl.arange(0, BLOCK)[:, None] < n_rows, other=0.0)


@triton.jit
def load_column_major(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] + cols[None, :] * D,
                   mask=rows[:, None] < n_rows, other=0.0)


@triton.jit
def load_flat_mask(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows < n_rows, other=0.0)


@triton.jit
def load_stride_n_rows(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] + cols[None, :] * n_rows,
                   mask=rows[:, None] < n_rows, other=0.0)


@triton.jit
def load_block_number(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start * BLOCK + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows[:, None] < n_rows, other=0.0)


@triton.jit
def load_no_start(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * D + cols[None, :],
                   mask=rows[:, None] < n_rows, other=0.0)


@triton.jit
def load_stride_block(ptr, start, n_rows, D: tl.constexpr, BLOCK: tl.constexpr):
    rows = start + tl.arange(0, BLOCK)
    cols = tl.arange(0, D)
    return tl.load(ptr + rows[:, None] * BLOCK + cols[None, :],
                   mask=rows[:, None] < n_rows, other=0.0)


# --- the online update --------------------------------------------------------

@triton.jit
def update_right(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_l_only(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    return m_new, alpha * l + tl.sum(p, 1), acc + tl.dot(p, v, input_precision="ieee")


@triton.jit
def update_acc_only(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l + tl.sum(p, 1), acc


@triton.jit
def update_none(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    p = tl.exp(s - m_new[:, None])
    return m_new, l + tl.sum(p, 1), acc + tl.dot(p, v, input_precision="ieee")


@triton.jit
def update_flipped(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m_new - m)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_keeps_max(m, l, acc, s, v):
    alpha = tl.exp(m - m)
    p = tl.exp(s - m[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m, l, acc


@triton.jit
def update_normalises(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc / l[:, None]


@triton.jit
def update_wrong_axis(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 0))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_p_old_max(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_alpha_columns(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[None, :] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_l_axis0(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 0)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_v_transposed(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, tl.trans(v), input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_tile_max(m, l, acc, s, v):
    m_new = tl.max(s, 1)
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, l, acc


@triton.jit
def update_swapped(m, l, acc, s, v):
    m_new = tl.maximum(m, tl.max(s, 1))
    alpha = tl.exp(m - m_new)
    p = tl.exp(s - m_new[:, None])
    l = alpha * l + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="ieee")
    return m_new, acc, l


# --- the causal end of the key loop ---------------------------------------------

@triton.jit
def end_right(i, N, BLOCK_Q: tl.constexpr):
    return tl.minimum((i + 1) * BLOCK_Q, N)


@triton.jit
def end_skips_diagonal(i, N, BLOCK_Q: tl.constexpr):
    return i * BLOCK_Q


@triton.jit
def end_first_row(i, N, BLOCK_Q: tl.constexpr):
    return i * BLOCK_Q + 1


@triton.jit
def end_one_too_many(i, N, BLOCK_Q: tl.constexpr):
    return (i + 1) * BLOCK_Q + 1


@triton.jit
def end_no_skip(i, N, BLOCK_Q: tl.constexpr):
    return N


@triton.jit
def end_uncapped(i, N, BLOCK_Q: tl.constexpr):
    return (i + 1) * BLOCK_Q


@triton.jit
def end_key_blocks(i, N, BLOCK_Q: tl.constexpr):
    return (i + 1) * 16                      # BLOCK_K, the key block's size


@triton.jit
def end_tile_count(i, N, BLOCK_Q: tl.constexpr):
    return i + 1


@triton.jit
def end_one_key_too_many(i, N, BLOCK_Q: tl.constexpr):
    return tl.minimum((i + 1) * BLOCK_Q + 1, N)


@triton.jit
def end_capped_n_minus_one(i, N, BLOCK_Q: tl.constexpr):
    return tl.minimum((i + 1) * BLOCK_Q, N - 1)


# --- D_i ----------------------------------------------------------------------

@triton.jit
def dots_right(o, do):
    return tl.sum(do * o, 1)


@triton.jit
def dots_do_alone(o, do):
    return tl.sum(do, 1)


@triton.jit
def dots_o_alone(o, do):
    return tl.sum(o, 1)


@triton.jit
def dots_product_of_sums(o, do):
    return tl.sum(do, 1) * tl.sum(o, 1)


@triton.jit
def dots_whole_tile(o, do):
    return tl.sum(do * o)


@triton.jit
def dots_scaled(o, do):
    return tl.sum(do * o, 1) / tl.sqrt(do.shape[1] * 1.0)


@triton.jit
def dots_axis0(o, do):
    return tl.sum(do * o, 0)


@triton.jit
def dots_negated(o, do):
    return -tl.sum(do * o, 1)


@triton.jit
def dots_do_squared(o, do):
    return tl.sum(do * do, 1)


@triton.jit
def dots_o_squared(o, do):
    return tl.sum(o * o, 1)


@triton.jit
def dots_mean(o, do):
    return tl.sum(do * o, 1) / o.shape[1]
