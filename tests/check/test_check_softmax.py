"""The exercise checkers pass a right answer, fail wrong ones with a clear report,
and say "not done yet" for a stub."""

import numpy as np

from attnbook import check
from attnbook.check import softmax as check_softmax_part
from attnbook import reference as ref


def naive_softmax(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def stable_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_check_softmax_passes_a_stable_softmax(capsys):
    assert check.check_softmax(stable_softmax)
    assert f"all {len(check_softmax_part.softmax_cases())} cases passed" in capsys.readouterr().out


def test_check_softmax_reports_the_overflow_case(capsys):
    assert not check.check_softmax(naive_softmax)
    out = capsys.readouterr().out
    assert f"case 2/{len(check_softmax_part.softmax_cases())} FAILED: large values" in out
    assert "expected:" in out and "your function returned:" in out


def test_check_softmax_catches_the_wrong_axis(capsys):
    def wrong_axis(x):
        e = np.exp(x - x.max(axis=0, keepdims=True))
        return e / e.sum(axis=0, keepdims=True)

    assert not check.check_softmax(wrong_axis)
    assert "FAILED" in capsys.readouterr().out


def test_stub_is_not_done_yet(capsys):
    def stub(x):
        raise NotImplementedError

    verdict = check.check_softmax(stub)
    assert not verdict
    assert "not done yet" in capsys.readouterr().out


def test_exception_is_reported_not_raised(capsys):
    assert not check.check_attention(lambda q, k, v: q @ v)
    out = capsys.readouterr().out
    assert "raised ValueError" in out


def test_wrong_shape_is_named(capsys):
    assert not check.check_attention(lambda q, k, v: (q @ k.T) @ v[:, :1])
    assert "wrong shape" in capsys.readouterr().out


def test_check_attention_accepts_output_or_tuple():
    assert check.check_attention(lambda q, k, v: ref.scaled_dot_product_attention(q, k, v)[0])
    assert check.check_attention(ref.scaled_dot_product_attention)


def test_check_attention_fails_without_scaling(capsys):
    def unscaled(q, k, v):
        return stable_softmax(q @ k.T) @ v

    assert not check.check_attention(unscaled)
    assert "wrong values" in capsys.readouterr().out


def test_check_scores(capsys):
    assert check.check_scores(lambda q, k: q @ k.T / np.sqrt(k.shape[-1]))
    assert not check.check_scores(lambda q, k: q @ k.T)


def test_verdict_is_silent_in_ipython_and_truthy():
    v = check.Verdict(True, "x")
    assert v and v._ipython_display_() is None
    assert "passed" in repr(v)
    assert not check.Verdict(False, "x")


def test_checker_does_not_let_the_learner_mutate_cases():
    def mutating(x):
        x[...] = 0
        return stable_softmax(x)

    # the first call mutates its copy; a second run must still see the original cases
    check.check_softmax(mutating)
    assert check.check_softmax(stable_softmax)
