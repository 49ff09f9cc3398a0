"""Answer key of Part IX, chapters 24 and 24b: attention at serving scale.

* :func:`paged_attention`: one decode query per sequence reading its keys and
  values through a block table (vLLM's PagedAttention, Kwon et al. 2023).
* :class:`BlockPool`: the pages themselves: a free list, a block table per
  sequence, reference counts, prefix sharing and copy-on-write.
* :func:`varlen_attention`: sequences of different lengths packed in one
  batch without padding, cut by cumulative lengths ``cu_seqlens`` (the
  interface of FlashAttention's ``flash_attn_varlen_func``).
* :func:`chunked_prefill`: a prompt prefilled a chunk at a time against a
  cache that keeps only the last ``window`` keys; ``trim_first=True`` is the
  bug of trimming the cache before the chunk's own queries read it.
* :func:`simulate_batching`: static and continuous batching on a request trace.

Shapes follow FlashAttention's varlen layout, tokens first: ``(T, H, d)``.
"""

from __future__ import annotations

import numpy as np

from ..validate import _as_float_array, _lines, _whole_number
from .attention import softmax
from .kv_cache import sliding_window_mask

__all__ = ["paged_attention", "gather_pages", "BlockPool", "varlen_attention",
           "chunked_prefill", "simulate_batching"]


def _int_array(x, name):
    arr = np.asarray(x)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    return arr.astype(np.int64)


def gather_pages(cache, block_row, n):
    """The first ``n`` tokens of one sequence, read from the pages.

    cache (num_blocks, block_size, H_kv, d); block_row (max_blocks,) ints.
    Token i sits in block ``block_row[i // block_size]``, slot
    ``i % block_size``. Returns (n, H_kv, d), contiguous.
    """
    block_size = cache.shape[1]
    i = np.arange(n)
    return cache[block_row[i // block_size], i % block_size]


def paged_attention(q, k_cache, v_cache, block_table, seq_lens):
    """Decode attention through a block table (vLLM's PagedAttention).

    q (B, H, d): one query per sequence, the newest token; k_cache
    (num_blocks, block_size, H_kv, d) and v_cache (num_blocks, block_size,
    H_kv, d_v): the pages shared by every sequence; block_table (B,
    max_blocks) ints; seq_lens (B,) ints, the tokens of each sequence in the
    cache (the new token's key included). Token i of sequence b sits in block
    ``block_table[b, i // block_size]``, slot ``i % block_size``; query head
    h reads KV head ``h // (H // H_kv)``; scores are scaled by 1/sqrt(d).
    The query sees all ``seq_lens[b]`` tokens (it is the last of them).
    Returns (B, H, d_v).
    """
    q = _as_float_array(q, "q")
    k_cache = _as_float_array(k_cache, "k_cache")
    v_cache = _as_float_array(v_cache, "v_cache")
    block_table = _int_array(block_table, "block_table")
    seq_lens = _int_array(seq_lens, "seq_lens")
    if q.ndim != 3:
        raise ValueError(f"q must be (B, H, d), got shape {q.shape}")
    if k_cache.ndim != 4 or v_cache.ndim != 4:
        raise ValueError(_lines(
            "k_cache and v_cache must be (num_blocks, block_size, H_kv, d),",
            f"got {k_cache.shape} and {v_cache.shape}"))
    if k_cache.shape[:3] != v_cache.shape[:3]:
        raise ValueError(_lines(
            f"k_cache {k_cache.shape} and v_cache {v_cache.shape} must agree",
            "in (num_blocks, block_size, H_kv)"))
    B, H, d = q.shape
    num_blocks, block_size, H_kv, _ = k_cache.shape
    if k_cache.shape[3] != d:
        raise ValueError(f"q {q.shape} and k_cache {k_cache.shape} must have "
                         "the same d")
    if H % H_kv:
        raise ValueError(f"H = {H} query heads is not a multiple of H_kv = "
                         f"{H_kv} KV heads")
    if block_table.ndim != 2 or block_table.shape[0] != B:
        raise ValueError(f"block_table must be (B, max_blocks) = ({B}, ...), "
                         f"got {block_table.shape}")
    if seq_lens.shape != (B,):
        raise ValueError(f"seq_lens must be (B,) = ({B},), got {seq_lens.shape}")
    if (seq_lens < 1).any():
        b = int(np.argmax(seq_lens < 1))
        raise ValueError(_lines(
            f"seq_lens[{b}] = {seq_lens[b]}: every sequence holds at least",
            "its new token (seq_lens >= 1)"))
    capacity = block_table.shape[1] * block_size
    if (seq_lens > capacity).any():
        b = int(np.argmax(seq_lens > capacity))
        raise ValueError(_lines(
            f"seq_lens[{b}] = {seq_lens[b]} needs more than the block table's",
            f"{block_table.shape[1]} blocks of {block_size} tokens"))
    group = H // H_kv
    out = np.empty((B, H, v_cache.shape[3]))
    for b in range(B):
        n = int(seq_lens[b])
        used = block_table[b, :-(-n // block_size)]
        bad = (used < 0) | (used >= num_blocks)
        if bad.any():
            j = int(np.argmax(bad))
            raise ValueError(_lines(
                f"block_table[{b}, {j}] = {used[j]} is not a block of the",
                f"cache (0 .. {num_blocks - 1})"))
        k = gather_pages(k_cache, block_table[b], n)          # (n, H_kv, d)
        v = gather_pages(v_cache, block_table[b], n)          # (n, H_kv, d_v)
        k = np.repeat(k, group, axis=1)                       # (n, H, d)
        v = np.repeat(v, group, axis=1)
        s = np.einsum("hd,nhd->hn", q[b], k) / np.sqrt(d)     # (H, n)
        out[b] = np.einsum("hn,nhd->hd", softmax(s), v)       # (H, d_v)
    return out


class BlockPool:
    """Fixed-size pages of a KV cache: a free list, block tables, refcounts.

    ``append(seq, n)`` gives sequence ``seq`` room for ``n`` more tokens,
    taking blocks from the free list as its last block fills.
    ``fork(parent, child)`` makes ``child`` share every block of ``parent``
    (reference counts + 1; nothing copied). Appending to a shared, partly
    filled last block first copies it (copy-on-write): ``copies`` counts the
    blocks copied. ``free(seq)`` drops a sequence; a block whose count falls
    to 0 returns to the free list. Only the bookkeeping: no keys are stored.
    """

    def __init__(self, num_blocks, block_size):
        self.num_blocks = _whole_number(num_blocks, "num_blocks")
        self.block_size = _whole_number(block_size, "block_size")
        if self.num_blocks < 1 or self.block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.free_list = list(range(self.num_blocks))
        self.refcount = [0] * self.num_blocks
        self.tables: dict = {}
        self.lengths: dict = {}
        self.copies = 0

    def _take(self):
        if not self.free_list:
            raise MemoryError("no free block left in the pool")
        block = self.free_list.pop(0)
        self.refcount[block] = 1
        return block

    def append(self, seq, n=1):
        """Room for ``n`` more tokens of ``seq``; returns its block table."""
        n = _whole_number(n, "n")
        table = self.tables.setdefault(seq, [])
        length = self.lengths.get(seq, 0)
        for _ in range(n):
            slot = length % self.block_size
            if slot == 0:                          # the last block is full
                table.append(self._take())
            elif self.refcount[table[-1]] > 1:     # shared: copy on write
                self.refcount[table[-1]] -= 1
                table[-1] = self._take()
                self.copies += 1
            length += 1
        self.lengths[seq] = length
        return list(table)

    def fork(self, parent, child):
        """``child`` shares all of ``parent``'s blocks (prefix sharing)."""
        if child in self.tables:
            raise ValueError(f"sequence {child!r} exists already")
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        for block in self.tables[child]:
            self.refcount[block] += 1
        return list(self.tables[child])

    def free(self, seq):
        for block in self.tables.pop(seq):
            self.refcount[block] -= 1
            if self.refcount[block] == 0:
                self.free_list.append(block)
        del self.lengths[seq]

    @property
    def used(self):
        """Blocks in use (held by at least one sequence)."""
        return self.num_blocks - len(self.free_list)


def _cu(cu, name, total):
    cu = _int_array(cu, name)
    if cu.ndim != 1 or len(cu) < 2 or cu[0] != 0 or (np.diff(cu) < 0).any():
        raise ValueError(_lines(
            f"{name} must start at 0 and never decrease (B + 1 entries),",
            f"got {cu.tolist()}"))
    if cu[-1] != total:
        raise ValueError(_lines(
            f"{name} ends at {cu[-1]} but the packed array has {total} tokens"))
    return cu


def varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal=True,
                     window=None):
    """Attention over sequences packed without padding.

    q (T_q, H, d), k (T_k, H_kv, d), v (T_k, H_kv, d_v): the tokens of B
    sequences one after another. Sequence b owns queries
    ``cu_seqlens_q[b]:cu_seqlens_q[b + 1]`` and keys
    ``cu_seqlens_k[b]:cu_seqlens_k[b + 1]``; it never sees another's keys.
    With ``causal=True`` the mask is aligned bottom-right within each
    sequence (its queries are its last ones: a decode step has one query and
    all its keys), as ``flash_attn_varlen_func`` does; ``window`` adds a
    sliding window of that many keys. Query head h reads KV head
    h // (H // H_kv). Returns (T_q, H, d_v).
    """
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError(_lines("q, k and v must be (T, H, d), got",
                                f"{q.shape}, {k.shape}, {v.shape}"))
    H, H_kv = q.shape[1], k.shape[1]
    if H % H_kv or k.shape[:2] != v.shape[:2] or q.shape[2] != k.shape[2]:
        raise ValueError(_lines(
            f"shapes do not fit: q {q.shape}, k {k.shape}, v {v.shape}",
            "(H a multiple of H_kv; k and v the same T and H_kv; q, k same d)"))
    cq = _cu(cu_seqlens_q, "cu_seqlens_q", q.shape[0])
    ck = _cu(cu_seqlens_k, "cu_seqlens_k", k.shape[0])
    if len(cq) != len(ck):
        raise ValueError(f"cu_seqlens_q and cu_seqlens_k must both have B + 1 "
                         f"entries, got {len(cq)} and {len(ck)}")
    out = np.zeros((q.shape[0], H, v.shape[2]))
    for b in range(len(cq) - 1):
        qb = q[cq[b]:cq[b + 1]].transpose(1, 0, 2)            # (H, n_q, d)
        kb = np.repeat(k[ck[b]:ck[b + 1]], H // H_kv, 1).transpose(1, 0, 2)
        vb = np.repeat(v[ck[b]:ck[b + 1]], H // H_kv, 1).transpose(1, 0, 2)
        nq, nk = qb.shape[1], kb.shape[1]
        if nq == 0:
            continue
        s = qb @ kb.transpose(0, 2, 1) / np.sqrt(q.shape[2])  # (H, n_q, n_k)
        if causal:
            mask = sliding_window_mask(nq, nk, window or max(nk, 1))
            s = np.where(mask, s, -np.inf)
        out[cq[b]:cq[b + 1]] = (softmax(s) @ vb).transpose(1, 0, 2)
    return out


def chunked_prefill(q, k, v, chunk, *, window=None, trim_first=False):
    """A prompt prefilled ``chunk`` tokens at a time, against a cache.

    q, k, v (..., N, d): one sequence (leading axes: heads). Each chunk's
    keys and values are appended to the cache; the chunk's queries attend to
    the cache with the causal mask (and a sliding ``window``, if given); then
    the cache is trimmed to its last ``window - 1`` entries (all that later
    queries can need). ``trim_first=True`` trims to the last ``window``
    entries *before* the chunk's queries read it: right when a chunk holds
    one token, wrong for the earlier queries of a longer chunk, which lose
    keys still inside their window (a query left with no key gets 0).
    Returns (..., N, d_v).
    """
    q, k, v = (_as_float_array(a, n) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    chunk = _whole_number(chunk, "chunk")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if window is not None and _whole_number(window, "window") < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    N = q.shape[-2]
    outs, k_cache, v_cache = [], k[..., :0, :], v[..., :0, :]
    for start in range(0, N, chunk):
        stop = min(start + chunk, N)
        k_cache = np.concatenate([k_cache, k[..., start:stop, :]], axis=-2)
        v_cache = np.concatenate([v_cache, v[..., start:stop, :]], axis=-2)
        if trim_first and window is not None:
            k_cache, v_cache = k_cache[..., -window:, :], v_cache[..., -window:, :]
        nq, nk = stop - start, k_cache.shape[-2]
        pos_q = np.arange(start, stop)[:, None]               # (n_q, 1)
        pos_k = np.arange(stop - nk, stop)[None, :]           # (1, n_k)
        mask = pos_k <= pos_q
        if window is not None:
            mask &= pos_k > pos_q - window
        s = q[..., start:stop, :] @ np.swapaxes(k_cache, -1, -2)
        s = np.where(mask, s / np.sqrt(q.shape[-1]), -np.inf)  # (..., n_q, n_k)
        m = s.max(axis=-1, keepdims=True)                     # (..., n_q, 1)
        e = np.exp(s - np.where(np.isneginf(m), 0.0, m))      # hidden -> 0
        l = e.sum(axis=-1, keepdims=True)
        outs.append((e @ v_cache) / np.where(l > 0, l, 1.0))  # none seen: 0
        if window is not None and not trim_first:
            keep = max(window - 1, 0)
            k_cache = k_cache[..., nk - min(keep, nk):, :]
            v_cache = v_cache[..., nk - min(keep, nk):, :]
    return np.concatenate(outs, axis=-2)


def simulate_batching(requests, max_batch, *, continuous=True):
    """Serve ``requests`` one decode step at a time; count what happens.

    requests: a list of ``(arrival_step, output_tokens)``. At each step every
    running sequence produces one token (its prompt is prefilled in the step
    it is admitted, producing its first token). At most ``max_batch``
    sequences run at once. Static batching admits a new batch only when the
    whole batch has finished; continuous batching admits a waiting request
    into any free place at every step. Returns a dict: ``steps`` (until the
    last token), ``tokens``, ``tokens_per_step``, ``busy`` (the mean fraction
    of the ``max_batch`` places in use over the steps), ``latency`` (mean
    steps from arrival to last token).
    """
    max_batch = _whole_number(max_batch, "max_batch")
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    reqs = sorted((int(a), int(n), i) for i, (a, n) in enumerate(requests))
    if any(n < 1 or a < 0 for a, n, _ in reqs):
        raise ValueError("every request needs arrival >= 0 and >= 1 token")
    waiting, running, done = list(reqs), {}, {}
    step, used = 0, 0
    while waiting or running:
        if continuous or not running:
            while len(running) < max_batch and waiting and waiting[0][0] <= step:
                a, n, i = waiting.pop(0)
                running[i] = [n, a]
        used += len(running)
        for i in list(running):
            running[i][0] -= 1
            if running[i][0] == 0:
                done[i] = step + 1 - running.pop(i)[1]
        step += 1
    tokens = sum(n for _, n, _ in reqs)
    return {"steps": step, "tokens": tokens, "tokens_per_step": tokens / step,
            "busy": used / (step * max_batch),
            "latency": float(np.mean(list(done.values())))}
