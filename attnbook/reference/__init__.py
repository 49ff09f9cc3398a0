"""The answer key: clean, documented reference implementations, one module per part.

Chapters write the attention math themselves, line by line; at the end they
assert that their version agrees with the functions here. Everything is plain
NumPy.

Conventions used throughout the book
------------------------------------
* Shapes: queries ``(..., Nq, dk)``, keys ``(..., Nk, dk)``, values
  ``(..., Nk, dv)``; any leading batch or head dimensions, broadcast against
  each other.
* Masks are boolean and **True means "may attend"** (the polarity of
  ``torch.nn.functional.scaled_dot_product_attention``). A mask must broadcast
  to the score shape ``(..., Nq, Nk)``.
* A query row whose every key is masked has no softmax (the denominator is a
  sum of nothing). By default that is an error (``fully_masked="raise"``);
  pass ``fully_masked="zeros"`` to get all-zero weights and a zero output for
  such rows instead. The masking chapter explains the choice.
* Multi-head attention takes one mask rule, :func:`mask_for_heads`, shared
  by :func:`multihead_attention`, :func:`multihead_cross_attention` and
  ``attnbook.torch_attention.MultiHeadSelfAttention``.
* Error messages fit in 79 characters per line, ``ValueError: `` included,
  since they appear in the book's outputs.

Where each part's answer key lives (chapters import every name from here):

==============================  ==========================================
Parts I-II (chapters 02-07)     :mod:`attnbook.reference.attention`
Part III (chapters 08-09)       :mod:`attnbook.reference.multihead`
Part V (chapters 11-12)         :mod:`attnbook.reference.learn`
Part VI: RoPE (13)              :mod:`attnbook.reference.rope`
Part VI: the KV cache (14)      :mod:`attnbook.reference.kv_cache`
Part VI: GQA, LLaMA (15)        :mod:`attnbook.reference.gqa`
Part VI: MLA (16)               :mod:`attnbook.reference.mla`
Part VII (chapters 17-18)       :mod:`attnbook.reference.fast`
Part VIII: sinks (19)           :mod:`attnbook.reference.sinks`
Part VIII: QK-norm, gates (20)  :mod:`attnbook.reference.qk_norm`
Part VIII: sparse (21)          :mod:`attnbook.reference.sparse`
Part VIII: linear (22)          :mod:`attnbook.reference.linear`
Part VIII: Gemma 4 (19b)        :mod:`attnbook.reference.kv_sharing`
Part VIII: DeepSeek-V4 (21b)    :mod:`attnbook.reference.compressed`
Part VIII: differential (20b)   :mod:`attnbook.reference.differential`
Part VIII: Kimi's KDA (22c)     :mod:`attnbook.reference.kimi`
Part IX: serving (24, 24b)      :mod:`attnbook.reference.serving`
Part IX: distributed (25)       :mod:`attnbook.reference.distributed`
==============================  ==========================================

Shared validation (arrays, masks, weights) is in :mod:`attnbook.validate`,
which imports nothing of the package: no module here imports this facade.
"""

from .attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .distributed import (all_to_all, causal_pairs, communication_bytes,
                          ring_attention, ring_schedule, shard_positions,
                          ulysses_attention)
from .fast import (attention_state, flash_attention, flash_attention_backward,
                   merge_attention_states, online_softmax_state)
from .gqa import grouped_query_attention, llama_attention
from .kv_cache import sliding_window_mask
from .linear import (chunked_gated_delta_rule, delta_rule_step, gated_delta_rule,
                     linear_attention)
from .learn import attention_backward, cross_entropy, self_attention_backward
from .mla import MLAWeights, mla_attention, mla_latents, mla_queries, rms_norm
from .multihead import (mask_for_heads, merge_heads, multihead_attention,
                        multihead_cross_attention, split_heads)
from .qk_norm import (gated_attention_output, qk_norm_attention, soft_cap,
                      split_query_gate)
from .rope import rope, rope_angles
from .sinks import attention_with_sinks, reach_after_layers
from .serving import (BlockPool, chunked_prefill, gather_pages, paged_attention,
                      simulate_batching, varlen_attention)
from .sparse import indexer_scores, topk_mask, topk_sparse_attention
from .compressed import (compress_kv, compress_kv_overlapping, compressed_causal_mask,
                         deepseek_v4_attention, grouped_output_projection, rope_tail)
from .kv_sharing import (gemma4_attention, kv_cache_numbers, kv_source_layers,
                         proportional_rope)
from .differential import (differential_attention, differential_lambda,
                           differential_lambda_init)
from .kimi import chunked_kimi_delta_rule, kimi_delta_rule

__all__ = [
    # Parts I-III
    "softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
    "split_heads", "merge_heads", "multihead_attention", "multihead_cross_attention",
    "mask_for_heads",
    # Part V
    "attention_backward", "cross_entropy", "self_attention_backward",
    # Part VI
    "rope", "rope_angles", "grouped_query_attention", "llama_attention",
    "sliding_window_mask", "rms_norm", "MLAWeights", "mla_attention", "mla_latents",
    "mla_queries",
    # Part VII
    "flash_attention", "online_softmax_state", "attention_state", "merge_attention_states",
    "flash_attention_backward",
    # Part VIII
    "attention_with_sinks", "reach_after_layers",
    "soft_cap", "split_query_gate", "gated_attention_output", "qk_norm_attention",
    "indexer_scores", "topk_mask", "topk_sparse_attention",
    "linear_attention", "delta_rule_step", "gated_delta_rule", "chunked_gated_delta_rule",
    "compress_kv", "compress_kv_overlapping", "compressed_causal_mask", "rope_tail",
    "grouped_output_projection", "deepseek_v4_attention",
    "proportional_rope", "gemma4_attention", "kv_source_layers", "kv_cache_numbers",
    "differential_lambda_init", "differential_lambda", "differential_attention",
    "kimi_delta_rule", "chunked_kimi_delta_rule",
    # Part IX
    "paged_attention", "gather_pages", "BlockPool", "varlen_attention", "chunked_prefill",
    "simulate_batching", "shard_positions", "ring_schedule", "causal_pairs",
    "ring_attention", "all_to_all", "ulysses_attention", "communication_bytes",
]
