"""Checker of chapter 15 (Part VI): grouped-query attention."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["gqa_cases", "check_gqa"]


def _first_if_tuple(result):
    """The output of an (output, weights) tuple or list; anything else as it is."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0]
    return result


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


def gqa_cases() -> list[Case]:
    rng = np.random.default_rng(15)
    out = []
    for label, b, h_q, h_kv, n_q, n_k, d_k, d_v in [
        ("GQA: 4 query heads, 2 KV heads, N = 2, d = 2", 1, 4, 2, 2, 2, 2, 2),
        ("GQA: 6 query heads, 3 KV heads (groups of 2)", 1, 6, 3, 4, 4, 3, 3),
        ("8 query heads, 2 KV heads, a batch of 2", 2, 8, 2, 3, 3, 3, 3),
        ("MQA: 4 query heads, 1 KV head", 1, 4, 1, 3, 3, 3, 3),
        ("MHA: 3 query heads, 3 KV heads", 1, 3, 3, 3, 3, 3, 3),
        ("2 queries against 5 keys, d_k = 2, d_v = 3", 1, 4, 2, 2, 5, 2, 3),
    ]:
        q = rng.normal(size=(b, h_q, n_q, d_k))
        k = rng.normal(size=(b, h_kv, n_k, d_k))
        v = rng.normal(size=(b, h_kv, n_k, d_v))
        expected = ref.grouped_query_attention(q, k, v)[0]
        out.append(Case(label, (q, k, v), expected))
    return out


def _gqa_mistakes(case):
    q, k, v = case.args
    forms = [
        ("query head h read KV head h % H_kv (np.tile, or torch's "
         ".repeat): LLaMA, Qwen2 and Mistral give each KV head a block "
         "of consecutive query heads, h // (H_q // H_kv): np.repeat, "
         "torch's repeat_interleave, or a reshape to "
         "(B, H_kv, group, N, d).", _gqa_variant(q, k, v, mapping="tile")),
        ("the scores are divided by sqrt(d_v); the scale is "
         "1 / sqrt(d_k), the width of the queries and keys.",
         _gqa_variant(q, k, v, scale_by="v")),
        ("the scores are not scaled: divide them by sqrt(d_k).",
         _gqa_variant(q, k, v, scale_by="none")),
        ("the softmax ran over the queries (axis -2): each query's "
         "weights over the keys must sum to 1, softmax over axis -1.",
         _gqa_variant(q, k, v, axis=-2)),
    ]
    return [Mistake.result(hint, value) for hint, value in forms]


def check_gqa(fn: Callable) -> Verdict:
    """Check a learner's ``gqa(q, k, v)``: q (B, H_q, N_q, d_k), k
    (B, H_kv, N_k, d_k), v (B, H_kv, N_k, d_v); query head h reads KV head
    h // (H_q // H_kv). Returns the output (B, H_q, N_q, d_v), or an
    ``(output, weights)`` tuple."""
    return run_cases(fn, gqa_cases(), "check_gqa", pick=_first_if_tuple,
                     mistakes=_gqa_mistakes)
