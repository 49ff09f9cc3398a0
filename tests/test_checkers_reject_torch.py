"""check_torch_attention rejects the wrong answers a learner plausibly writes, including
one that is right forward and NaN backward, and accepts both return forms."""

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


def wrong_axis(q, k, v, mask=None):
    w = torch.softmax(scores_of(q, k), dim=-2)
    return w @ v, w


WRONG = {
    "nan_to_num after the softmax": (nan_to_num_after, "fixes the forward pass only"),
    "torch.where(isnan) after the softmax": (where_after, "fixes the forward pass only"),
    "fully masked rows left as nan": (nan_rows, "a fully masked row is not handled"),
    "-1e9 instead of -inf": (big_negative, "large finite number instead of -inf"),
    "inverted polarity": (inverted, check_wrong.HINT_POLARITY),
    "weights times the mask": (times_mask, None),
    "computed outside torch": (leaves_torch, None),
    "no scale": (no_scale, check_wrong.HINT_NO_SCALE),
    "sqrt(dv)": (sqrt_dv, check_wrong.HINT_DV),
    "softmax over dim -2": (wrong_axis, check_wrong.HINT_AXIS),
}


@pytest.mark.parametrize("name", WRONG)
def test_torch_attention_rejects(name, capsys):
    fn, hint = WRONG[name]
    verdict, out = run(fn, capsys)
    assert not verdict, out
    assert "FAILED" in out
    if hint is None:
        assert "hint:" not in out, out
    else:
        assert "hint:" in out and flat(hint) in flat(out), out


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
    case = check_pytorch_part.torch_attention_cases()[3]          # query 1 has every key masked
    gq = case.extra["gradient of q"]
    assert np.isfinite(gq).all() and (gq[:, 1] == 0).all() and (gq[:, 0] != 0).any()
