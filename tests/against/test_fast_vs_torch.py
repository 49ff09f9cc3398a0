"""The tiled answer key (`ref.flash_attention`) equals PyTorch's
F.scaled_dot_product_attention, on every CPU back end that runs, with masks
and with the bottom-right causal alignment; flipping the alignment (PyTorch's
is_causal=True is top-left) makes the comparison fail, so it cannot pass by
accident.

Runs only when PyTorch is installed (`make torch`); otherwise skipped with
that reason.
"""

import warnings

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", F="torch.nn.functional",
                   SDPBackend="torch.nn.attention:SDPBackend",
                   sdpa_kernel="torch.nn.attention:sdpa_kernel",
                   causal_lower_right="torch.nn.attention.bias:causal_lower_right")

TIGHT = dict(rtol=1e-10, atol=1e-12)
# The candidates, fixed at collection (finding which run needs torch); backends() says which
# run here, and a test of one that does not is skipped with that reason.
CANDIDATES = ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")


def backends():
    """The sdpa back ends that run on this machine for float64 on the CPU."""
    x = torch.zeros(1, 1, 3, 4, dtype=torch.float64)
    found = []
    for name in CANDIDATES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with sdpa_kernel(getattr(SDPBackend, name)):
                    F.scaled_dot_product_attention(x, x, x)
            except RuntimeError:
                continue
        found.append(name)
    return found


@pytest.fixture(scope="module")
def running_backends(_imports):
    return backends()


def test_math_and_flash_back_ends_run_on_cpu(running_backends):
    # measured with torch 2.13 on CPU: EFFICIENT_ATTENTION does not run here
    assert "MATH" in running_backends and "FLASH_ATTENTION" in running_backends


@pytest.mark.parametrize("backend", CANDIDATES)
@pytest.mark.parametrize("seed", range(6))
def test_flash_equals_torch_sdpa_no_mask(backend, seed, running_backends):
    if backend not in running_backends:
        pytest.skip(f"the {backend} back end of torch's sdpa does not run here (float64, CPU)")
    rng = np.random.default_rng(seed)
    b, h, nq, nk, d = 2, 3, int(rng.integers(1, 40)), int(rng.integers(1, 40)), 8
    q, k, v = (rng.normal(size=(b, h, n, d)) for n in (nq, nk, nk))
    ours, _ = ref.flash_attention(q, k, v, block_q=7, block_k=5)
    with sdpa_kernel(getattr(SDPBackend, backend)):
        theirs = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
    np.testing.assert_allclose(ours, theirs.numpy(), **TIGHT)


@pytest.mark.parametrize("nq,nk", [(5, 12), (12, 12), (1, 9), (30, 17)])
def test_flash_causal_is_torch_causal_lower_right(nq, nk):
    rng = np.random.default_rng(nq * 100 + nk)
    q, k, v = rng.normal(size=(2, nq, 4)), rng.normal(size=(2, nk, 4)), rng.normal(size=(2, nk, 3))
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    ours, _ = ref.flash_attention(q, k, v, causal=True, block_q=4, block_k=3)
    if nq <= nk:  # with nq > nk, torch gives nan rows where the book gives zeros
        theirs = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=causal_lower_right(nq, nk))
        np.testing.assert_allclose(ours, theirs.numpy(), **TIGHT)
    if nq != nk:  # the flipped convention, top-left, must not match
        top_left = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True).numpy()
        assert not np.allclose(ours, np.nan_to_num(top_left))


def test_flash_with_a_boolean_mask_equals_torch():
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(2, 3, 6, 4)), rng.normal(size=(2, 3, 9, 4)), rng.normal(size=(2, 3, 9, 5))
    mask = rng.random((2, 1, 6, 9)) < 0.7
    mask[..., 0] = True  # every query sees at least one key (torch would give nan)
    ours, _ = ref.flash_attention(q, k, v, mask, block_q=4, block_k=4)
    theirs = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)),
                                            attn_mask=torch.from_numpy(mask))
    np.testing.assert_allclose(ours, theirs.numpy(), **TIGHT)
    flipped = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)),
                                             attn_mask=torch.from_numpy(~mask | ~mask.any(-1, keepdims=True)))
    assert not np.allclose(ours, np.nan_to_num(flipped.numpy()))
