"""FlashAttention's backward pass against PyTorch autograd: `ref.flash_attention_backward`
equals the gradients autograd takes through attention written out in torch, with a mask,
the causal skip and fully masked rows, on blocks that do not divide N; the comparison
fails when the causal alignment is flipped (torch's is_causal=True is top-left).
"""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch")

RNG = np.random.default_rng(1718)
TIGHT = dict(rtol=1e-10, atol=1e-12)


def _inputs(lead, nq, nk, dk=5, dv=3):
    return (RNG.normal(size=(*lead, nq, dk)), RNG.normal(size=(*lead, nk, dk)),
            RNG.normal(size=(*lead, nk, dv)), RNG.normal(size=(*lead, nq, dv)))


def _torch_grads(q, k, v, g, keep):
    """Autograd through attention written out in torch; fully masked rows give 0."""
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / q.shape[-1] ** 0.5
    tkeep = torch.from_numpy(np.broadcast_to(keep, s.shape).copy())
    s = s.masked_fill(~tkeep, float("-inf"))
    any_key = tkeep.any(-1, keepdim=True)
    s = torch.where(any_key, s, torch.zeros_like(s))  # no nan from a row of -inf
    w = torch.softmax(s, -1) * any_key
    (w @ tv).backward(torch.from_numpy(g))
    return tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


@pytest.mark.parametrize("nq,nk,bq,bk,causal", [(10, 13, 4, 5, False), (13, 13, 4, 3, True),
                                                (5, 12, 2, 7, True), (7, 4, 3, 2, True)])
def test_equals_torch_autograd(nq, nk, bq, bk, causal):
    q, k, v, g = _inputs((2, 2), nq, nk)
    mask = RNG.random((2, 1, nq, nk)) < 0.8
    mask[0, 0, 1] = False  # one fully masked row, whatever the draw
    keep = (ref.causal_mask(nq, nk) if causal else True) & mask
    o, lse = ref.flash_attention(q, k, v, mask, causal=causal, block_q=bq, block_k=bk,
                                 return_lse=True)
    got = ref.flash_attention_backward(q, k, v, o, lse, g, mask, causal=causal,
                                       block_q=bq, block_k=bk)
    want = _torch_grads(q, k, v, g, keep)
    for name, w, h in zip(("dq", "dk", "dv"), want, got):
        np.testing.assert_allclose(h, w, **TIGHT, err_msg=name)


def test_the_comparison_catches_a_flipped_causal_alignment():
    nq, nk = 5, 9
    q, k, v, g = _inputs((2,), nq, nk)
    o, lse = ref.flash_attention(q, k, v, causal=True, return_lse=True)
    got = ref.flash_attention_backward(q, k, v, o, lse, g, causal=True, block_q=2, block_k=3)
    want = _torch_grads(q, k, v, g, ref.causal_mask(nq, nk))
    flipped = _torch_grads(q, k, v, g, np.tril(np.ones((nq, nk), bool)))  # top-left
    np.testing.assert_allclose(got[2], want[2], **TIGHT)
    assert not np.allclose(got[2], flipped[2]) and not np.allclose(got[0], flipped[0])
