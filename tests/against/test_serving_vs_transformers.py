"""Chapters 24 and 24b against transformers' continuous batching (generate_batch, its
PagedAttentionCache), on a tiny LLaMA with random weights, on the CPU.

One ``generate_batch`` call (its manager thread and warm-up take most of the time: keep it
to one) with every attention call recorded: the packed queries, the keys and values the
layer read from the paged cache, ``cu_seq_lens_q``/``cu_seq_lens_k``, the physical indices
it read, and its output. Then:

- the greedy tokens equal plain ``generate``'s, prompt by prompt;
- ``ref.varlen_attention`` on the packed batch equals transformers' output in every layer
  and step (prefill and decode), and fails with one causal mask over the whole packed batch
  (the flip "sequences see each other") and with a top-left causal mask;
- at every decode step, a block table rebuilt from the physical indices addresses every
  key by ``block_table[i // page_size] * stride + i % page_size``, and
  ``ref.paged_attention`` on the cache's pages equals transformers' output; with the block
  index and the slot swapped it does not.

What does not run on a CPU: transformers' fused paths (``flash_attn_varlen_func``,
``flash_attn_with_kvcache`` with a block table, CUDA graphs). On a CPU, continuous batching
gathers the keys with ``index_select`` and runs eager attention (``paged|eager``), and that
is what is compared here.
"""

import numpy as np
import pytest

from attnbook import reference as ref
from attnbook.check import serving as check_serving
from optional import imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(globals(), torch="torch", transformers="transformers")

PAGE = 4                       # tokens per page (transformers' page_size)
PROMPTS = [[1, 5, 9], [2, 7, 3, 11, 4, 6], [8, 8]]
NEW = 6


@pytest.fixture(scope="module")
def run():
    from transformers import (AttentionInterface, ContinuousBatchingConfig, GenerationConfig,
                              LlamaConfig, LlamaForCausalLM)
    from transformers.integrations.eager_paged import eager_paged_attention_forward

    calls = []

    def recording(module, query, key, value, attention_mask, scaling=None, **kw):
        cache = kw["cache"]
        read = kw["read_index"][0].clone()
        cu_q = kw["cu_seq_lens_q"].clone()
        cu_k = kw["cu_seq_lens_k"]["full_attention"].clone()
        out, w = eager_paged_attention_forward(module, query, key, value, attention_mask,
                                               scaling=scaling, **kw)
        alloc = cache.layer_to_allocator[module.layer_idx]
        k_view, v_view = alloc._kv_token_views[module.layer_idx]   # (slots, H_kv, d)
        if read.numel():
            k_read, v_read = k_view[read], v_view[read]
        else:                                                      # a prefill only
            k_read, v_read = key[0].transpose(0, 1), value[0].transpose(0, 1)
        calls.append(dict(
            q=query[0].transpose(0, 1).double().numpy(),           # (T_q, H, d)
            k=k_read.double().numpy(), v=v_read.double().numpy(),  # (T_k, H_kv, d)
            out=out[0].double().numpy(),                           # (T_q, H, d)
            cu_q=cu_q.numpy(), cu_k=cu_k.numpy(), read=read.numpy(),
            k_view=k_view.double().numpy().copy(), v_view=v_view.double().numpy().copy(),
            stride=alloc.block_physical_stride, page=alloc.tokens_per_page,
            scaling=scaling, head_dim=query.shape[-1]))
        return out, w

    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    original = AttentionInterface._global_mapping["paged|eager"]
    AttentionInterface.register("paged|eager", recording)
    try:
        model.set_attn_implementation("paged|eager")
        gen = GenerationConfig(max_new_tokens=NEW, do_sample=False, eos_token_id=-1)
        cb = ContinuousBatchingConfig(page_size=PAGE, num_blocks=32, max_batch_tokens=32,
                                      allow_block_sharing=False)
        result = model.generate_batch(inputs=PROMPTS, generation_config=gen,
                                      continuous_batching_config=cb)
    finally:
        AttentionInterface._global_mapping["paged|eager"] = original
    model.set_attn_implementation("eager")
    plain = []
    with torch.no_grad():
        for p in PROMPTS:
            ids = model.generate(torch.tensor([p]), max_new_tokens=NEW, do_sample=False,
                                 eos_token_id=-1, pad_token_id=0)
            plain.append(ids[0, len(p):].tolist())
    batched = [result[f"req_{i}"].generated_tokens for i in range(len(PROMPTS))]
    return dict(calls=calls, batched=batched, plain=plain)


def test_generate_batch_gives_the_tokens_of_plain_generate(run):
    assert run["batched"] == run["plain"]
    assert all(len(t) == NEW for t in run["batched"])


def test_the_run_had_prefill_and_decode_steps_over_several_pages(run):
    decode = [c for c in run["calls"] if (np.diff(c["cu_q"]) == 1).all()]
    assert decode and len(decode) < len(run["calls"])
    assert max(np.diff(c["cu_k"]).max() for c in decode) > 2 * PAGE   # 3 pages or more
    assert all(c["page"] == PAGE for c in run["calls"])


def test_varlen_attention_equals_transformers_every_call(run):
    for c in run["calls"]:
        assert np.isclose(c["scaling"], 1 / np.sqrt(c["head_dim"]))
        ours = ref.varlen_attention(c["q"], c["k"], c["v"], c["cu_q"], c["cu_k"])
        np.testing.assert_allclose(ours, c["out"], atol=1e-5, rtol=1e-5)


def test_varlen_flips_do_not_match(run):
    """The flips the chapter names: one causal mask over the whole packed batch, and
    a causal mask aligned top-left (they differ on a prefill batch and on decode)."""
    for flip in check_serving.varlen_mistakes()[:2]:
        assert any(not np.allclose(flip.fn(c["q"], np.repeat(c["k"], 2, 1),
                                           np.repeat(c["v"], 2, 1), c["cu_q"], c["cu_k"]),
                                   c["out"], atol=1e-4)
                   for c in run["calls"]), flip.hint


def _paged_inputs(c):
    """(q, k_pages, v_pages, block_table, seq_lens) of a decode call, the block table
    rebuilt from the physical indices; asserts that every key's index follows it."""
    stride, page = c["stride"], c["page"]
    seq_lens = np.diff(c["cu_k"])
    width = int(-(-seq_lens.max() // page))
    table = np.zeros((len(seq_lens), width), dtype=np.int64)
    for b, n in enumerate(seq_lens):
        idx = c["read"][c["cu_k"][b]:c["cu_k"][b + 1]]
        i = np.arange(n)
        table[b, :-(-n // page)] = idx[::page] // stride
        assert np.array_equal(idx, table[b, i // page] * stride + i % page)
    n_blocks = -(-c["k_view"].shape[0] // stride)     # the view's last block is cut
    pages = [np.pad(x, ((0, n_blocks * stride - len(x)), (0, 0), (0, 0)))
             .reshape(n_blocks, stride, *x.shape[1:])[:, :page]
             for x in (c["k_view"], c["v_view"])]
    return c["q"], pages[0], pages[1], table, seq_lens


def test_paged_attention_equals_transformers_at_every_decode_step(run):
    decode = [c for c in run["calls"] if (np.diff(c["cu_q"]) == 1).all()]
    for c in decode:
        q, k_pages, v_pages, table, seq_lens = _paged_inputs(c)
        ours = ref.paged_attention(q, k_pages, v_pages, table, seq_lens)
        np.testing.assert_allclose(ours, c["out"], atol=1e-5, rtol=1e-5)


def test_paged_attention_with_block_and_slot_swapped_does_not_match(run):
    swap = check_serving.paged_mistakes()[0]
    assert "swapped" in swap.hint
    decode = [c for c in run["calls"] if (np.diff(c["cu_q"]) == 1).all()]
    wrong = 0
    for c in decode:
        q, k_pages, v_pages, table, seq_lens = _paged_inputs(c)
        wide = np.pad(table, ((0, 0), (0, max(0, PAGE - table.shape[1]))))
        if (seq_lens > PAGE * PAGE).any():
            continue
        wrong += not np.allclose(swap.fn(q, k_pages, v_pages, wide, seq_lens), c["out"],
                                 atol=1e-4)
    assert wrong > 0
