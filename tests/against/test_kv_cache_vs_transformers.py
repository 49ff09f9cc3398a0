"""The KV cache chapter (14) against Hugging Face transformers and PyTorch:
the answer key's sliding_window_mask equals the mask function of transformers'
sliding-window models (Mistral), with the queries at their absolute positions
(a cache before them); an off-by-one window and a top-left alignment do not.

Skipped, with the reason, when torch or transformers is missing (`make torch`
installs both).
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch", "transformers")
_imports = imports(globals(), torch="torch",
                   sliding_window_causal_mask_function="transformers.masking_utils:sliding_window_causal_mask_function")


CASES = [(6, 6, 3), (1, 9, 4), (3, 8, 4), (5, 5, 1), (2, 4, 10), (4, 12, 4096)]


def hf_mask(n_q, n_k, window, first_query_position):
    fn = sliding_window_causal_mask_function(window)
    q_idx = torch.arange(first_query_position, first_query_position + n_q)[:, None]
    kv_idx = torch.arange(n_k)[None, :]
    zero = torch.tensor(0)
    return fn(zero, zero, q_idx, kv_idx).expand(n_q, n_k).numpy()


@pytest.mark.parametrize("n_q,n_k,w", CASES)
def test_sliding_window_mask_equals_transformers(n_q, n_k, w):
    theirs = hf_mask(n_q, n_k, w, n_k - n_q)  # the queries come after n_k - n_q cached keys
    assert np.array_equal(ref.sliding_window_mask(n_q, n_k, w), theirs)


@pytest.mark.parametrize("n_q,n_k,w", [c for c in CASES if c[2] < c[1]])
def test_flipped_conventions_do_not_match_transformers(n_q, n_k, w):
    theirs = hf_mask(n_q, n_k, w, n_k - n_q)
    assert not np.array_equal(ref.sliding_window_mask(n_q, n_k, w + 1), theirs)  # W + 1 keys
    assert not np.array_equal(ref.sliding_window_mask(n_q, n_k, w - 1) if w > 1
                              else np.zeros((n_q, n_k), bool), theirs)  # W - 1 keys
    if n_q < n_k:  # top-left alignment: the queries at positions 0 .. n_q - 1
        top_left = ref.sliding_window_mask(n_q, n_q, w)
        top_left = np.pad(top_left, ((0, 0), (0, n_k - n_q)))
        assert not np.array_equal(top_left, theirs)


def test_sliding_window_attention_equals_torch_sdpa_with_the_mask():
    rng = np.random.default_rng(15)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 5))
    mask = ref.sliding_window_mask(3, 9, 4)
    ours, _ = ref.scaled_dot_product_attention(q, k, v, mask)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)
