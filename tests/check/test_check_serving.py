"""The checkers of Part IX (chapters 24, 24b, 25): the answer key passes; every listed
wrong answer fails with its own hint; no two mistakes give the same result on every case."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check import distributed as check_distributed
from attnbook.check import serving as check_serving

from checker_hints import assert_its_hint, run

PAGED = {
    "block index and slot swapped": "block index and the slot are swapped",
    "seq_lens - 1 tokens read": "one token too few",
    "seq_lens + 1 tokens read": "one token too many",
    "query head h reads KV head h % H_kv": "wrong KV head",
    "no 1/sqrt(d) scale": "not scaled",
    "block table ignored (block j read from page j)": "block table is not used",
}
VARLEN = {
    "one causal mask over the packed batch": "whole packed batch",
    "causal mask aligned top-left": "aligned top-left",
    "no causal mask": "no causal mask",
    "no 1/sqrt(d) scale": "not scaled",
    "keys cut with cu_seqlens_q": "keys were cut with cu_seqlens_q",
    "output reshaped (H, n, d) -> (n, H, d), not transposed": "reshaped from",
}
RING = {
    "merge without rescaling": "without rescaling",
    "causal mask per shard as if each shard started at 0": "started at position 0",
    "causal: earlier shards skipped, later ones kept": "wrong side of the diagonal",
    "causal: diagonal tile without a mask": "diagonal tile (j == r) has no",
    "merge rescales o but not l": "o was rescaled but l was not",
    "mean of the shards' outputs o_j / l_j": "outputs o_j / l_j were averaged",
}
ZIGZAG = {
    "chunk r paired with chunk P - 1 - r": "paired with chunk P - 1 - r",
    "chunk r paired with chunk r + P": "paired with chunk r + P",
    "contiguous split": "contiguous split",
    "late chunk first (not ascending)": "late chunk first",
    "striped split (r, r + P, ...)": "striped split",
    "chunk r paired with chunk 2P - r": "paired with chunk 2P - r",
    "chunks of N/P tokens": "chunks hold N/P tokens",
}
CHECKERS = [
    (check.check_paged_attention, check_serving.paged_mistakes, check_serving.paged_cases,
     PAGED),
    (check.check_varlen_attention, check_serving.varlen_mistakes,
     check_serving.varlen_cases, VARLEN),
    (check.check_ring_attention, check_distributed.ring_mistakes,
     check_distributed.ring_cases, RING),
    (check.check_zigzag_positions, check_distributed.zigzag_mistakes,
     check_distributed.zigzag_cases, ZIGZAG),
]
PARAMS = [(c, i) for c in range(len(CHECKERS)) for i in range(len(CHECKERS[c][3]))]


def test_answer_keys_pass():
    assert run(check.check_paged_attention, ref.paged_attention)[0]
    assert run(check.check_varlen_attention, ref.varlen_attention)[0]
    assert run(check.check_ring_attention, ref.ring_attention)[0]
    assert run(check.check_zigzag_positions,
               lambda n, p: ref.shard_positions(n, p, zigzag=True))[0]


@pytest.mark.parametrize("checker,index", PARAMS,
                         ids=[list(CHECKERS[c][3])[i] for c, i in PARAMS])
def test_each_mistake_gets_its_own_hint(checker, index):
    fn, mistakes, _, hints = CHECKERS[checker]
    assert_its_hint(fn, mistakes(), hints, index)


@pytest.mark.parametrize("checker", range(len(CHECKERS)))
def test_no_two_mistakes_agree_on_every_case(checker):
    _, mistakes, cases, _ = CHECKERS[checker]

    def result(m, c):
        try:
            return np.asarray(np.stack([np.asarray(x) for x in m.fn(*c.args, **c.kwargs)])
                              if isinstance(m.fn(*c.args, **c.kwargs), list)
                              else m.fn(*c.args, **c.kwargs))
        except Exception as exc:
            return repr(exc)
    results = [[result(m, c) for c in cases()] for m in mistakes()]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            assert not all(isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                           and a.shape == b.shape and np.allclose(a, b)
                           for a, b in zip(results[i], results[j])), (i, j)


def test_the_ring_checker_accepts_a_zigzag_free_loop_that_skips_nothing():
    """A correct ring that computes the hidden tiles too (fully masked, merged as
    (-inf, 0, 0)) passes: skipping is an optimisation, not the answer."""
    def ring(q, k, v, n_shards, causal=False):
        n = q.shape[-2] // n_shards
        out = np.zeros(q.shape[:-1] + (v.shape[-1],))
        for r in range(n_shards):
            st = (np.full(q.shape[:-2] + (n,), -np.inf), np.zeros(q.shape[:-2] + (n,)),
                  np.zeros(q.shape[:-2] + (n, v.shape[-1])))
            for j in range(n_shards):
                pq, pk = np.arange(r * n, r * n + n), np.arange(j * n, j * n + n)
                mask = pk[None] <= pq[:, None] if causal else None
                st = ref.merge_attention_states(st, ref.attention_state(
                    q[..., r * n:r * n + n, :], k[..., j * n:j * n + n, :],
                    v[..., j * n:j * n + n, :], mask))
            out[..., r * n:r * n + n, :] = st[2] / st[1][..., None]
        return out
    assert run(check.check_ring_attention, ring)[0]
