"""Checkers of the multi-head chapters: right answers pass, the reshape-without-transpose bug fails
with a hint, stubs are not done yet."""

import numpy as np

from attnbook import check
from attnbook.check import multihead as check_multihead_part
from attnbook import reference as ref


def right_split(x, nh):
    b, n, d = x.shape
    return x.reshape(b, n, nh, d // nh).transpose(0, 2, 1, 3)


def right_merge(h):
    b, nh, n, hs = h.shape
    return h.transpose(0, 2, 1, 3).reshape(b, n, nh * hs)


def test_split_and_merge_pass(capsys):
    assert check.check_split_heads(right_split)
    assert check.check_split_heads(ref.split_heads)
    assert check.check_merge_heads(right_merge)
    assert check.check_merge_heads(ref.merge_heads)
    out = capsys.readouterr().out
    assert "check_split_heads: all 5 cases passed" in out and "check_merge_heads: all 4 cases passed" in out


def flat(out):
    """The printed report with its line breaks undone (hints are wrapped at 79 columns)."""
    return " ".join(out.split())


def test_split_without_transpose_fails_with_hint(capsys):
    def no_transpose(x, nh):
        b, n, d = x.shape
        return x.reshape(b, nh, n, d // nh)

    assert not check.check_split_heads(no_transpose)
    out = flat(capsys.readouterr().out)
    assert "case 1/5 FAILED: the pictured example" in out
    assert "wrong values" in out
    assert "without the transpose" in out and "tokens are mixed across heads" in out


def test_split_forgetting_the_swap_names_the_shape(capsys):
    def no_swap(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, nh, d // nh)

    assert not check.check_split_heads(no_swap)
    out = flat(capsys.readouterr().out)
    assert "wrong shape: expected (1, 3, 4, 2), got (1, 4, 3, 2)" in out
    assert "still need to be swapped" in out


def test_split_with_wrong_column_order_fails(capsys):
    def heads_interleaved(x, nh):  # head h gets columns h, h + NH, ... (a reshape to (B, N, HS, NH))
        b, n, d = x.shape
        return x.reshape(b, n, d // nh, nh).transpose(0, 3, 1, 2)

    assert not check.check_split_heads(heads_interleaved)
    out = flat(capsys.readouterr().out)
    assert "FAILED" in out and "hint: head h got the columns h, h + NH" in out


def test_merge_without_transpose_fails_with_hint(capsys):
    def no_transpose(h):
        b, nh, n, hs = h.shape
        return h.reshape(b, n, nh * hs)

    assert not check.check_merge_heads(no_transpose)
    out = flat(capsys.readouterr().out)
    assert "case 1/4 FAILED" in out and "without the transpose" in out


def test_stubs_not_done_yet(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError

    assert not check.check_split_heads(stub)
    assert not check.check_merge_heads(stub)
    assert not check.check_multihead_list(stub)
    out = capsys.readouterr().out
    assert out.count("not done yet") == 3 and "hint" not in out


def _mha_list(x, W_qs, W_ks, W_vs, W_o, mask=None):
    outs = [ref.scaled_dot_product_attention(x @ q, x @ k, x @ v, mask)[0] for q, k, v in zip(W_qs, W_ks, W_vs)]
    return np.concatenate(outs, axis=-1) @ W_o


def test_check_multihead_list(capsys):
    assert check.check_multihead_list(_mha_list)
    assert check.check_multihead_list(lambda *a, **k: (_mha_list(*a, **k), None))  # (output, weights) accepted
    n = len(check_multihead_part.multihead_list_cases())
    assert f"all {n} cases passed" in capsys.readouterr().out


def test_check_multihead_list_catches_ignored_mask_and_missing_projection(capsys):
    def ignores_mask(x, W_qs, W_ks, W_vs, W_o, mask=None):
        return _mha_list(x, W_qs, W_ks, W_vs, W_o)

    assert not check.check_multihead_list(ignores_mask)
    n = len(check_multihead_part.multihead_list_cases())
    assert f"case 5/{n} FAILED: two heads with a causal mask" in capsys.readouterr().out

    def averages_heads(x, W_qs, W_ks, W_vs, W_o, mask=None):  # the 'ensemble = average' misreading
        hs = W_qs[0].shape[1]
        outs = [ref.scaled_dot_product_attention(x @ q, x @ k, x @ v, mask)[0] for q, k, v in zip(W_qs, W_ks, W_vs)]
        return sum(o @ W_o[:hs] for o in outs) / len(outs)

    assert not check.check_multihead_list(averages_heads)
    assert f"case 2/{n} FAILED" in capsys.readouterr().out

    def unscaled_single_scale(x, W_qs, W_ks, W_vs, W_o, mask=None):  # scaled by sqrt(D) instead of sqrt(HS)
        d = x.shape[-1]
        outs = []
        for q, k, v in zip(W_qs, W_ks, W_vs):
            s = (x @ q) @ np.swapaxes(x @ k, -1, -2) / np.sqrt(d)
            if mask is not None:
                s = np.where(mask, s, -np.inf)
            outs.append(ref.softmax(s) @ (x @ v))
        return np.concatenate(outs, -1) @ W_o

    assert not check.check_multihead_list(unscaled_single_scale)
    assert f"case 2/{n} FAILED" in capsys.readouterr().out
