"""Checkers of Part II (self-attention, masking, cross-attention): a right answer passes,
typical wrong answers fail with a clear report, a stub is "not done yet"."""

import numpy as np
import pytest

from attnbook import check
from attnbook.check import self_attention as check_self_attention_part
from attnbook import reference as ref


def softmax_lastdim(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def stub(*args):
    raise NotImplementedError


# --- self-attention, batched ----------------------------------------------------

def good_self_attention(x, W_q, W_k, W_v):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    return softmax_lastdim(q @ k.swapaxes(-2, -1) / np.sqrt(k.shape[-1])) @ v


def test_self_attention_batched_passes_right_answers(capsys):
    assert check.check_self_attention_batched(good_self_attention)
    assert check.check_self_attention_batched(
        lambda x, wq, wk, wv: ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv))
    n = len(check_self_attention_part.self_attention_cases())
    assert f"all {n} cases passed" in capsys.readouterr().out


@pytest.mark.parametrize("bad, report", [
    # k.T reverses every axis of a 3-D array
    (lambda x, wq, wk, wv: softmax_lastdim((x @ wq) @ (x @ wk).T / np.sqrt(wk.shape[1])) @ (x @ wv), "raised"),
    # k.shape[1] is N, not HS, for a batch
    (lambda x, wq, wk, wv: softmax_lastdim((x @ wq) @ (x @ wk).swapaxes(-2, -1) / np.sqrt((x @ wk).shape[1]))
     @ (x @ wv), "wrong values"),
    # W_q and W_k swapped (the score matrix is transposed)
    (lambda x, wq, wk, wv: good_self_attention(x, wk, wq, wv), "wrong values"),
])
def test_self_attention_batched_catches_typical_mistakes(capsys, bad, report):
    assert not check.check_self_attention_batched(bad)
    out = capsys.readouterr().out
    assert "FAILED" in out and report in out


def test_self_attention_batched_softmax_over_wrong_axis_fails(capsys):
    def wrong_axis(x, wq, wk, wv):
        s = (x @ wq) @ (x @ wk).swapaxes(-2, -1) / np.sqrt(wk.shape[1])
        e = np.exp(s - s.max(axis=-2, keepdims=True))
        return (e / e.sum(axis=-2, keepdims=True)) @ (x @ wv)

    assert not check.check_self_attention_batched(wrong_axis)
    assert "wrong values" in capsys.readouterr().out


def test_self_attention_batched_stub(capsys):
    assert not check.check_self_attention_batched(stub)
    assert "not done yet" in capsys.readouterr().out


# --- causal mask ----------------------------------------------------------------

def test_causal_mask_passes(capsys):
    assert check.check_causal_mask(lambda n: np.tril(np.ones((n, n), dtype=bool)))
    assert "all 4 cases passed" in capsys.readouterr().out


def test_causal_mask_wrong_polarity_fails(capsys):
    assert not check.check_causal_mask(lambda n: np.triu(np.ones((n, n), dtype=bool), k=1))
    out = capsys.readouterr().out
    assert "wrong values" in out and "expected:" in out


def test_causal_mask_float_mask_is_reported(capsys):
    assert not check.check_causal_mask(lambda n: np.tril(np.ones((n, n))))
    out = capsys.readouterr().out
    assert "boolean" in out and "float64" in out


def test_causal_mask_hiding_the_diagonal_fails(capsys):
    assert not check.check_causal_mask(lambda n: np.tril(np.ones((n, n), dtype=bool), k=-1))
    assert "FAILED" in capsys.readouterr().out


def test_causal_mask_stub(capsys):
    assert not check.check_causal_mask(stub)
    assert "not done yet" in capsys.readouterr().out


# --- padding mask ---------------------------------------------------------------

def test_padding_mask_passes(capsys):
    assert check.check_padding_mask(lambda lengths, n: (np.arange(n) < lengths[:, None])[:, None, :])
    assert "all 4 cases passed" in capsys.readouterr().out


def test_padding_mask_that_hides_rows_fails_on_shape(capsys):
    assert not check.check_padding_mask(lambda lengths, n: (np.arange(n) < lengths[:, None])[:, :, None])
    assert "wrong shape: expected (2, 1, 5), got (2, 5, 1)" in capsys.readouterr().out


def test_padding_mask_without_query_axis_fails(capsys):
    assert not check.check_padding_mask(lambda lengths, n: np.arange(n) < lengths[:, None])
    assert "wrong shape" in capsys.readouterr().out


def test_padding_mask_true_means_hidden_fails(capsys):
    assert not check.check_padding_mask(lambda lengths, n: (np.arange(n) >= lengths[:, None])[:, None, :])
    assert "wrong values" in capsys.readouterr().out


def test_padding_mask_stub(capsys):
    assert not check.check_padding_mask(stub)
    assert "not done yet" in capsys.readouterr().out


# --- cross-attention --------------------------------------------------------------

def good_cross(xq, xv, W_q, W_k, W_v):
    q, k, v = xq @ W_q, xv @ W_k, xv @ W_v
    return softmax_lastdim(q @ k.swapaxes(-2, -1) / np.sqrt(k.shape[-1])) @ v


def test_cross_attention_passes(capsys):
    assert check.check_cross_attention(good_cross)
    n = len(check_self_attention_part.cross_attention_cases())
    assert f"all {n} cases passed" in capsys.readouterr().out


def test_cross_attention_values_from_the_queries_fails(capsys):
    def values_from_xq(xq, xv, W_q, W_k, W_v):
        q, k, v = xq @ W_q, xv @ W_k, xq @ W_v
        return softmax_lastdim(q @ k.swapaxes(-2, -1) / np.sqrt(k.shape[-1])) @ v

    assert not check.check_cross_attention(values_from_xq)
    assert "raised ValueError" in capsys.readouterr().out


def test_cross_attention_keys_from_the_queries_fails(capsys):
    assert not check.check_cross_attention(lambda xq, xv, wq, wk, wv: good_cross(xq, xq, wq, wk, wv))
    assert "FAILED" in capsys.readouterr().out


def test_cross_attention_stub(capsys):
    assert not check.check_cross_attention(stub)
    assert "not done yet" in capsys.readouterr().out


# --- case sizes: two different scaling mistakes never give the same numbers -----------

def _divisors(case, cross):
    """Every scale a learner may divide the scores by, named by the mistake it is."""
    xq = case.args[0]
    xv = case.args[1] if cross else xq
    wk, wv = case.args[-2], case.args[-1]
    dk, dv = wk.shape[1], wv.shape[1]
    out = {"right": np.sqrt(dk), "no scale": 1.0, "dk": dk, "times sqrt(dk)": 1 / np.sqrt(dk),
           "tokens (Nq)": np.sqrt(xq.shape[-2]), "tokens (Nk)": np.sqrt(xv.shape[-2]),
           "width D": np.sqrt(xq.shape[-1])}
    if xq.ndim == 3:
        out["batch size"] = np.sqrt(xq.shape[0])
    if dv != dk:
        out["dv"] = np.sqrt(dv)
    return out


@pytest.mark.parametrize("cross", [False, True])
def test_the_first_case_of_each_scaling_mistake_tells_it_apart(cross):
    """On the first case where a scaling mistake fails (its divisor differs from
    sqrt(dk)), no other mistake's divisor is equal to it (dv = N once made sqrt(dv)
    read as a number of tokens)."""
    cases = (check_self_attention_part.cross_attention_cases() if cross
             else check_self_attention_part.self_attention_cases())
    names = set().union(*(_divisors(c, cross) for c in cases)) - {"right"}
    for name in sorted(names):
        for case in cases:
            div = _divisors(case, cross)
            if name in div and not np.isclose(div[name], div["right"]):
                break
        others = {k: v for k, v in div.items() if k != name
                  and not (k.startswith("tokens") and name.startswith("tokens"))}
        clash = [k for k, v in others.items() if np.isclose(v, div[name])]
        assert not clash, f"{name} gives the numbers of {clash} on: {case.label}"
