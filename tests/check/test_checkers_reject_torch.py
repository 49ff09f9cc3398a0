"""check_torch_attention and check_mha_attn_mask reject the wrong answers a learner
plausibly writes (including one that is right forward and NaN backward, and a bare
F.scaled_dot_product_attention), each with the hint that names it, and accept both
return forms."""

import math

import numpy as np
import pytest

from attnbook import check
from attnbook.check import _wrong as check_wrong
from attnbook.checking import _compare
from attnbook.check import pytorch as check_pytorch_part
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch")


def flat(text):
    return " ".join(text.split())


def run(fn, capsys):
    verdict = check.check_torch_attention(fn)
    out = capsys.readouterr().out
    for line in out.splitlines():
        assert len(line) <= 79, f"line of {len(line)} characters: {line!r}"
    return verdict, out


def scores_of(q, k, scale=None):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1] if scale is None else scale)


def right(q, k, v, mask=None):
    s = scores_of(q, k)
    if mask is None:
        w = torch.softmax(s, dim=-1)
        return w @ v, w
    empty = ~mask.any(dim=-1, keepdim=True)                  # (..., Nq, 1)
    s = s.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)
    w = torch.softmax(s, dim=-1).masked_fill(empty, 0.0)
    return w @ v, w


def additive(mask, dtype):
    """The mask as an additive 0 / -inf matrix, the other common spelling."""
    return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))


def nan_to_num_after(q, k, v, mask=None):
    s = scores_of(q, k)
    if mask is not None:
        s = s + additive(mask, s.dtype)
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return w @ v, w


def nan_to_num_after_masked_fill(q, k, v, mask=None):
    s = scores_of(q, k)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.nan_to_num(torch.softmax(s, dim=-1))
    return w @ v, w


def where_after(q, k, v, mask=None):
    s = scores_of(q, k)
    if mask is not None:
        s = s + additive(mask, s.dtype)
    w = torch.softmax(s, dim=-1)
    w = torch.where(torch.isnan(w), torch.zeros_like(w), w)
    return w @ v, w


def nan_rows(q, k, v, mask=None):
    s = scores_of(q, k)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def big_negative(q, k, v, mask=None):
    s = scores_of(q, k)
    if mask is not None:
        s = s.masked_fill(~mask, -1e9)
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def inverted(q, k, v, mask=None):
    return right(q, k, v, None if mask is None else ~mask)


def times_mask(q, k, v, mask=None):  # multiplies the weights by the mask, no renormalising
    w = torch.softmax(scores_of(q, k), dim=-1)
    if mask is not None:
        w = w * mask
    return w @ v, w


def leaves_torch(q, k, v, mask=None):  # right values, computed in NumPy: no gradient
    o, w = right(q.detach(), k.detach(), v.detach(), mask)
    return torch.from_numpy(o.numpy().copy()), w


def no_scale(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return w @ v, w


def sqrt_dv(q, k, v, mask=None):
    s = scores_of(q, k, scale=v.shape[-1])
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def sqrt_nk(q, k, v, mask=None):  # sqrt of the number of keys, not of their width
    s = scores_of(q, k, scale=k.shape[-2])
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def wrong_axis(q, k, v, mask=None):
    w = torch.softmax(scores_of(q, k), dim=-2)
    return w @ v, w


WRONG = {
    "nan_to_num after the softmax": (nan_to_num_after, "fixes the forward pass only"),
    "torch.where(isnan) after the softmax": (where_after, "fixes the forward pass only"),
    "fully masked rows left as nan": (nan_rows, "a fully masked row is not handled"),
    "-1e9 instead of -inf": (big_negative, check_pytorch_part.HINT_1E9),
    "inverted polarity": (inverted, check_wrong.HINT_POLARITY),
    "weights times the mask": (times_mask, check_pytorch_part.HINT_TIMES_MASK),
    "computed outside torch": (leaves_torch, None),
    "no scale": (no_scale, check_wrong.HINT_NO_SCALE),
    "sqrt(dv)": (sqrt_dv, check_wrong.HINT_DV),
    "sqrt(N_k)": (sqrt_nk, check_wrong.HINT_TOKENS),
    "softmax over dim -2": (wrong_axis, check_wrong.HINT_AXIS),
}


def test_nan_to_num_is_right_forward_and_caught_backward(capsys):
    verdict, out = run(nan_to_num_after, capsys)
    assert not verdict
    assert "gradient of q contains nan" in out
    # its forward values alone would pass: the backward pass is what catches it
    for case in check_pytorch_part.torch_attention_cases():
        parts = check_pytorch_part._call_torch(nan_to_num_after, case)
        assert _compare(case.expected, parts["output"]) is None
        assert _compare(case.weights, parts["weights"]) is None


def test_nan_to_num_after_masked_fill_is_right_both_ways(capsys):
    # masked_fill's backward sets the gradient of every filled entry to 0, so the
    # nan of an all -inf row never reaches q or k: forward and backward are right
    verdict, out = run(nan_to_num_after_masked_fill, capsys)
    assert verdict, out


def test_leaving_torch_is_named(capsys):
    verdict, out = run(leaves_torch, capsys)
    assert not verdict and "gradients flow back" in flat(out)


@pytest.mark.parametrize("form", ["tuple", "list", "output"])
def test_right_answer_passes_in_every_return_form(form, capsys):
    def fn(*a):
        o, w = right(*a)
        return {"tuple": (o, w), "list": [o, w], "output": o}[form]

    verdict, out = run(fn, capsys)
    assert verdict, out


@pytest.mark.parametrize("answer", [None, "text", {"a": 1}, (1, 2, 3), np.ones(3)])
def test_no_crash_on_strange_answers(answer, capsys):
    verdict, out = run(lambda *a: answer, capsys)
    assert not verdict and "FAILED" in out


def test_expected_gradients_are_finite_and_zero_for_an_empty_row():
    case = check_pytorch_part.torch_attention_cases()[4]          # query 1 has every key masked
    assert case.label.startswith("query 1 has every key masked")
    gq = case.extra["gradient of q"]
    assert np.isfinite(gq).all() and (gq[:, 1] == 0).all() and (gq[:, 0] != 0).any()


# --- issue 21: PyTorch's own function, weights never zeroed, -1e9, labels ---

def bare_sdpa(q, k, v, mask=None):  # the behaviour the chapter calls version-dependent
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sdpa_by_name(q, k, v, mask=None):  # imported under another name: still seen
    from torch.nn.functional import scaled_dot_product_attention as attend
    return attend(q, k, v, attn_mask=mask)


def sdpa_inverted(q, k, v, mask=None):
    return bare_sdpa(q, k, v, None if mask is None else ~mask)


def sdpa_rows_handled(q, k, v, mask=None):  # sdpa, with the empty rows handled: right
    if mask is None:
        return bare_sdpa(q, k, v)
    empty = ~mask.any(dim=-1, keepdim=True)                  # (..., Nq, 1)
    return bare_sdpa(q, k, v, mask | empty).masked_fill(empty, 0.0)


def never_zeroed(q, k, v, mask=None):  # finite scores for an empty row, weights kept
    s = scores_of(q, k)
    if mask is not None:
        empty = ~mask.any(dim=-1, keepdim=True)
        s = s.masked_fill(~mask, float("-inf")).masked_fill(empty, 0.0)
    w = torch.softmax(s, dim=-1)
    return w @ v, w


def big_negative_zeroed(q, k, v, mask=None):  # -1e9, and the empty rows zeroed
    s = scores_of(q, k)
    if mask is None:
        w = torch.softmax(s, dim=-1)
        return w @ v, w
    empty = ~mask.any(dim=-1, keepdim=True)
    w = torch.softmax(s.masked_fill(~mask, -1e9), dim=-1).masked_fill(empty, 0.0)
    return w @ v, w


WRONG_21 = {
    "bare F.scaled_dot_product_attention": (bare_sdpa, check_pytorch_part.HINT_SDPA),
    "scaled_dot_product_attention imported by name": (sdpa_by_name, check_pytorch_part.HINT_SDPA),
    "sdpa with the mask inverted": (sdpa_inverted, check_wrong.HINT_POLARITY),
    "empty rows' weights never zeroed": (never_zeroed, check_pytorch_part.HINT_NOT_ZEROED),
    "-1e9, empty rows zeroed": (big_negative_zeroed, check_pytorch_part.HINT_1E9),
}


@pytest.mark.parametrize("name", {**WRONG, **WRONG_21})
def test_torch_attention_rejects(name, capsys):
    fn, hint = {**WRONG, **WRONG_21}[name]
    verdict, out = run(fn, capsys)
    assert not verdict, out
    assert "FAILED" in out
    if hint is None:
        assert "hint:" not in out, out
    else:
        assert "hint:" in out and flat(hint) in flat(out), out
        assert out.count("hint:") == 1, f"more than one hint: {out}"


def test_never_zeroed_is_not_blamed_on_1e9(capsys):
    verdict, out = run(never_zeroed, capsys)
    assert not verdict and flat(check_pytorch_part.HINT_1E9) not in flat(out), out


def test_sdpa_with_the_empty_rows_handled_passes(capsys):
    # calling sdpa is fine when the fully masked rows are handled: the check runs it
    # as PyTorch < 2.5 did (nan for such rows), and this answer never depends on that
    verdict, out = run(sdpa_rows_handled, capsys)
    assert verdict, out


def test_old_sdpa_is_nan_for_an_empty_row_and_the_real_one_is_not():
    q, k, v = (torch.randn(1, 2, 4, dtype=torch.float64) for _ in range(3))
    mask = torch.tensor([[True, False], [False, False]])
    real = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    with check_pytorch_part._as_in_old_torch() as mode:
        old = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert mode.called and torch.isnan(old[0, 1]).all() and (real[0, 1] == 0).all()
    assert torch.allclose(old[0, 0], real[0, 0])


def test_a_gradient_is_shown_under_its_own_name(capsys):
    verdict, out = run(nan_to_num_after, capsys)
    assert not verdict
    assert "from your output, by autograd:" in out, out
    assert "your function returned:" not in out, out


# --- check_mha_attn_mask (10b) ---

def mha_right(keep, nh):
    return (~keep).repeat_interleave(nh, dim=0)


WRONG_MASK = {
    "not negated": (lambda m, nh: m.repeat_interleave(nh, dim=0), check_pytorch_part.HINT_MHA_NOT_NEGATED),
    "repeat instead of repeat_interleave": (lambda m, nh: (~m).repeat(nh, 1, 1),
                                            check_pytorch_part.HINT_MHA_REPEAT),
    "repeat and not negated": (lambda m, nh: m.repeat(nh, 1, 1), check_pytorch_part.HINT_MHA_REPEAT),
    "no copy per head": (lambda m, nh: ~m, check_pytorch_part.HINT_MHA_NO_COPY),
    "(B, NH, Nq, Nk) left 4-D": (lambda m, nh: (~m)[:, None].expand(-1, nh, -1, -1),
                                 check_pytorch_part.HINT_MHA_4D),
    "copied along the queries": (lambda m, nh: (~m).repeat_interleave(nh, dim=1),
                                 check_pytorch_part.HINT_MHA_AXIS),
    "copied along the keys": (lambda m, nh: (~m).repeat_interleave(nh, dim=2),
                              check_pytorch_part.HINT_MHA_AXIS),
    "an additive float mask": (lambda m, nh: torch.zeros(m.shape).masked_fill(m, float("-inf"))
                               .repeat_interleave(nh, dim=0), "boolean one, True = ignore"),
    "NumPy, not negated": (lambda m, nh: np.repeat(m.numpy(), nh, axis=0),
                           check_pytorch_part.HINT_MHA_NOT_NEGATED),
}


@pytest.mark.parametrize("name", WRONG_MASK)
def test_mha_attn_mask_rejects(name, capsys):
    fn, hint = WRONG_MASK[name]
    verdict = check.check_mha_attn_mask(fn)
    out = capsys.readouterr().out
    assert not verdict and "FAILED" in out, out
    assert flat(hint) in flat(out), out
    assert all(len(line) <= 79 for line in out.splitlines()), out


def test_mha_attn_mask_accepts_the_right_answer_and_numpy(capsys):
    assert check.check_mha_attn_mask(mha_right)
    assert check.check_mha_attn_mask(lambda m, nh: np.repeat(~m.numpy(), nh, axis=0))


def test_mha_attn_mask_cases_tell_repeat_from_repeat_interleave():
    # every case with more than one head has sequences with different masks
    for case in check_pytorch_part.mha_attn_mask_cases():
        keep, nh = case.args
        if nh > 1:
            assert not torch.equal((~keep).repeat(nh, 1, 1), mha_right(keep, nh)), case.label


def test_the_expected_mask_is_what_nn_multiheadattention_needs():
    # the answer key of the exercise, fed to the module, equals the NumPy answer key
    from attnbook import reference as ref
    from attnbook import torch_attention as ta

    rng = np.random.default_rng(5)
    for case in check_pytorch_part.mha_attn_mask_cases():
        keep, nh = case.args
        b, n_q, n_k = keep.shape
        if n_q != n_k:
            continue  # self-attention only
        d = 2 * nh
        w_qkv, w_o = rng.normal(size=(d, 3 * d)), rng.normal(size=(d, d))
        x = torch.from_numpy(rng.normal(size=(b, n_q, d)))
        y, _ = ta.to_mha(w_qkv, w_o, nh)(x, x, x, attn_mask=torch.from_numpy(case.expected))
        want = ref.multihead_attention(x.numpy(), w_qkv, w_o, nh, keep.numpy())
        assert np.allclose(y.detach().numpy(), want)


@pytest.mark.parametrize("answer", [None, "text", 3, "a bool tensor of the wrong shape"])
def test_mha_attn_mask_no_crash_on_strange_answers(answer, capsys):
    if answer == "a bool tensor of the wrong shape":
        answer = torch.ones(2, dtype=torch.bool)
    verdict = check.check_mha_attn_mask(lambda m, nh: answer)
    out = capsys.readouterr().out
    assert not verdict and "FAILED" in out, out
