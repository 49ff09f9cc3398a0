"""The PyTorch chapter's exercise checker: right answers pass, typical wrong ones fail clearly."""

import math

import pytest

from attnbook import check
from optional import imports, needs

pytestmark = needs("torch")
_imports = imports(globals(), torch="torch", ta="attnbook.torch_attention")


def right(q, k, v, mask=None):
    return ta.attention(q, k, v, mask, fully_masked="zeros")


def nan_on_empty_rows(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


def wrong_polarity(q, k, v, mask=None):
    if mask is None:
        return right(q, k, v)
    return right(q, k, v, ~mask)  # True = hidden, as nn.MultiheadAttention reads it


def no_scaling(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    return w @ v, w


def output_only(q, k, v, mask=None):
    return right(q, k, v, mask)[0]


def stub(q, k, v, mask=None):
    raise NotImplementedError


def test_right_answer_passes(capsys):
    assert check.check_torch_attention(right)
    assert "all 6 cases passed" in capsys.readouterr().out


def test_output_alone_is_accepted(capsys):
    # the book's one return contract: the output, or (output, weights)
    assert check.check_torch_attention(output_only)
    assert "all 6 cases passed" in capsys.readouterr().out


@pytest.mark.parametrize("fn, needle", [
    (nan_on_empty_rows, "contains nan"),
    (wrong_polarity, "padding mask"),
    (no_scaling, "no mask"),
])
def test_typical_mistakes_fail_with_a_clear_report(fn, needle, capsys):
    assert not check.check_torch_attention(fn)
    out = capsys.readouterr().out
    assert "FAILED" in out and needle in out, out


def test_stub_is_not_done_yet(capsys):
    assert not check.check_torch_attention(stub)
    assert "not done yet" in capsys.readouterr().out
