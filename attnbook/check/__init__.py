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
==============================  ==========================================

Every checker is written the same way, on :mod:`attnbook.checking`: its
cases (computed by the answer key), its known mistakes with their hints, and
:func:`attnbook.checking.run_cases`, which runs them and prints the report:
a pass, or the first case that failed, what was expected beside what the
function returned, and the hint that names the mistake. A checker never
raises on a learner's answer, and returns a Verdict, true on a pass.
"""

from ..checking import Case, Mistake, Verdict, run_cases
from .fast import check_attention_flops, check_merge_states
from .gqa import check_gqa
from .kv_cache import (check_kv_cache_bytes, check_rolling_attention,
                       check_sliding_window_mask)
from .learn import check_attention_backward, check_cross_entropy
from .mla import check_absorbed_scores
from .multihead import check_merge_heads, check_multihead_list, check_split_heads
from .pytorch import check_torch_attention
from .rope import check_rope
from .self_attention import (check_causal_mask, check_cross_attention,
                             check_padding_mask, check_self_attention_batched)
from .softmax import (check_attention, check_scores, check_soft_lookup, check_softmax,
                      check_temperature_softmax)

__all__ = [
    "Case", "Mistake", "Verdict", "run_cases",
    # Parts I-IV
    "check_softmax", "check_scores", "check_attention", "check_soft_lookup",
    "check_temperature_softmax", "check_self_attention_batched", "check_causal_mask",
    "check_padding_mask", "check_cross_attention", "check_multihead_list",
    "check_split_heads", "check_merge_heads", "check_torch_attention",
    # Part V
    "check_attention_backward", "check_cross_entropy",
    # Part VI
    "check_rope", "check_kv_cache_bytes", "check_sliding_window_mask",
    "check_rolling_attention", "check_gqa", "check_absorbed_scores",
    # Part VII
    "check_merge_states", "check_attention_flops",
]
