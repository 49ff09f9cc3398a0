"""The answer key of Part IX (chapters 24, 24b, 25) against PyTorch's
scaled_dot_product_attention, its errors, and the flips each comparison catches
(skipped without torch: `make torch`)."""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", F="torch.nn.functional")
rng = np.random.default_rng(35)


def sdpa(q, k, v, causal=False, gqa=False):
    """PyTorch's attention on (..., H, N, d) NumPy arrays."""
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v)]
    return F.scaled_dot_product_attention(*t, is_causal=causal, enable_gqa=gqa).numpy()


def paged_problem(B=3, H=4, H_kv=2, d=8, bs=4, nb=16, lens=(5, 1, 11)):
    table = np.stack([rng.permutation(nb)[:4] for _ in range(B)])
    q = rng.normal(size=(B, H, d))
    k = rng.normal(size=(nb, bs, H_kv, d))
    v = rng.normal(size=(nb, bs, H_kv, 6))
    return q, k, v, table, np.array(lens)


def test_paged_attention_equals_sdpa_on_the_gathered_cache():
    q, k, v, table, lens = paged_problem()
    out = ref.paged_attention(q, k, v, table, lens)
    assert out.shape == (3, 4, 6)
    for b, n in enumerate(lens):
        i = np.arange(n)
        kb = k[table[b, i // 4], i % 4].transpose(1, 0, 2)     # (H_kv, n, d)
        vb = v[table[b, i // 4], i % 4].transpose(1, 0, 2)
        want = sdpa(q[b][:, None], kb, vb, gqa=True)[:, 0]
        np.testing.assert_allclose(out[b], want, atol=1e-12)


@pytest.mark.parametrize("flip", ["block and slot swapped", "heads h % H_kv",
                                  "seq_lens - 1"])
def test_paged_attention_comparison_catches(flip):
    q, k, v, table, lens = paged_problem()
    b, n = 2, lens[2]
    i = np.arange(n - (flip == "seq_lens - 1"))
    blk, slot = (i % 4, i // 4) if flip == "block and slot swapped" else (i // 4, i % 4)
    kb, vb = k[table[b, blk], slot], v[table[b, blk], slot]    # (n, H_kv, d)
    heads = np.arange(4) % 2 if flip == "heads h % H_kv" else np.arange(4) // 2
    want = sdpa(q[b][:, None], kb[:, heads].transpose(1, 0, 2),
                vb[:, heads].transpose(1, 0, 2))[:, 0]
    assert not np.allclose(ref.paged_attention(q, k, v, table, lens)[b], want)


@pytest.mark.parametrize("bad,words", [
    (dict(lens=(5, 0, 11)), "seq_lens[1] = 0"),
    (dict(lens=(5, 1, 17)), "needs more than"),
])
def test_paged_attention_errors(bad, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("]", r"\]")):
        ref.paged_attention(*paged_problem(**bad))


def test_paged_attention_block_out_of_range_and_shapes_named():
    q, k, v, table, lens = paged_problem()
    table[0, 1] = 99
    with pytest.raises(ValueError, match=r"block_table\[0, 1\] = 99"):
        ref.paged_attention(q, k, v, table, lens)
    with pytest.raises(ValueError, match=r"q must be \(B, H, d\)"):
        ref.paged_attention(q[0], k, v, table, lens)
    with pytest.raises(TypeError, match="integer"):
        ref.paged_attention(q, k, v, table.astype(float), lens)
    for line in str(pytest.raises(ValueError, ref.paged_attention, q, k[..., :3], v,
                                  table, lens).value).splitlines():
        assert len("ValueError: " + line) <= 79


def test_varlen_attention_equals_sdpa_per_sequence_and_decode():
    lq, lk = [3, 1, 4], [3, 6, 9]                # prompt, decode, a chunk
    cq, ck = np.r_[0, np.cumsum(lq)], np.r_[0, np.cumsum(lk)]
    q = rng.normal(size=(cq[-1], 4, 8))
    k, v = rng.normal(size=(2, ck[-1], 2, 8))
    out = ref.varlen_attention(q, k, v, cq, ck)
    for b in range(3):
        qb = q[cq[b]:cq[b + 1]].transpose(1, 0, 2)
        kb, vb = (x[ck[b]:ck[b + 1]].transpose(1, 0, 2) for x in (k, v))
        mask = torch.from_numpy(ref.causal_mask(lq[b], lk[b]))   # bottom-right
        want = F.scaled_dot_product_attention(
            *(torch.from_numpy(np.ascontiguousarray(a)) for a in (qb, kb, vb)),
            attn_mask=mask, enable_gqa=True).numpy()
        np.testing.assert_allclose(out[cq[b]:cq[b + 1]].transpose(1, 0, 2), want,
                                   atol=1e-12)
        if lq[b] < lk[b]:   # the flip: torch's is_causal aligns top-left
            assert not np.allclose(out[cq[b]:cq[b + 1]].transpose(1, 0, 2),
                                   sdpa(qb, np.repeat(kb, 2, 0), np.repeat(vb, 2, 0),
                                        causal=True))


def test_varlen_attention_errors():
    q = np.zeros((5, 2, 4))
    with pytest.raises(ValueError, match="ends at 4"):
        ref.varlen_attention(q, q, q, [0, 2, 4], [0, 2, 5])
    with pytest.raises(ValueError, match="start at 0"):
        ref.varlen_attention(q, q, q, [1, 5], [0, 5])


@pytest.mark.parametrize("window", [None, 3, 5])
@pytest.mark.parametrize("chunk", [1, 2, 4, 13])
def test_chunked_prefill_equals_one_prefill(window, chunk):
    q, k, v = rng.normal(size=(3, 2, 13, 4))
    mask = ref.sliding_window_mask(13, 13, window or 13)
    want = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)),
                                          attn_mask=torch.from_numpy(mask)).numpy()
    np.testing.assert_allclose(ref.chunked_prefill(q, k, v, chunk, window=window), want,
                               atol=1e-12)
    trimmed = ref.chunked_prefill(q, k, v, chunk, window=window, trim_first=True)
    # the flip "cache trimmed before the chunk's queries read it": wrong for chunks > 1
    assert np.allclose(trimmed, want) == (window is None or chunk == 1)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("zigzag", [False, True])
@pytest.mark.parametrize("shards", [1, 2, 4])
def test_ring_attention_equals_sdpa(causal, zigzag, shards):
    q, k, v = rng.normal(size=(3, 2, 3, 16, 8))
    np.testing.assert_allclose(ref.ring_attention(q, k, v, shards, causal=causal,
                                                  zigzag=zigzag),
                               sdpa(q, k, v, causal=causal), atol=1e-12)


def test_ring_attention_needs_equal_shards():
    q = np.zeros((10, 4))
    with pytest.raises(ValueError, match="do not split into 4 shards"):
        ref.ring_attention(q, q, q, 4)
    with pytest.raises(ValueError, match="do not split into 3 shards"):
        ref.ring_attention(np.zeros((9, 4)), np.zeros((9, 4)), np.zeros((9, 4)), 3,
                           zigzag=True)


def test_ring_flips_are_caught():
    """The checker's wrong rings (no rescaling; causal mask from positions inside the
    shard) differ from PyTorch's attention."""
    from attnbook.check import distributed as check_distributed
    q, k, v = rng.normal(size=(3, 16, 8)) * 2
    for m in check_distributed.ring_mistakes():
        assert not np.allclose(m.fn(q, k, v, 4, causal=True), sdpa(q, k, v, causal=True))


def test_zigzag_balances_and_contiguous_does_not():
    for n, p in [(16, 4), (64, 8)]:
        assert len(set(ref.causal_pairs(n, p, zigzag=True).sum(1))) == 1
        assert len(set(ref.causal_pairs(n, p).sum(1))) == p
        pos = np.sort(np.concatenate(ref.shard_positions(n, p, zigzag=True)))
        assert np.array_equal(pos, np.arange(n))


@pytest.mark.parametrize("causal", [False, True])
def test_ulysses_equals_sdpa(causal):
    q, k, v = rng.normal(size=(3, 4, 12, 8))
    for p in (1, 2, 4):
        np.testing.assert_allclose(ref.ulysses_attention(q, k, v, p, causal=causal),
                                   sdpa(q, k, v, causal=causal), atol=1e-12)
    with pytest.raises(ValueError, match="heads do not split"):
        ref.ulysses_attention(q, k, v, 3)


def test_communication_bytes():
    assert ref.communication_bytes(1024, 8, 64, 4, method="ring") == 3 * 2 * 256 * 8 * 64 * 2
    assert ref.communication_bytes(1024, 8, 64, 4, method="ulysses") == \
        0.75 * 256 * 64 * 32 * 2


def test_block_pool_shares_and_copies_on_write():
    pool = ref.BlockPool(10, 4)
    pool.append("p", 6)                    # blocks 0, 1 (1 half full)
    pool.fork("p", "a")
    assert pool.refcount[:2] == [2, 2] and pool.used == 2
    pool.append("a", 1)                    # writes into the shared half block
    assert pool.copies == 1 and pool.tables["a"] == [0, 2] and pool.refcount[1] == 1
    pool.free("p")
    assert pool.refcount[0] == 1 and 1 in pool.free_list
    with pytest.raises(MemoryError):
        ref.BlockPool(1, 2).append("x", 3)


def test_batching_simulation():
    trace = [(0, 10), (0, 2), (0, 8)]      # at most 2 at once
    static = ref.simulate_batching(trace, 2, continuous=False)
    cont = ref.simulate_batching(trace, 2)
    assert static["tokens"] == cont["tokens"] == 20
    assert (static["steps"], cont["steps"]) == (18, 12)   # 8 + 10, and 2 + 10
