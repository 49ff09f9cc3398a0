"""The PyTorch module follows the answer key's one mask rule (reference.mask_for_heads):
the same accepted shapes with the same meaning, B == NH included, and the same refusals
quoting the caller's shape. Error messages of torch_attention fit in 79 columns."""

import numpy as np
import pytest

from attnbook import reference as ref
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", ta="attnbook.torch_attention")


B, N, D = 2, 4, 6


def with_diagonal(m):
    m = np.array(m, copy=True)
    idx = np.arange(N)
    m[..., idx, idx] = True
    return m


def masks(nh, rng):
    causal = ref.causal_mask(N)
    pad = ref.padding_mask([3, 4], N)
    per_batch = with_diagonal(rng.random((B, N, N)) < 0.5)
    per_head = with_diagonal(rng.random((B, nh, N, N)) < 0.5)
    return {
        "(N, N)": causal,
        "(B, N, N)": per_batch,
        "(B, 1, N)": pad,
        "(B, 1, 1, N)": pad[:, None],
        "(B, 1, N, N)": per_batch[:, None],
        "(B, NH, N, N)": per_head,
    }


@pytest.mark.parametrize("nh", [1, 2, 3])  # nh = 2 is B == NH
@pytest.mark.parametrize("name", ["(N, N)", "(B, N, N)", "(B, 1, N)", "(B, 1, 1, N)",
                                  "(B, 1, N, N)", "(B, NH, N, N)"])
def test_module_equals_answer_key_for_every_documented_shape(nh, name):
    rng = np.random.default_rng(60 + nh)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = rng.normal(size=(D, 3 * D)), rng.normal(size=(D, D))
    mask = masks(nh, rng)[name]
    module = ta.from_answer_key(w_qkv, w_o, nh)
    with torch.no_grad():
        got, _ = module(torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(mask)))
    expected = ref.multihead_attention(x, w_qkv, w_o, nh, mask)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_padding_mask_never_mixes_sequences_when_b_equals_nh():
    rng = np.random.default_rng(70)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = rng.normal(size=(D, 3 * D)), rng.normal(size=(D, D))
    pad = ref.padding_mask([2, 4], N)                        # (B, 1, N), B == NH == 2
    module = ta.from_answer_key(w_qkv, w_o, B)
    with torch.no_grad():
        got, _ = module(torch.from_numpy(x), torch.from_numpy(pad))
        one_by_one = [module(torch.from_numpy(x[b:b + 1]), torch.from_numpy(pad[b:b + 1]))[0]
                      for b in range(B)]
    np.testing.assert_allclose(got.numpy(), torch.cat(one_by_one).numpy(), atol=1e-12)


@pytest.mark.parametrize("shape, nh", [((2, 1, 1, 1, 4), 2), ((3, 1, 4), 2), ((2, 3, 4, 4), 2),
                                       ((2, 1, 5), 2), ((5, 5), 3), ((3, 4, 4), 3)])
def test_module_refuses_what_the_answer_key_refuses(shape, nh):
    rng = np.random.default_rng(71)
    x = rng.normal(size=(B, N, D))
    w_qkv, w_o = rng.normal(size=(D, 3 * D)), rng.normal(size=(D, D))
    mask = np.ones(shape, bool)
    with pytest.raises(ValueError) as np_info:
        ref.multihead_attention(x, w_qkv, w_o, nh, mask)
    with pytest.raises(ValueError) as torch_info:
        ta.from_answer_key(w_qkv, w_o, nh)(torch.from_numpy(x), torch.from_numpy(mask))
    assert str(torch_info.value) == str(np_info.value)
    message = f"ValueError: {torch_info.value}"
    assert str(shape) in message
    assert all(len(line) <= 79 for line in message.splitlines()), message


def error_lines_ok(exc_info):
    message = f"{exc_info.type.__name__}: {exc_info.value}"
    assert all(len(line) <= 79 for line in message.splitlines()), message
    return message


def test_every_torch_attention_error_fits_79_columns():
    t = torch.ones
    q, k, v = t(3, 4, dtype=torch.float64), t(5, 4, dtype=torch.float64), t(5, 2, dtype=torch.float64)
    empty = torch.ones(3, 5, dtype=torch.bool)
    empty[1] = False
    with pytest.raises(ValueError) as info:
        ta.attention(q, k, v, fully_masked="nan")
    assert "fully_masked" in error_lines_ok(info)
    with pytest.raises(TypeError) as info:
        ta.attention(q, k, v, torch.ones(3, 5))
    assert "True = may attend" in error_lines_ok(info)
    with pytest.raises(ValueError) as info:
        ta.attention(q, k, v, empty)
    assert "every key masked" in error_lines_ok(info)
    with pytest.raises(ValueError) as info:
        ta.attention(q, k, v, torch.ones(2, 3, 5, dtype=torch.bool))
    assert "enlarge" in error_lines_ok(info)
    with pytest.raises(ValueError) as info:
        ta.attention(q, k, v, torch.ones(4, 5, dtype=torch.bool))
    assert "(4, 5)" in error_lines_ok(info)
    with pytest.raises(ValueError) as info:
        ta.MultiHeadSelfAttention(6, 6, 4)
    assert "not divisible" in error_lines_ok(info)
    m = ta.MultiHeadSelfAttention(6, 6, 2)
    with pytest.raises(ValueError) as info:
        m(torch.ones(4, 6))
    assert "(B, N, D)" in error_lines_ok(info)
    with pytest.raises(TypeError) as info:
        m(torch.ones(1, 4, 6), torch.ones(4, 4))
    assert "True = may attend" in error_lines_ok(info)
    with pytest.raises(ValueError) as info:
        ta.load_linear(torch.nn.Linear(4, 2, bias=False), np.ones((2, 4)))
    assert "(2, 4)" in error_lines_ok(info)
