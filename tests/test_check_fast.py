"""The checker of "Making attention fast": check_merge_states accepts right
merges and rejects, with a hint, the wrong merges a learner plausibly writes;
it never crashes on odd return values."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref


def right(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def right_as_list(a, b):
    return [np.asarray(t).tolist() for t in right(a, b)]


def no_rescale(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    return np.maximum(m_a, m_b), l_a + l_b, o_a + o_b


def old_sum_not_rescaled(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    be = np.exp(m_b - np.where(np.isinf(m), 0.0, m))
    return m, l_a + be * l_b, o_a + be[..., None] * o_b


def flipped_exponent(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(safe - m_a), np.exp(safe - m_b)
    return m, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def max_not_updated(a, b):
    m, l, o = right(a, b)
    return a[0], l, o


def rescaled_to_old_max(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    f = np.exp(m_b - np.where(np.isinf(m_a), 0.0, m_a))
    return m_a, l_a + f * l_b, o_a + f[..., None] * o_b


def divided_too_early(a, b):
    m, l, o = right(a, b)
    return m, l, o / l[..., None]


def nan_on_empty(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    al, be = np.exp(m_a - m), np.exp(m_b - m)  # nan where both are -inf
    return m, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def minimum(a, b):
    m, l, o = right(a, b)
    return np.minimum(a[0], b[0]), l, o


def no_batch(a, b):  # works on one sequence only: transposes o
    m, l, o = right(a, b)
    return m, l, np.swapaxes(o, -1, -2) if o.ndim == 3 else o


def one_max_for_all_rows(a, b):  # max() of the arrays: a single number
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    g = max(np.max(m_a), np.max(m_b))
    al, be = np.exp(m_a - g), np.exp(m_b - g)
    return g, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def rescaled_to_global_max(a, b):  # m per row, but the factors use one max
    m, l, o = one_max_for_all_rows(a, b)
    return np.maximum(a[0], b[0]), l, o


def no_new_axis(a, b):  # alpha * o_a without [..., None]
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, al * l_a + be * l_b, al * o_a + be * o_b


def new_axis_second(a, b):  # [:, None]: right without a batch axis only
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, al * l_a + be * l_b, al[:, None] * o_a + be[:, None] * o_b


def test_right_answers_pass(capsys):
    assert check.check_merge_states(right)
    assert check.check_merge_states(right_as_list)
    out = capsys.readouterr().out
    assert out.count("all 6 cases passed") == 2


def test_the_reference_passes():
    assert check.check_merge_states(ref.merge_attention_states)


@pytest.mark.parametrize("fn,hint", [
    (no_rescale, "nothing is rescaled"),
    (old_sum_not_rescaled, "only block b is rescaled"),
    (flipped_exponent, "the exponent is flipped"),
    (max_not_updated, "not m_a"),
    (rescaled_to_old_max, "rescaled to m_a"),
    (divided_too_early, "divided by l already"),
    (nan_on_empty, "exp(-inf - (-inf)) is nan"),
    (minimum, "the minimum was taken"),
    (no_batch, "wrong shape"),
    (one_max_for_all_rows, "each query (row) has its own maximum"),
    (rescaled_to_global_max, "rescaled to one maximum for all the rows"),
    (no_new_axis, "give a factor a last axis"),
    (new_axis_second, "[:, None] the new axis lands in the wrong place"),
])
def test_wrong_merges_are_rejected_with_a_hint(fn, hint, capsys):
    assert not check.check_merge_states(fn)
    out = capsys.readouterr().out
    assert "FAILED" in out
    assert hint in " ".join(out.split())  # hints are wrapped over lines
    assert max(len(line) for line in out.splitlines()) <= 79


@pytest.mark.parametrize("fn,words", [
    (lambda a, b: None, "return a tuple (m, l, o)"),
    (lambda a, b: (1.0, 2.0), "of length 2"),
    (lambda a, b: ("x", "y", "z"), "not an array of numbers"),
    (lambda a, b: (a[0], a[1], [[1, 2], [3]]), "not an array of numbers"),
    (lambda a, b: right(a, b)[0], "return a tuple"),
    (lambda a, b: 1 / 0, "ZeroDivisionError"),
])
def test_odd_returns_do_not_crash_the_checker(fn, words, capsys):
    assert not check.check_merge_states(fn)
    assert words in capsys.readouterr().out


def test_stub_is_not_done_yet(capsys):
    def stub(a, b):
        raise NotImplementedError

    assert not check.check_merge_states(stub)
    assert "not done yet" in capsys.readouterr().out


def test_the_checker_does_not_let_the_learner_change_its_cases():
    def vandal(a, b):
        a[1][...] = 0
        return right(a, b)

    check.check_merge_states(vandal)
    assert check.check_merge_states(right)


# --- check_attention_flops -------------------------------------------------

def flops_right(B, H, N, d, causal=False):
    return 4 * B * H * d * (N * (N + 1) // 2 if causal else N * N)


@pytest.mark.parametrize("fn,hint", [
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, d, causal) // 2, "half the answer"),
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, d, causal) // 4,
     "a quarter of the answer"),
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, d, causal) * 2,
     "twice the answer"),
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, 1, causal),
     "the width d is missing"),
    (lambda B, H, N, d, causal=False: flops_right(1, H, N, d, causal), "the batch B is missing"),
    (lambda B, H, N, d, causal=False: flops_right(B, 1, N, d, causal), "the heads H are missing"),
    (lambda B, H, N, d, causal=False: 4 * B * H * N * N * d, "query i sees i + 1 keys"),
    (lambda B, H, N, d, causal=False: 4 * B * H * N * N * d / (2 if causal else 1), "not N^2 / 2"),
    (lambda B, H, N, d, causal=False: 4 * B * H * d * (N * (N - 1) // 2 if causal else N * N),
     "not N(N-1)/2"),
])
def test_wrong_flop_counts_are_rejected_with_a_hint(fn, hint, capsys):
    assert not check.check_attention_flops(fn)
    out = capsys.readouterr().out
    assert hint in " ".join(out.split())
    assert max(len(line) for line in out.splitlines()) <= 79


@pytest.mark.parametrize("fn,words", [
    (lambda B, H, N, d, causal=False: None, "return one number"),
    (lambda B, H, N, d, causal=False: [1, 2], "return one number"),
    (lambda B, H, N, d: 4 * B * H * N * N * d, "TypeError"),
    (lambda B, H, N, d, is_causal=False: 4 * B * H * N * N * d,
     "name the last parameter causal"),
    (lambda B, H, N, d, causal=False: str(flops_right(B, H, N, d, causal)),
     "return one number"),
])
def test_flop_checker_survives_odd_answers(fn, words, capsys):
    assert not check.check_attention_flops(fn)
    assert words in " ".join(capsys.readouterr().out.split())


def test_right_flop_counts_pass(capsys):
    assert check.check_attention_flops(flops_right)
    assert check.check_attention_flops(
        lambda B, H, N, d, causal=False: float(flops_right(B, H, N, d, causal)))
    assert "all 6 cases passed" in capsys.readouterr().out
