"""Checkers of Part IX, chapter 25: ring attention shard by shard, and the
zigzag split of a causal sequence."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["ring_cases", "ring_mistakes", "check_ring_attention",
           "zigzag_cases", "zigzag_mistakes", "check_zigzag_positions"]


def ring_cases() -> list[Case]:
    rng = np.random.default_rng(25)
    out = []
    for label, shape, p, causal in [
        ("8 tokens, 2 shards, no mask", (8, 3), 2, False),
        ("8 tokens, 4 shards, causal", (8, 3), 4, True),
        ("2 heads of 12 tokens, 3 shards, causal", (2, 12, 4), 3, True),
        ("2 heads of 12 tokens, 4 shards, no mask", (2, 12, 4), 4, False),
    ]:
        q, k, v = (np.round(rng.normal(size=shape) * 1.5, 2) for _ in range(3))
        out.append(Case(label, (q, k, v, p), ref.ring_attention(q, k, v, p, causal=causal),
                        kwargs={"causal": causal}))
    return out


def _ring(q, k, v, n_shards, causal=False, *, local_mask=False, rescale=True,
          keep_later=False, diagonal_unmasked=False, merge="lse"):
    n = q.shape[-2]
    c = n // n_shards
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for r in range(n_shards):
        qr = q[..., r * c:(r + 1) * c, :]
        m = np.full(qr.shape[:-1], -np.inf)
        l = np.zeros(qr.shape[:-1])
        o = np.zeros(qr.shape[:-1] + (v.shape[-1],))
        for step in range(n_shards):
            j = (r - step) % n_shards
            kj, vj = k[..., j * c:(j + 1) * c, :], v[..., j * c:(j + 1) * c, :]
            mask = None
            if causal and local_mask:          # every tile as if it began at 0
                mask = ref.causal_mask(c)
            elif causal:
                if (j < r) if keep_later else (j > r):
                    continue
                if j == r and not diagonal_unmasked:
                    mask = ref.causal_mask(c)
            mj, lj, oj = ref.attention_state(qr, kj, vj, mask)
            if merge == "l not rescaled":
                m_new = np.maximum(m, mj)
                l = l + lj
                o = (np.exp(m - m_new)[..., None] * o
                     + np.exp(mj - m_new)[..., None] * oj)
                m = m_new
            elif merge == "mean":              # mean of the shards' outputs
                o, l = o + oj / lj[..., None], l + 1
            elif rescale:
                m, l, o = ref.merge_attention_states((m, l, o), (mj, lj, oj))
            else:                              # sums of unrelated exponentials
                m, l, o = np.maximum(m, mj), l + lj, o + oj
        out[..., r * c:(r + 1) * c, :] = o / l[..., None]
    return out


def ring_mistakes() -> list[Mistake]:
    return [
        Mistake("the partial results are added without rescaling: each "
                "shard's l and o are sums of exp(score - m_shard), with its "
                "own maximum. Multiply each by exp(m_shard - m_new) before "
                "adding (the log-sum-exp merge of chapter 17).",
                lambda *a, **kw: _ring(*a, **kw, rescale=False)),
        Mistake("the causal mask is applied to each tile as if every shard "
                "started at position 0: build it from the tokens' true "
                "positions (query at r*n/P + i, key at j*n/P + t): a tile "
                "of an earlier shard is all visible, a later one all hidden.",
                lambda *a, **kw: _ring(*a, **kw, local_mask=True)),
        Mistake("the wrong side of the diagonal was skipped: query r*n/P + i "
                "sees keys at positions up to its own, so the shards before "
                "rank r (j < r) are all visible and the later ones (j > r) "
                "are skipped.",
                lambda *a, **kw: _ring(*a, **kw, keep_later=True)),
        Mistake("the diagonal tile (j == r) has no causal mask: there a "
                "query sees only keys at or before its own position, "
                "ref.causal_mask(n/P).",
                lambda *a, **kw: _ring(*a, **kw, diagonal_unmasked=True)),
        Mistake("o was rescaled but l was not: the sum of weights l needs "
                "the same factors, l = exp(m - m_new) * l + exp(m_j - m_new) "
                "* l_j.",
                lambda *a, **kw: _ring(*a, **kw, merge="l not rescaled")),
        Mistake("the shards' outputs o_j / l_j were averaged: each shard's "
                "weights sum to 1 on their own, but a shard counts in "
                "proportion to its sum of exponentials; merge the states "
                "(m, l, o) and divide once at the end.",
                lambda *a, **kw: _ring(*a, **kw, merge="mean")),
    ]


def check_ring_attention(fn: Callable) -> Verdict:
    """Check ``ring_attention(q, k, v, n_shards, causal=False)`` -> (..., N, d_v)
    computed shard by shard, as :func:`attnbook.reference.ring_attention`."""
    return run_cases(fn, ring_cases(), "check_ring_attention",
                     mistakes=ring_mistakes())


# --- the zigzag split --------------------------------------------------------

def zigzag_cases() -> list[Case]:
    return [Case(f"N = {n} tokens on {p} ranks", (n, p),
                 np.stack(ref.shard_positions(n, p, zigzag=True)))
            for n, p in [(8, 2), (16, 4), (12, 3), (24, 4)]]


def _stack(result):
    return np.stack([np.asarray(r) for r in result])


def zigzag_mistakes() -> list[Mistake]:
    def pair(n, p, other):
        c = n // (2 * p)
        return [np.r_[np.arange(r * c, (r + 1) * c),
                      np.arange(other(r, p) * c, (other(r, p) + 1) * c)]
                for r in range(p)]

    def contiguous(n, p):
        return ref.shard_positions(n, p)

    def late_first(n, p):
        return [np.r_[pos[len(pos) // 2:], pos[:len(pos) // 2]]
                for pos in ref.shard_positions(n, p, zigzag=True)]

    def striped(n, p):
        return [np.arange(r, n, p) for r in range(p)]

    def long_chunks(n, p):         # chunks of n/P tokens, as if P chunks
        c = n // p
        return [np.r_[np.arange(r * c, (r + 1) * c),
                      np.arange((2 * p - 1 - r) * c, (2 * p - r) * c)]
                for r in range(p)]

    return [
        Mistake("rank r was paired with chunk P - 1 - r: with 2P chunks the "
                "partner of chunk r is chunk 2P - 1 - r (the first with the "
                "last). Here some chunks are given twice and others never.",
                lambda n, p: pair(n, p, lambda r, p: p - 1 - r)),
        Mistake("rank r was paired with chunk r + P: every rank gets an early "
                "chunk and the chunk P places later, so the ranks' work still "
                "grows with r. Pair chunk r with chunk 2P - 1 - r.",
                lambda n, p: pair(n, p, lambda r, p: r + p)),
        Mistake("this is the contiguous split (rank r holds one block of N/P "
                "tokens): cut N into 2P chunks and give rank r chunks r and "
                "2P - 1 - r.", contiguous),
        Mistake("the right chunks, but the late chunk first: give each rank's "
                "positions in ascending order (the early chunk, then the late "
                "one), the order its tokens have in the sequence.", late_first),
        Mistake("this is the striped split (rank r holds r, r + P, r + 2P, "
                "...): Striped Attention's layout, balanced too, but not the "
                "zigzag one asked for: 2P chunks of N/(2P) contiguous tokens, "
                "rank r holding chunks r and 2P - 1 - r.", striped),
        Mistake("rank r was paired with chunk 2P - r: chunks are numbered "
                "from 0, so the last is 2P - 1 and the partner of chunk r is "
                "2P - 1 - r.",
                lambda n, p: [np.asarray(x) for x in
                              pair(n, p, lambda r, p: (2 * p - r) % (2 * p))]),
        Mistake("the chunks hold N/P tokens: there are 2P chunks, so each "
                "holds N/(2P) tokens and a rank N/P in all.", long_chunks),
    ]


def check_zigzag_positions(fn: Callable) -> Verdict:
    """Check ``zigzag_positions(n, n_shards)``: a list of n_shards arrays,
    the token positions of each rank in the zigzag split, ascending."""
    return run_cases(fn, zigzag_cases(), "check_zigzag_positions",
                     mistakes=zigzag_mistakes(), pick=_stack, rtol=0, atol=0)
