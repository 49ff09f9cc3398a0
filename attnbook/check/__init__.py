"""Exercise checkers, one module per part of the book; chapters import every
checker from here (``from attnbook import check``; ``check.check_softmax(f)``).

==============================  ==========================================
Part I (chapters 02-04)         :mod:`attnbook.check.softmax`
Part II (chapters 05-07)        :mod:`attnbook.check.self_attention`
Part III (chapters 08-09)       :mod:`attnbook.check.multihead`
Part IV (chapter 10)            :mod:`attnbook.check.pytorch`
Part V (chapters 11-12)         :mod:`attnbook.check.learn`
Part VI: RoPE (13)              :mod:`attnbook.check.rope`
Part VI: the KV cache (14)      :mod:`attnbook.check.kv_cache`
Part VI: GQA (15)               :mod:`attnbook.check.gqa`
Part VI: MLA (16)               :mod:`attnbook.check.mla`
Part VII (chapters 17-18)       :mod:`attnbook.check.fast`
Part VII: Triton (17d, 17e)     :mod:`attnbook.check.triton_kernels`
Part VIII: sinks (19)           :mod:`attnbook.check.sinks`
Part VIII: QK-norm, gates (20)  :mod:`attnbook.check.qk_norm`
Part VIII: sparse (21)          :mod:`attnbook.check.sparse`
Part VIII: linear (22)          :mod:`attnbook.check.linear`
Part VIII: Gemma 4 (19b)        :mod:`attnbook.check.kv_sharing`
Part VIII: DeepSeek-V4 (21b)    :mod:`attnbook.check.compressed`
Part VIII: differential (20b)   :mod:`attnbook.check.differential`
Part VIII: Kimi's KDA (22c)     :mod:`attnbook.check.kimi`
Part IX: serving (24, 24b)      :mod:`attnbook.check.serving`
Part IX: distributed (25)       :mod:`attnbook.check.distributed`
==============================  ==========================================

Every checker is written the same way, on :mod:`attnbook.checking`: its
cases (computed by the answer key), its known mistakes with their hints, and
:func:`attnbook.checking.run_cases`, which runs them and prints the report:
a pass, or the first case that failed, what was expected beside what the
function returned, and the hint that names the mistake. A checker never
raises on a learner's answer, and returns a Verdict, true on a pass.
"""

from .._kit import seal_checkers as _seal_checkers
from ..checking import Case, Mistake, Verdict, run_cases
from .compressed import check_compress_kv, check_compressed_causal_mask
from .distributed import check_ring_attention, check_zigzag_positions
from .fast import (check_attention_flops, check_causal_tiles, check_flash_backward,
                   check_merge_states)
from .gqa import check_gqa
from .kv_cache import (check_cached_attention, check_kv_cache_bytes,
                       check_rolling_attention, check_sliding_window_mask)
from .linear import check_delta_rule_step, check_hybrid_bytes
from .kv_sharing import check_k_eq_v_key_value, check_kv_source_layers
from .learn import (check_attention_backward, check_cross_entropy,
                    check_self_attention_backward)
from .mla import check_absorbed_scores
from .multihead import check_merge_heads, check_multihead_list, check_split_heads
from .qk_norm import check_gated_output, check_qk_norm_queries, check_soft_cap
from .pytorch import check_mha_attn_mask, check_torch_attention
from .rope import check_rope
from .triton_kernels import (check_causal_key_end, check_load_tile, check_online_update,
                             check_row_dots)
from .sinks import check_attention_with_sinks, check_reach_after_layers
from .serving import check_paged_attention, check_varlen_attention
from .sparse import check_topk_mask
from .self_attention import (check_causal_mask, check_cross_attention,
                             check_padding_mask, check_self_attention_batched)
from .softmax import (check_attention, check_scores, check_soft_lookup, check_softmax,
                      check_temperature_softmax)
from .differential import check_differential_attention
from .kimi import check_kimi_delta_step

__all__ = [
    "Case", "Mistake", "Verdict", "run_cases",
    # Parts I-IV
    "check_softmax", "check_scores", "check_attention", "check_soft_lookup",
    "check_temperature_softmax", "check_self_attention_batched", "check_causal_mask",
    "check_padding_mask", "check_cross_attention", "check_multihead_list",
    "check_split_heads", "check_merge_heads", "check_torch_attention", "check_mha_attn_mask",
    # Part V
    "check_attention_backward", "check_cross_entropy", "check_self_attention_backward",
    # Part VI
    "check_rope", "check_cached_attention", "check_kv_cache_bytes", "check_sliding_window_mask",
    "check_rolling_attention", "check_gqa", "check_absorbed_scores",
    # Part VII
    "check_merge_states", "check_attention_flops",
    "check_causal_tiles", "check_flash_backward",
    "check_load_tile", "check_online_update", "check_causal_key_end", "check_row_dots",
    # Part VIII
    "check_attention_with_sinks", "check_reach_after_layers",
    "check_soft_cap", "check_qk_norm_queries", "check_gated_output",
    "check_topk_mask", "check_delta_rule_step", "check_hybrid_bytes",
    "check_compress_kv", "check_compressed_causal_mask",
    "check_kv_source_layers", "check_k_eq_v_key_value",
    "check_differential_attention", "check_kimi_delta_step",
    # Part IX
    "check_paged_attention", "check_varlen_attention", "check_ring_attention",
    "check_zigzag_positions",
]

# The answer-key functions each checker's exercise asks a learner to write: a student kit
# (`make student`) leaves these out of its copy of the answer key (attnbook.nbtools.kit).
ANSWER_KEY = {
    "check_attention": ["scaled_dot_product_attention"],
    "check_soft_lookup": [],
    "check_softmax": ["softmax"],
    "check_scores": [],
    "check_temperature_softmax": ["softmax"],
    "check_self_attention_batched": ["scaled_dot_product_attention"],
    "check_causal_mask": ["causal_mask"],
    "check_padding_mask": ["padding_mask"],
    "check_cross_attention": ["scaled_dot_product_attention"],
    "check_multihead_list": ["multihead_attention"],
    "check_split_heads": ["split_heads"],
    "check_merge_heads": ["merge_heads"],
    "check_torch_attention": [],
    "check_mha_attn_mask": [],
    "check_attention_backward": ["attention_backward"],
    "check_cross_entropy": ["cross_entropy"],
    "check_self_attention_backward": ["self_attention_backward"],
    "check_rope": ["rope", "rope_angles"],
    "check_kv_cache_bytes": [],
    "check_cached_attention": [],
    "check_sliding_window_mask": ["sliding_window_mask"],
    "check_rolling_attention": [],
    "check_gqa": ["grouped_query_attention"],
    "check_absorbed_scores": [],
    "check_merge_states": ["merge_attention_states"],
    "check_causal_tiles": [],
    "check_flash_backward": ["flash_attention_backward"],
    "check_attention_flops": [],
    "check_load_tile": [],
    "check_online_update": [],
    "check_causal_key_end": [],
    "check_row_dots": [],
    "check_attention_with_sinks": ["attention_with_sinks"],
    "check_reach_after_layers": ["reach_after_layers"],
    "check_soft_cap": ["soft_cap"],
    "check_qk_norm_queries": [],
    "check_gated_output": ["gated_attention_output"],
    "check_topk_mask": ["topk_mask"],
    "check_delta_rule_step": ["delta_rule_step"],
    "check_hybrid_bytes": [],
    "check_compress_kv": ["compress_kv"],
    "check_compressed_causal_mask": ["compressed_causal_mask"],
    "check_kv_source_layers": ["kv_source_layers"],
    "check_k_eq_v_key_value": [],
    "check_differential_attention": ["differential_attention"],
    "check_kimi_delta_step": ["kimi_delta_rule"],
    "check_paged_attention": ["paged_attention"],
    "check_varlen_attention": ["varlen_attention"],
    "check_ring_attention": ["ring_attention"],
    "check_zigzag_positions": [],
}

_seal_checkers(globals())  # in a student kit: the kit's checkers run on the cases they carry
