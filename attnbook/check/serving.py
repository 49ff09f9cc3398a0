"""Checkers of Part IX, chapters 24 and 24b: decode attention through a block
table, and attention over sequences packed with cu_seqlens."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["paged_cases", "paged_mistakes", "check_paged_attention",
           "varlen_cases", "varlen_mistakes", "check_varlen_attention"]


def paged_cases() -> list[Case]:
    """Block tables at least ``block_size`` wide with every entry a real block,
    so a swapped (block, slot) still reads the cache and names itself."""
    rng = np.random.default_rng(24)
    out = []
    for label, B, H, H_kv, d, bs, nb, lens in [
        ("one sequence of 4 tokens, blocks of 2, one head", 1, 1, 1, 3, 2, 6, [4]),
        ("three sequences (3, 7, 4 tokens), blocks of 4, 2 heads", 3, 2, 2, 4, 4,
         10, [3, 7, 4]),
        ("two sequences (6 and 9 tokens), blocks of 3, 4 query heads "
         "sharing 2 KV heads", 2, 4, 2, 4, 3, 12, [6, 9]),
        ("one sequence of 1 token (the first decode step), blocks of 2",
         1, 2, 1, 3, 2, 4, [1]),
    ]:
        width = max(bs, -(-(max(lens) + 1) // bs))
        table = np.stack([rng.permutation(nb)[:width] for _ in range(B)])
        q = np.round(rng.normal(size=(B, H, d)), 2)
        k = np.round(rng.normal(size=(nb, bs, H_kv, d)), 2)
        v = np.round(rng.normal(size=(nb, bs, H_kv, d)), 2)
        lens = np.array(lens)
        out.append(Case(label, (q, k, v, table, lens),
                        ref.paged_attention(q, k, v, table, lens)))
    return out


def _paged(q, k_cache, v_cache, block_table, seq_lens, *, swap=False, extra=0,
           heads="group", scale=True, table=True):
    B, H, d = q.shape
    bs, H_kv = k_cache.shape[1], k_cache.shape[2]
    out = np.zeros((B, H, v_cache.shape[3]))
    for b in range(B):
        i = np.arange(int(seq_lens[b]) + extra)
        blk, slot = (i % bs, i // bs) if swap else (i // bs, i % bs)
        if table:                      # else block j read as if it were page j
            blk = block_table[b, blk]
        k = k_cache[blk, slot]                                # (n, H_kv, d)
        v = v_cache[blk, slot]
        h = np.arange(H)
        kv_head = h // (H // H_kv) if heads == "group" else h % H_kv
        s = np.einsum("hd,nhd->hn", q[b], k[:, kv_head])
        s = s / np.sqrt(d) if scale else s
        out[b] = np.einsum("hn,nhd->hd", ref.softmax(s), v[:, kv_head])
    return out


def paged_mistakes() -> list[Mistake]:
    return [
        Mistake("the block index and the slot are swapped: token i sits in "
                "block block_table[b, i // block_size], at slot "
                "i % block_size.", lambda *a: _paged(*a, swap=True)),
        Mistake("one token too few: seq_lens[b] counts every token in the "
                "cache, the new one included; read positions 0 .. "
                "seq_lens[b] - 1 (range(seq_lens[b])).",
                lambda *a: _paged(*a, extra=-1)),
        Mistake("one token too many: positions run 0 .. seq_lens[b] - 1; the "
                "slot after the last token holds stale data.",
                lambda *a: _paged(*a, extra=1)),
        Mistake("query heads read the wrong KV head: head h reads KV head "
                "h // (H // H_kv) (consecutive heads share), not h % H_kv "
                "(np.repeat(..., H // H_kv, axis=1), not np.tile).",
                lambda *a: _paged(*a, heads="mod")),
        Mistake("the scores are not scaled: divide q . k by sqrt(d).",
                lambda *a: _paged(*a, scale=False)),
        Mistake("the block table is not used: the sequence's j-th block was "
                "read from page j of the cache. Its j-th block is page "
                "block_table[b, j]; pages are handed out in any order.",
                lambda *a: _paged(*a, table=False)),
    ]


def check_paged_attention(fn: Callable) -> Verdict:
    """Check ``paged_attention(q, k_cache, v_cache, block_table, seq_lens)``
    -> (B, H, d_v), as :func:`attnbook.reference.paged_attention`."""
    return run_cases(fn, paged_cases(), "check_paged_attention",
                     mistakes=paged_mistakes())


# --- packed sequences: cu_seqlens -------------------------------------------

def varlen_cases() -> list[Case]:
    """Packed batches; the last two have fewer queries than keys (a prefill
    chunk, decode steps), where the causal mask's alignment shows."""
    rng = np.random.default_rng(241)
    out = []
    for label, lq, lk in [
        ("two prompts of 3 and 4 tokens (queries = keys)", [3, 4], [3, 4]),
        ("three prompts of 2, 5 and 1 tokens", [2, 5, 1], [2, 5, 1]),
        ("two decode steps: 1 query each, 4 and 6 keys", [1, 1], [4, 6]),
        ("a chunk of 2 queries over 5 keys, then a prompt of 3", [2, 3], [5, 3]),
    ]:
        cq, ck = np.r_[0, np.cumsum(lq)], np.r_[0, np.cumsum(lk)]
        q = np.round(rng.normal(size=(cq[-1], 2, 4)), 2)
        k = np.round(rng.normal(size=(ck[-1], 2, 4)), 2)
        v = np.round(rng.normal(size=(ck[-1], 2, 4)), 2)
        out.append(Case(label, (q, k, v, cq, ck),
                        ref.varlen_attention(q, k, v, cq, ck)))
    return out


def _packed_causal(q, k, v, cq, ck, *, per_sequence=False, top_left=False,
                   scale=True):
    """Attention with one mask over the whole packed batch, or per sequence
    with the causal mask aligned top-left."""
    qh, kh, vh = (x.transpose(1, 0, 2) for x in (q, k, v))    # (H, T, d)
    s = qh @ kh.transpose(0, 2, 1)                            # (H, T_q, T_k)
    s = s / np.sqrt(q.shape[2]) if scale else s
    if per_sequence:
        mask = np.zeros((q.shape[0], k.shape[0]), bool)
        for b in range(len(cq) - 1):
            nq, nk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
            tri = np.tril(np.ones((nq, nk), bool)) if top_left else \
                ref.causal_mask(nq, nk)
            mask[cq[b]:cq[b + 1], ck[b]:ck[b + 1]] = tri
    else:
        mask = ref.causal_mask(q.shape[0], k.shape[0])
    s = np.where(mask, s, -np.inf)
    return (ref.softmax(s) @ vh).transpose(1, 0, 2)


def varlen_mistakes() -> list[Mistake]:
    def no_mask(q, k, v, cq, ck):
        out = np.zeros((q.shape[0], q.shape[1], v.shape[2]))
        for b in range(len(cq) - 1):
            o, _ = ref.scaled_dot_product_attention(
                q[cq[b]:cq[b + 1]].transpose(1, 0, 2),
                k[ck[b]:ck[b + 1]].transpose(1, 0, 2),
                v[ck[b]:ck[b + 1]].transpose(1, 0, 2))
            out[cq[b]:cq[b + 1]] = o.transpose(1, 0, 2)
        return out

    def per_sequence(q, k, v, cq, ck, *, keys_by_cq=False, reshape=False):
        out = np.zeros((q.shape[0], q.shape[1], v.shape[2]))
        ck = cq if keys_by_cq else ck                  # keys cut by cu_q
        for b in range(len(cq) - 1):
            nq, nk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
            o, _ = ref.scaled_dot_product_attention(
                q[cq[b]:cq[b + 1]].transpose(1, 0, 2),
                k[ck[b]:ck[b + 1]].transpose(1, 0, 2),
                v[ck[b]:ck[b + 1]].transpose(1, 0, 2), ref.causal_mask(nq, nk))
            out[cq[b]:cq[b + 1]] = (o.reshape(nq, q.shape[1], -1) if reshape
                                    else o.transpose(1, 0, 2))
        return out

    return [
        Mistake("one causal mask over the whole packed batch: a sequence's "
                "queries see the keys of the sequences packed before it. Cut "
                "each sequence out with cu_seqlens (tokens cu[b]:cu[b + 1]).",
                lambda *a: _packed_causal(*a)),
        Mistake("the causal mask is aligned top-left: when a sequence has "
                "fewer queries than keys (decode, a prefill chunk), its "
                "queries are the LAST ones: query i sits at position "
                "n_k - n_q + i (ref.causal_mask(n_q, n_k)).",
                lambda *a: _packed_causal(*a, per_sequence=True, top_left=True)),
        Mistake("no causal mask: within its sequence, a query may not see "
                "later tokens.", no_mask),
        Mistake("the scores are not scaled: divide q . k by sqrt(d).",
                lambda *a: _packed_causal(*a, per_sequence=True, scale=False)),
        Mistake("the keys were cut with cu_seqlens_q: sequence b's keys and "
                "values are rows cu_seqlens_k[b]:cu_seqlens_k[b + 1] of k and "
                "v; cu_seqlens_q cuts only q (they differ at decode steps).",
                lambda *a: per_sequence(*a, keys_by_cq=True)),
        Mistake("each sequence's output was reshaped from (H, n, d) to "
                "(n, H, d), which scrambles heads and tokens: transpose it, "
                "o.transpose(1, 0, 2).",
                lambda *a: per_sequence(*a, reshape=True)),
    ]


def check_varlen_attention(fn: Callable) -> Verdict:
    """Check ``varlen_attention(q, k, v, cu_seqlens_q, cu_seqlens_k)``, causal,
    -> (T_q, H, d_v), as :func:`attnbook.reference.varlen_attention`."""
    return run_cases(fn, varlen_cases(), "check_varlen_attention",
                     mistakes=varlen_mistakes())
