"""Checker of chapter 15 (Part VI): grouped-query attention."""

from __future__ import annotations

import functools

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, _call_numpy, run_cases
from ._memory import MemoryCase, within_memory

__all__ = ["gqa_cases", "check_gqa"]


def _gqa_variant(q, k, v, *, mapping="repeat", scale_by="k", axis=-1):
    """Grouped-query attention by copying KV heads, with one knob turned."""
    group = q.shape[-3] // k.shape[-3]
    if mapping == "repeat":  # query head h reads KV head h // group
        k2, v2 = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    else:  # tile: query head h reads KV head h % H_kv
        reps = (1,) * (k.ndim - 3) + (group, 1, 1)
        k2, v2 = np.tile(k, reps), np.tile(v, reps)
    d = {"k": q.shape[-1], "v": v.shape[-1], "none": 1}[scale_by]
    s = q @ np.swapaxes(k2, -1, -2) / np.sqrt(d)
    return ref.softmax(s, axis=axis) @ v2


def _gqa_scores(q, k, v, scale=True):
    """The scores (B, H_q, N_q, N_k), before the softmax."""
    group = q.shape[-3] // k.shape[-3]
    s = q @ np.swapaxes(np.repeat(k, group, axis=-3), -1, -2)
    return s / np.sqrt(q.shape[-1]) if scale else s


def _copy_message(b, h_q, n_q, n_k, d, peak):
    copy = b * h_q * n_k * d * 8
    return (f"your function held {peak / 2**20:.1f} MiB at once, while "
            f"copying the keys to all {h_q} query heads takes "
            f"{copy / 2**20:.1f} MiB and the scores "
            f"{b * h_q * n_q * n_k * 8 / 2**20:.2f} MiB.\n"
            "hint: the key/value heads are copied (np.repeat, np.tile, a "
            "concatenation, or broadcast_to(...).copy()). Reshape the "
            "queries to (B, H_kv, group, N_q, d) and give k and v a size-1 "
            "group axis: broadcasting then shares them without a copy.")


def _copy_report(b, h_q, n_q, n_k, d):
    """report(peak): the message; a partial, so a student kit can carry it as data."""
    return functools.partial(_copy_message, b, h_q, n_q, n_k, d)


def gqa_cases() -> list[Case]:
    """Six cases of values, then one that also measures memory: decoding with
    16 query heads and 1 KV head, where holding half of what a copy of the
    keys for every query head takes means the heads were copied."""
    rng = np.random.default_rng(15)
    out = []
    for label, b, h_q, h_kv, n_q, n_k, d_k, d_v in [
        ("GQA: 4 query heads, 2 KV heads, N = 2, d = 2", 1, 4, 2, 2, 2, 2, 2),
        ("GQA: 6 query heads, 3 KV heads (groups of 2)", 1, 6, 3, 4, 4, 3, 3),
        ("8 query heads, 2 KV heads, a batch of 2", 2, 8, 2, 3, 3, 3, 3),
        ("MQA: 4 query heads, 1 KV head", 1, 4, 1, 3, 3, 3, 3),
        ("MHA: 3 query heads, 3 KV heads", 1, 3, 3, 3, 3, 3, 3),
        ("2 queries against 5 keys, d_k = 2, d_v = 3", 1, 4, 2, 2, 5, 2, 3),
        ("no copies: 16 query heads, 1 KV head, 1 query against 2048 keys of "
         "width 64 (the memory your function holds is measured)",
         1, 16, 1, 1, 2048, 64, 64),
    ]:
        q = rng.normal(size=(b, h_q, n_q, d_k))
        k = rng.normal(size=(b, h_kv, n_k, d_k))
        v = rng.normal(size=(b, h_kv, n_k, d_v))
        expected, weights = ref.grouped_query_attention(q, k, v)
        if n_k < 1000:
            out.append(Case(label, (q, k, v), expected, weights=weights))
        else:  # a copy of the keys for every query head: b * h_q * n_k * d_k
            out.append(MemoryCase(label, (q, k, v), expected, weights=weights,
                                  limit=b * h_q * n_k * d_k * 8 // 2,
                                  report=_copy_report(b, h_q, n_q, n_k, d_k)))
    return out


def _grouped_weights(q, k, v):
    b, h_q, n_q, _ = q.shape
    h_kv, n_k = k.shape[-3], k.shape[-2]
    out, w = ref.grouped_query_attention(q, k, v)
    return out, w.reshape(b, h_kv, h_q // h_kv, n_q, n_k)


def _gqa_mistakes():
    return [
        Mistake("query head h read KV head h % H_kv (np.tile, or torch's "
                ".repeat): LLaMA, Qwen2 and Mistral give each KV head a block "
                "of consecutive query heads, h // (H_q // H_kv): np.repeat, "
                "torch's repeat_interleave, or a reshape to "
                "(B, H_kv, group, N, d).",
                lambda q, k, v: _gqa_variant(q, k, v, mapping="tile")),
        Mistake("the scores are divided by sqrt(d_v); the scale is "
                "1 / sqrt(d_k), the width of the queries and keys.",
                lambda q, k, v: _gqa_variant(q, k, v, scale_by="v")),
        Mistake("the scores are not scaled: divide them by sqrt(d_k).",
                lambda q, k, v: _gqa_variant(q, k, v, scale_by="none")),
        Mistake("the softmax ran over the queries (axis -2): each query's "
                "weights over the keys must sum to 1, softmax over axis -1.",
                lambda q, k, v: _gqa_variant(q, k, v, axis=-2)),
        Mistake("the second element is the scores, before the softmax: "
                "return the weights, softmax(scores), whose rows sum to 1.",
                lambda q, k, v: (ref.grouped_query_attention(q, k, v)[0],
                                 _gqa_scores(q, k, v))),
        Mistake("the second element is the unscaled scores q . k: return "
                "the weights, softmax(q . k / sqrt(d_k)).",
                lambda q, k, v: (ref.grouped_query_attention(q, k, v)[0],
                                 _gqa_scores(q, k, v, scale=False))),
        Mistake("the weights (second element) are still grouped, (B, H_kv, "
                "group, N_q, N_k): reshape them to (B, H_q, N_q, N_k), like "
                "the output.", _grouped_weights),
    ]


def check_gqa(fn: Callable) -> Verdict:
    """Check a learner's ``gqa(q, k, v)``: q (B, H_q, N_q, d_k), k
    (B, H_kv, N_k, d_k), v (B, H_kv, N_k, d_v); query head h reads KV head
    h // (H_q // H_kv). Returns the output (B, H_q, N_q, d_v), or an
    ``(output, weights)`` tuple whose weights (B, H_q, N_q, N_k) are checked
    too. The last case also measures the memory the function holds: the
    exercise asks for GQA without copying the key/value heads."""
    return run_cases(fn, gqa_cases(), "check_gqa", mistakes=_gqa_mistakes(),
                     call=within_memory(_call_numpy))
