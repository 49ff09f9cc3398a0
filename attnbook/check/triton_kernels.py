"""Checkers of the Triton pages of Part VII (17d, 17e; re-exported by
:mod:`attnbook.check`).

A learner writes one piece of a kernel as a ``@triton.jit`` function; the
checker runs it inside a small kernel (:mod:`attnbook.kernels._harness`), in
Triton's interpreter on a machine without a GPU, and compares what it
stored with NumPy. The pieces: a masked tile load (``check_load_tile``), the
online softmax's update with its rescaling (``check_online_update``), the
end of the key loop that skips the future's tiles under a causal mask
(``check_causal_key_end``), and the backward pass's ``D_i``
(``check_row_dots``). Each names the mistakes a learner plausibly makes.
torch and triton are imported only when a checker runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..checking import BadResult, Case, Mistake, Verdict, run_cases

__all__ = ["check_load_tile", "check_online_update", "check_causal_key_end",
           "check_row_dots", "load_tile_cases", "online_update_cases",
           "causal_key_end_cases", "row_dots_cases"]

SENTINEL = 999.0   # what lies in memory after the matrix: not the learner's to read


def _is_jit(fn) -> bool:
    return type(fn).__module__.startswith("triton")


def _kernel_ready(fn, n_args):
    """The harness kernels, once fn is a Triton function (or a stub that raises)."""
    if not _is_jit(fn):
        try:
            fn(*[None] * n_args)
        except NotImplementedError:
            raise
        except Exception:
            pass
        raise BadResult("put @triton.jit on the line above `def`: the checker calls "
                        "your function inside a Triton kernel")
    from ..kernels import load_triton

    load_triton()
    from ..kernels import _harness

    return _harness


def _torch():
    import torch

    return torch


# --- a masked tile load -----------------------------------------------------

_LOAD = [(5, 0, 16, 16, "5 rows, BLOCK = 16: fewer rows than one block"),
         (40, 32, 16, 16, "40 rows, the block from row 32: its last 8 rows are "
                          "past the end"),
         (40, 0, 16, 32, "40 rows of width 32, the first block (all inside)"),
         (33, 32, 16, 16, "33 rows, the block from row 32: one row inside")]


def _matrix(n, d):
    return np.arange(n * d, dtype=np.float32).reshape(n, d) / 8


def load_tile_cases() -> list[Case]:
    cases = []
    for n, start, block, d, label in _LOAD:
        x = _matrix(n, d)
        want = np.zeros((block, d), np.float32)
        inside = x[start:start + block]
        want[:len(inside)] = inside
        cases.append(Case(label, (n, start, block, d), want))
    return cases


def _load_wrong(n, start, block, d):
    x = np.concatenate([_matrix(n, d), np.full((block, d), SENTINEL, np.float32)])
    flat = x.ravel()
    rows = start + np.arange(block)

    def masked(keep):
        t = x[np.minimum(rows, len(x) - 1)].copy()
        t[~keep] = 0
        return t

    column_major = np.where((rows < n)[:, None],
                            flat[np.minimum(rows[:, None] + np.arange(d)[None, :] * d,
                                            flat.size - 1)], 0)
    def at(index):   # the learner's addresses, masked by row, read from memory
        return np.where((index[0] < n)[:, None],
                        flat[np.clip(index[1], 0, flat.size - 1)], 0)

    cols = np.arange(d)[None, :]
    stride_n = at((rows, rows[:, None] + cols * n))
    block_index = at((start * block + np.arange(block),
                      (start * block + np.arange(block))[:, None] * d + cols))
    no_start = at((np.arange(block), np.arange(block)[:, None] * d + cols))
    stride_block = at((rows, rows[:, None] * block + cols))
    by_column = np.where(start + np.arange(d)[None, :] < n,
                         x[np.minimum(rows, len(x) - 1)], 0) if d == block else None
    return [
        ("no mask: rows past the end read the memory after the matrix (here "
         "999s); pass mask=rows[:, None] < n_rows and other=0.0",
         masked(np.ones(block, bool))),
        ("the mask drops the tail: the last, partial block must load its rows "
         "that exist; compare each row index with n_rows, not with a whole "
         "number of blocks", masked(rows < n // block * block)),
        ("one row too many: rows < n_rows, not rows <= n_rows (row n_rows is "
         "past the end)", masked(rows <= n)),
        ("one row too few: rows < n_rows keeps the last row, n_rows - 1",
         masked(rows < n - 1)),
        ("the mask compares tl.arange(0, BLOCK), the offset inside the block, "
         "with n_rows: compare the row index start + tl.arange(0, BLOCK)",
         masked(np.arange(block) < n)),
        ("the addresses are column-major: row r, column c of a row-major "
         "(n_rows, D) matrix is at ptr + r * D + c", column_major),
        ("the columns step by n_rows (ptr + r + c * n_rows, a transposed "
         "layout): in a row-major (n_rows, D) matrix row r, column c is at "
         "ptr + r * D + c", stride_n),
        ("start was taken as a block number (start * BLOCK + tl.arange(0, "
         "BLOCK)): start is already the first row's index, rows = start + "
         "tl.arange(0, BLOCK)", block_index),
        ("start is left out: every call loads rows 0 to BLOCK - 1; the rows "
         "are start + tl.arange(0, BLOCK)", no_start),
        ("the rows step by BLOCK (rows[:, None] * BLOCK + cols): a row of "
         "the matrix is D numbers long, so row r starts at ptr + r * D",
         stride_block),
    ] + ([] if by_column is None else [
        ("the mask has shape (BLOCK,) and broadcasts along the columns: give "
         "it the rows' axis, rows[:, None] < n_rows, shape (BLOCK, 1)", by_column)])


def _call_load(fn, case):
    harness = _kernel_ready(fn, 5)
    torch = _torch()
    n, start, block, d = case.args
    x = np.concatenate([_matrix(n, d), np.full((block, d), SENTINEL, np.float32)])
    out = torch.full((block, d), -1.0)
    harness.run_load[(1,)](torch.from_numpy(x), out, start, n, fn, D=d, BLOCK=block)
    return {"output": out.numpy()}


def _load_mistakes(case):
    """The wrong loads whose first failing case this is: a learner's function that
    passed the earlier cases is none of the others (two of them agree on the
    tail case, the unmasked load and the mask on the offset)."""
    cases = load_tile_cases()
    index = next(i for i, c in enumerate(cases) if c.label == case.label)
    found = []
    for k, (hint, wrong) in enumerate(_load_wrong(*case.args)):
        earlier = [_load_wrong(*c.args)[k][1] for c in cases[:index]]
        if all(np.array_equal(w, c.expected) for w, c in zip(earlier, cases)):
            found.append(Mistake(hint, parts={"output": wrong}))
    return found


def check_load_tile(fn: Callable) -> Verdict:
    """Check ``load_tile(ptr, start, n_rows, D, BLOCK)``: rows start .. start +
    BLOCK of a row-major (n_rows, D) float32 matrix, zeros past the end."""
    return run_cases(fn, load_tile_cases(), "check_load_tile", call=_call_load,
                     rtol=0, atol=0, mistakes=_load_mistakes)


# --- the online softmax's update -----------------------------------------

_UPDATE_PARTS = ("m", "l", "acc")


def _update_state(seed, first, big=False):
    rng = np.random.default_rng(seed)
    b = 16
    s = rng.normal(size=(b, b)).astype(np.float32) * (40 if big else 2)
    s[:, 11:] = -np.inf if seed == 3 else s[:, 11:]   # keys past the end
    v = rng.normal(size=(b, b)).astype(np.float32)
    if first:
        m = np.full(b, -np.inf, np.float32)
        l, acc = np.zeros(b, np.float32), np.zeros((b, b), np.float32)
    else:
        m = (rng.normal(size=b) * 2).astype(np.float32)
        m[::2] += 3                                     # half the rows keep m
        l = rng.uniform(1, 3, size=b).astype(np.float32)
        acc = rng.normal(size=(b, b)).astype(np.float32)
    return m, l, acc, s, v


def _update(m, l, acc, s, v, *, rescale_l=True, rescale_acc=True, flip=False,
            keep_max=False, normalise=False, axis=1, p_old=False,
            alpha_cols=False, l_axis=1, v_t=False, tile_max=False):
    m_new = m if keep_max else np.maximum(m, s.max(axis=axis))
    if tile_max:
        m_new = s.max(axis=1)
    alpha = np.exp(m_new - m) if flip else np.exp(m - m_new)
    p = np.exp(s - (m if p_old else m_new)[:, None])
    l_new = (alpha * l if rescale_l else l) + p.sum(axis=l_axis)
    a = alpha[None, :] if alpha_cols else alpha[:, None]
    acc_new = (acc * a if rescale_acc else acc) + p @ (v.T if v_t else v)
    if normalise:
        acc_new = acc_new / l_new[:, None]
    return {"m": m_new, "l": l_new, "acc": acc_new}


_UPDATES = [(2, False, False, "a later tile: the maximum rises in some rows, not in others"),
            (3, False, False, "a later tile whose last 5 keys are masked (-inf)"),
            (4, False, True, "a later tile with scores in the tens"),
            (1, True, False, "the first key tile (m = -inf, l = 0, acc = 0)")]


def online_update_cases() -> list[Case]:
    return [Case(label, _update_state(seed, first, big),
                 _update(*_update_state(seed, first, big)))
            for seed, first, big, label in _UPDATES]


def _update_wrong(*state):
    with np.errstate(all="ignore"):
        return [
            ("the accumulator is not rescaled: acc was summed against the old "
             "maximum; multiply it by alpha[:, None] (applying the rescale to "
             "l alone is not enough)",
             _update(*state, rescale_acc=False)),
            ("l is not rescaled: l, too, was summed against the old maximum; "
             "l = alpha * l + tl.sum(p, 1)",
             _update(*state, rescale_l=False)),
            ("the exponent is flipped: alpha = exp(m - m_new), at most 1, not "
             "exp(m_new - m)", _update(*state, flip=True)),
            ("the maximum is not updated: m_new = tl.maximum(m, tl.max(s, 1)), "
             "and p = exp(s - m_new[:, None])", _update(*state, keep_max=True)),
            ("the maximum is taken down the columns (axis 0): each row, a "
             "query, has its own maximum over its keys: tl.max(s, 1)",
             _update(*state, axis=0)),
            ("the accumulator is divided by l at every tile: keep it "
             "unnormalised, and divide once, after the last tile",
             _update(*state, normalise=True)),
            ("p was taken against the OLD maximum, exp(s - m): take it "
             "against the new one, p = exp(s - m_new[:, None]), the maximum "
             "l_new and acc_new are both measured against",
             _update(*state, p_old=True)),
            ("alpha rescaled the columns of acc (alpha[None, :]): alpha has "
             "one number per row, a query; acc * alpha[:, None]",
             _update(*state, alpha_cols=True)),
            ("l summed p down the columns (tl.sum(p, 0)): each row's sum runs "
             "over its keys, tl.sum(p, 1)", _update(*state, l_axis=0)),
            ("acc added p times v transposed: the tile of outputs is p @ v, "
             "tl.dot(p, v), (16 queries, 16 keys) times (16 keys, 16 "
             "features)", _update(*state, v_t=True)),
            ("m_new is this tile's maximum alone (tl.max(s, 1)): the running "
             "maximum keeps the earlier tiles' too, tl.maximum(m, tl.max(s, "
             "1))", _update(*state, tile_max=True)),
        ]


def _call_update(fn, case):
    harness = _kernel_ready(fn, 5)
    torch = _torch()
    m, l, acc, s, v = (torch.from_numpy(a.copy()) for a in case.args)
    harness.run_update[(1,)](m, l, acc, s, v, fn, BLOCK=16)
    return {"m": m.numpy(), "l": l.numpy(), "acc": acc.numpy()}


def _update_error(exc, case):
    if "shape" in str(exc).lower():
        return ("return (m_new, l_new, acc_new) in this order: m_new and "
                "l_new have shape (16,), acc_new (16, 16)")
    return None


def check_online_update(fn: Callable) -> Verdict:
    """Check ``online_update(m, l, acc, s, v) -> (m_new, l_new, acc_new)``: one
    key tile of the forward kernel (scores s, already scaled and masked)."""
    return run_cases(fn, online_update_cases(), "check_online_update",
                     call=_call_update, rtol=1e-5, atol=1e-5,
                     on_error=_update_error, mistakes=lambda c: [Mistake(h, parts=w)
                                         for h, w in _update_wrong(*c.args)])


# --- the causal tile skip -------------------------------------------------

_CAUSAL = [(48, 16, 16, "N = 48, blocks of 16 queries and 16 keys"),
           (40, 16, 16, "N = 40 (the last block is partial), blocks of 16"),
           (40, 32, 16, "N = 40, blocks of 32 queries and 16 keys"),
           (1, 16, 16, "N = 1: one query, one key")]


def _qkv(n, d=16, seed=0):
    rng = np.random.default_rng(seed + n)
    return tuple(rng.normal(size=(n, d)).astype(np.float32) for _ in range(3))


def _causal_run(n, bq, bk, end_of):
    """What the harness computes when block i's key loop ends at end_of(i)."""
    q, k, v = _qkv(n)
    s = q.astype(float) @ k.T.astype(float) / 4.0
    out, tiles = np.zeros((n, 16)), []
    for i in range(-(-n // bq)):
        end = end_of(i)
        visited = len(range(0, end, bk))
        tiles.append(visited)
        for r in range(i * bq, min((i + 1) * bq, n)):
            seen = np.arange(n)[(np.arange(n) < visited * bk) & (np.arange(n) <= r)]
            if len(seen) == 0:
                out[r] = np.nan
                continue
            w = np.exp(s[r, seen] - s[r, seen].max())
            out[r] = w @ v[seen] / w.sum()
    return {"output": out, "tiles visited per query block": np.array(tiles, float)}


def causal_key_end_cases() -> list[Case]:
    return [Case(label, (n, bq, bk),
                 _causal_run(n, bq, bk, lambda i, n=n, bq=bq: min((i + 1) * bq, n)))
            for n, bq, bk, label in _CAUSAL]


def _causal_wrong(n, bq, bk):
    return [
        ("off by one block: the diagonal tile is skipped (i * BLOCK_Q is the "
         "block's first row; its rows see keys up to (i + 1) * BLOCK_Q - 1, "
         "so the loop ends at (i + 1) * BLOCK_Q, capped at N)",
         _causal_run(n, bq, bk, lambda i: i * bq)),
        ("the loop ends at the block's first row plus one: row i * BLOCK_Q + r "
         "sees keys up to itself, so the end is the block's last row plus one, "
         "(i + 1) * BLOCK_Q, capped at N", _causal_run(n, bq, bk, lambda i: i * bq + 1)),
        ("one tile too many: key (i + 1) * BLOCK_Q is already in the future of "
         "every row of block i; the end, exclusive, is (i + 1) * BLOCK_Q",
         _causal_run(n, bq, bk, lambda i: (i + 1) * bq + 1)),
        ("no skip: the output is right, but every key tile is computed; under "
         "a causal mask the loop can end at tl.minimum((i + 1) * BLOCK_Q, N)",
         _causal_run(n, bq, bk, lambda i: n)),
        ("the end is not capped at N: for the last query block (i + 1) * "
         "BLOCK_Q can pass N by a whole key tile or more, which holds no key; "
         "end at tl.minimum((i + 1) * BLOCK_Q, N)",
         _causal_run(n, bq, bk, lambda i: (i + 1) * bq)),
        ("the end counts key blocks of the query block's size wrong: it is "
         "tl.minimum((i + 1) * BLOCK_Q, N), a row index, whatever BLOCK_K is",
         _causal_run(n, bq, bk, lambda i: (i + 1) * bk)),
        ("the end is a number of tiles (i + 1): range(0, end, BLOCK_K) counts "
         "keys, so the end is a key index, tl.minimum((i + 1) * BLOCK_Q, N)",
         _causal_run(n, bq, bk, lambda i: i + 1)),
        ("a key too many, even capped: tl.minimum((i + 1) * BLOCK_Q + 1, N) "
         "reaches key (i + 1) * BLOCK_Q, in the future of every row of "
         "block i, and visits a tile more than needed",
         _causal_run(n, bq, bk, lambda i: min((i + 1) * bq + 1, n))),
        ("capped at N - 1: the end is exclusive, so the last key, N - 1, "
         "needs an end of N; tl.minimum((i + 1) * BLOCK_Q, N)",
         _causal_run(n, bq, bk, lambda i: min((i + 1) * bq, n - 1))),
    ]


def _causal_mistakes(case):
    """The wrong ends whose first failing case this is (a learner's end that
    passed the earlier cases is none of the others: capped at N - 1 and the
    diagonal skipped agree on N = 1)."""
    cases = causal_key_end_cases()
    index = next(i for i, c in enumerate(cases) if c.label == case.label)

    def right_on(parts, c):
        return all(np.allclose(parts[k], v, rtol=1e-5, atol=1e-5)
                   for k, v in c.expected.items())

    earlier = [_causal_wrong(*c.args) for c in cases[:index]]
    return [Mistake(hint, parts=wrong)
            for k, (hint, wrong) in enumerate(_causal_wrong(*case.args))
            if all(right_on(e[k][1], c) for e, c in zip(earlier, cases))]


def _call_causal(fn, case):
    harness = _kernel_ready(fn, 3)
    torch = _torch()
    n, bq, bk = case.args
    q, k, v = (torch.from_numpy(a) for a in _qkv(n))
    o = torch.zeros(n, 16)
    blocks = -(-n // bq)
    tiles = torch.zeros(blocks, dtype=torch.int32)
    harness.run_causal[(blocks,)](q, k, v, o, tiles, n, 0.25, fn, D=16,
                                  BLOCK_Q=bq, BLOCK_K=bk)
    return {"output": o.numpy(), "tiles visited per query block":
            tiles.numpy().astype(float)}


def check_causal_key_end(fn: Callable) -> Verdict:
    """Check ``key_end(i, N, BLOCK_Q)``: where query block i's key loop ends
    (exclusive) under a causal mask, the tiles after it all in the future."""
    return run_cases(fn, causal_key_end_cases(), "check_causal_key_end",
                     call=_call_causal, rtol=1e-5, atol=1e-5,
                     mistakes=_causal_mistakes)


# --- D_i = rowsum(dO * O) -------------------------------------------------

_DOTS = [(16, 16, 5, "a 16 x 16 tile of O and of dO"),
         (16, 32, 6, "16 rows of width 32"),
         (32, 64, 7, "32 rows of width 64")]


def _tiles(block, d, seed):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(block, d)).astype(np.float32),
            rng.normal(size=(block, d)).astype(np.float32))


def row_dots_cases() -> list[Case]:
    cases = []
    for block, d, seed, label in _DOTS:
        o, do = _tiles(block, d, seed)
        cases.append(Case(label, (block, d, seed), (do * o).sum(axis=1)))
    return cases


def _dots_wrong(block, d, seed):
    o, do = _tiles(block, d, seed)
    wrong = [
        ("D_i from dO alone: D_i = rowsum(dO_i * O_i), the dot product of row "
         "i of dO with row i of O", do.sum(axis=1)),
        ("D_i from O alone: it is the dot product of dO_i with O_i",
         o.sum(axis=1)),
        ("the two row sums multiplied: D_i sums the products dO_ij * O_ij, "
         "it is not rowsum(dO) * rowsum(O)", do.sum(axis=1) * o.sum(axis=1)),
        ("summed over the whole tile (tl.sum without an axis): one number for "
         "every row; D has one per row, tl.sum(dO * O, 1)",
         np.full(block, (do * o).sum(), np.float32)),
        ("scaled by 1 / sqrt(d): D_i has no scale (it comes from dO and O, "
         "not from the scores)", (do * o).sum(axis=1) / np.sqrt(d)),
    ]
    wrong += [
        ("the sign is flipped: D_i = +rowsum(dO_i * O_i); the minus sign "
         "comes later, in dS = P * (dP - D)", -(do * o).sum(axis=1)),
        ("the tile of dO multiplied by itself: D_i multiplies dO by O, element by element, "
         "tl.sum(do * o, 1)", (do * do).sum(axis=1)),
        ("the tile of O multiplied by itself: D_i multiplies dO by O, element by element, "
         "tl.sum(do * o, 1)", (o * o).sum(axis=1)),
        ("averaged over the D columns: D_i is the sum of dO_ic * O_ic, not "
         "its mean", (do * o).sum(axis=1) / d),
    ]
    if block == d:   # summed down the columns: same shape only on a square tile
        wrong.append(("summed over axis 0 (down the columns): D has one number "
                      "per row, tl.sum(dO * O, 1)", (do * o).sum(axis=0)))
    return wrong


def _call_dots(fn, case):
    harness = _kernel_ready(fn, 2)
    torch = _torch()
    block, d, seed = case.args
    o, do = (torch.from_numpy(a) for a in _tiles(block, d, seed))
    out = torch.zeros(block)
    harness.run_row_dots[(1,)](o, do, out, fn, BLOCK=block, D=d)
    return {"output": out.numpy()}


def _axis_error(exc, case):
    if "shape" in str(exc).lower() or "broadcast" in str(exc).lower():
        return ("D has one number per row: tl.sum(dO * O, 1), over axis 1 "
                "(a sum over axis 0, or a tl.dot, gives another shape)")
    return None


def check_row_dots(fn: Callable) -> Verdict:
    """Check ``row_dots(o, do)``: D_i = rowsum(dO_i * O_i) of a tile, shape (BLOCK,)."""
    return run_cases(fn, row_dots_cases(), "check_row_dots", call=_call_dots,
                     rtol=1e-5, atol=1e-5, on_error=_axis_error,
                     mistakes=lambda c: [Mistake(h, parts={"output": w})
                                         for h, w in _dots_wrong(*c.args)])
