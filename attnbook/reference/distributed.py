"""Answer key of Part IX, chapter 25: attention across devices, in NumPy.

The processes of a ring are simulated one shard at a time; the same
algorithms run for real on several processes in :mod:`attnbook.distributed`.

* :func:`shard_positions`: which token positions each of P ranks holds,
  contiguous or in the zigzag split (rank r holds chunks r and 2P - 1 - r of
  2P), which balances the causal work.
* :func:`ring_attention`: each rank keeps its queries; the key/value shards
  travel round the ring, one hop per step, and each rank merges its partial
  results with the log-sum-exp merge of chapter 17
  (:func:`attnbook.reference.merge_attention_states`).
* :func:`ring_schedule` and :func:`causal_pairs`: which shard a rank holds at
  step s, and how many (query, key) pairs of each tile the causal mask keeps.
* :func:`ulysses_attention`: DeepSpeed-Ulysses: an all-to-all turns sequence
  shards into head shards, each rank attends over the whole sequence for its
  heads, a second all-to-all turns the result back.
* :func:`communication_bytes`: what each rank sends per layer, and
  :func:`all_to_all`, the collective, on lists.
"""

from __future__ import annotations

import numpy as np

from ..validate import _lines, _whole_number
from .fast import _check_qkv, attention_state, merge_attention_states

__all__ = ["shard_positions", "ring_schedule", "causal_pairs", "ring_attention",
           "all_to_all", "ulysses_attention", "communication_bytes"]


def _shards(n, n_shards, pieces):
    n = _whole_number(n, "N")
    n_shards = _whole_number(n_shards, "n_shards")
    if n_shards < 1:
        raise ValueError(f"n_shards must be >= 1, got {n_shards}")
    if n % (n_shards * pieces):
        raise ValueError(_lines(
            f"N = {n} tokens do not split into {n_shards} shards",
            f"({n_shards * pieces} equal chunks needed): pad the sequence"))
    return n, n_shards


def shard_positions(n, n_shards, *, zigzag=False):
    """The token positions each rank holds: a list of ``n_shards`` int arrays.

    Contiguous: rank r holds ``r * n/P .. (r + 1) * n/P - 1``. Zigzag: the
    sequence is cut into 2P chunks and rank r holds chunks r and 2P - 1 - r
    (an early chunk and a late one), so under a causal mask every rank has
    the same work. N must divide into P (zigzag: 2P) equal chunks.
    """
    n, p = _shards(n, n_shards, 2 if zigzag else 1)
    if not zigzag:
        return [np.arange(r * n // p, (r + 1) * n // p) for r in range(p)]
    c = n // (2 * p)
    return [np.concatenate([np.arange(r * c, (r + 1) * c),
                            np.arange((2 * p - 1 - r) * c, (2 * p - r) * c)])
            for r in range(p)]


def ring_schedule(n_shards, step):
    """The key/value shard each rank holds at ``step`` (0 .. P - 1): rank r
    starts with its own and receives from rank r - 1 at each step, so it holds
    shard ``(r - step) % P``."""
    p = _whole_number(n_shards, "n_shards")
    return [(r - _whole_number(step, "step")) % p for r in range(p)]


def causal_pairs(n, n_shards, *, zigzag=False):
    """(P, P) ints: the (query, key) pairs the causal mask keeps in the tile of
    rank r's queries and shard j's keys. A 0 is a tile the ring skips."""
    pos = shard_positions(n, n_shards, zigzag=zigzag)
    return np.array([[int((pk[None, :] <= pq[:, None]).sum()) for pk in pos]
                     for pq in pos])


def ring_attention(q, k, v, n_shards, *, causal=False, zigzag=False):
    """Ring attention computed shard by shard: equal to attention.

    q (..., N, d), k (..., N, d), v (..., N, d_v); N must divide into
    ``n_shards`` equal shards (zigzag: 2 * n_shards chunks), else
    ValueError. Rank r keeps the queries of its positions
    (:func:`shard_positions`); at step s it holds the keys and values of
    shard ``(r - s) % P`` (:func:`ring_schedule`), computes the partial
    result (m, l, o) of its queries over them, with the causal mask built
    from the tokens' true positions, and merges it into its running result
    with the log-sum-exp merge. A tile with no visible pair is skipped.
    Returns (..., N, d_v) in the original token order.
    """
    q, k, v, lead = _check_qkv(q, k, v)
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"ring attention here is self-attention: q {q.shape} "
                         f"and k {k.shape} need the same N")
    pos = shard_positions(q.shape[-2], n_shards, zigzag=zigzag)
    p = len(pos)
    out = np.zeros((*lead, q.shape[-2], v.shape[-1]))
    for r in range(p):
        qr = q[..., pos[r], :]
        state = (np.full((*lead, len(pos[r])), -np.inf),
                 np.zeros((*lead, len(pos[r]))),
                 np.zeros((*lead, len(pos[r]), v.shape[-1])))
        for step in range(p):
            j = ring_schedule(p, step)[r]
            mask = pos[j][None, :] <= pos[r][:, None] if causal else None
            if mask is not None and not mask.any():
                continue                                   # a skipped tile
            part = attention_state(qr, k[..., pos[j], :], v[..., pos[j], :], mask)
            state = merge_attention_states(state, part)
        m, l, o = state
        out[..., pos[r], :] = o / l[..., None]
    return out


def all_to_all(send):
    """The all-to-all collective on lists: ``send[r][p]`` is what rank r sends
    to rank p; returns ``recv`` with ``recv[p][r] = send[r][p]``."""
    p = len(send)
    if any(len(row) != p for row in send):
        raise ValueError(f"each of the {p} ranks must send {p} pieces")
    return [[send[r][dst] for r in range(p)] for dst in range(p)]


def ulysses_attention(q, k, v, n_shards, *, causal=False):
    """DeepSpeed-Ulysses, simulated: equal to attention.

    q (H, N, d), k (H, N, d), v (H, N, d_v). Rank r holds the tokens of
    sequence shard r for every head. All-to-all 1: rank r sends heads
    ``p*H/P .. (p+1)*H/P - 1`` of its tokens to rank p; rank p then holds
    its heads for the whole sequence and attends as usual. All-to-all 2
    sends the output back: rank r gets its tokens for every head. H and N
    must both divide by P. Returns (H, N, d_v).
    """
    q, k, v, _ = _check_qkv(q, k, v)
    if not (q.ndim == k.ndim == v.ndim == 3
            and q.shape[:2] == k.shape[:2] == v.shape[:2]):
        raise ValueError(f"q, k, v must be (H, N, d), got {q.shape}, {k.shape}, "
                         f"{v.shape}")
    H, n = q.shape[:2]
    p = _whole_number(n_shards, "n_shards")
    if p < 1 or H % p:
        raise ValueError(f"H = {H} heads do not split into {p} ranks")
    pos = shard_positions(n, p)
    hs = H // p
    heads = [slice(r * hs, (r + 1) * hs) for r in range(p)]
    local = {name: [x[:, pos[r]] for r in range(p)]           # (H, N/P, d)
             for name, x in (("q", q), ("k", k), ("v", v))}
    full = {}
    for name, shards in local.items():                       # sequence -> heads
        recv = all_to_all([[s[heads[dst]] for dst in range(p)] for s in shards])
        full[name] = [np.concatenate(pieces, axis=1) for pieces in recv]
    outs = []
    for r in range(p):                                        # (H/P, N, d)
        mask = np.tril(np.ones((n, n), bool)) if causal else None
        m, l, o = attention_state(full["q"][r], full["k"][r], full["v"][r], mask)
        outs.append(o / l[..., None])
    recv = all_to_all([[o[:, pos[dst]] for dst in range(p)] for o in outs])
    back = [np.concatenate(pieces, axis=0) for pieces in recv]  # (H, N/P, d_v)
    return np.concatenate(back, axis=1)


def communication_bytes(n, H, d, n_shards, *, method, H_kv=None, bytes_per=2):
    """Bytes one rank sends in one layer's forward pass, for a sequence of
    ``n`` tokens, ``H`` heads of width d (``H_kv`` KV heads, default H).

    ring: P - 1 steps, each sending the rank's current K and V shard:
    ``(P - 1) * 2 * (n/P) * H_kv * d``. ulysses: all-to-all of q, k, v and
    back of the output; a rank keeps 1/P of each and sends the rest:
    ``(P - 1)/P * (n/P) * d * (2 H + 2 H_kv)``.
    """
    H_kv = H if H_kv is None else H_kv
    p = _whole_number(n_shards, "n_shards")
    per_rank = n / p
    if method == "ring":
        numbers = (p - 1) * 2 * per_rank * H_kv * d
    elif method == "ulysses":
        numbers = (p - 1) / p * per_rank * d * (2 * H + 2 * H_kv)
    else:
        raise ValueError(f"method must be 'ring' or 'ulysses', got {method!r}")
    return numbers * bytes_per
