"""The checkers of "Attention that learns": they pass right answers, reject the
wrong answers learners plausibly write (naming the mistake), and never crash."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref


def _backward(flip=None):
    """A learner's attention_backward(q, k, v, d_out), right or with one mistake."""
    def fn(q, k, v, d_out):
        d = q.shape[-1]
        c = 1.0 if flip == "no scale" else (1 / d if flip == "1/dk" else 1 / np.sqrt(d))
        a = ref.softmax(q @ np.swapaxes(k, -2, -1) / np.sqrt(d))
        da = d_out @ np.swapaxes(v, -2, -1)
        if flip == "dA transposed":
            da = np.swapaxes(da, -2, -1)
        rowsum = {"rowsum axis 0": (da * a).sum(axis=-2, keepdims=True),
                  "no keepdims": (da * a).sum(axis=-1)}.get(
            flip, (da * a).sum(axis=-1, keepdims=True))
        ds = a * (da - rowsum)
        if flip == "no rowsum":
            ds = a * da
        if flip == "sign":
            ds = -ds
        if flip == "softmax skipped":
            ds = da
        dq = (np.swapaxes(ds, -2, -1) if flip == "dq transposed" else ds) @ k * c
        dk = (ds if flip == "dk without transpose" else np.swapaxes(ds, -2, -1)) @ q * c
        dv = (a if flip == "dv without transpose" else np.swapaxes(a, -2, -1)) @ d_out
        return dq, dk, dv
    return fn


def test_right_answers_pass(capsys):
    assert check.check_attention_backward(_backward())
    assert check.check_attention_backward(lambda *a: list(ref.attention_backward(*a)))  # a list too
    assert "right in all 5 cases" in capsys.readouterr().out


@pytest.mark.parametrize("flip,hint", [
    ("no rowsum", "missing its rowsum term"),
    ("rowsum axis 0", "rowsum runs over the wrong axis"),
    ("no keepdims", "lost its keepdims"),
    ("sign", "sign of the softmax step is flipped"),
    ("softmax skipped", "softmax step is skipped"),
    ("no scale", "missing the 1/sqrt(dk)"),
    ("1/dk", "divided by dk instead of sqrt(dk)"),
    ("dk without transpose", "dk is computed without the transpose"),
    ("dq transposed", "dq uses the transpose"),
    ("dv without transpose", "dv is computed without the transpose"),
    ("dA transposed", "dA is transposed"),
])
def test_wrong_backward_is_rejected_and_named(flip, hint, capsys):
    assert not check.check_attention_backward(_backward(flip))
    out = " ".join(capsys.readouterr().out.split())  # hints are wrapped over lines
    assert "FAILED" in out
    assert hint in out, out


def test_missing_batch_axis_is_rejected(capsys):
    def one_sequence_only(q, k, v, d_out):
        if q.ndim != 2:
            raise ValueError("expected 2-D arrays")
        return _backward()(q, k, v, d_out)

    def transposes_with_T(q, k, v, d_out):  # .T reverses every axis of a batch
        a = ref.softmax(q @ k.T / np.sqrt(q.shape[-1])) if q.ndim == 2 else None
        return _backward()(q, k, v, d_out) if a is not None else (q.T, k.T, v.T)

    assert not check.check_attention_backward(one_sequence_only)
    assert not check.check_attention_backward(transposes_with_T)
    assert "a batch of 2" in capsys.readouterr().out


@pytest.mark.parametrize("result", [None, 3.0, "dq", (1, 2), [np.zeros(2)] * 4,
                                    ([[1, 2], [3]], np.zeros(2), np.zeros(2)),
                                    (np.zeros((7, 7)), np.zeros(1), None)])
def test_backward_checker_never_crashes(result, capsys):
    assert not check.check_attention_backward(lambda *a: result)
    assert "FAILED" in capsys.readouterr().out


def test_backward_stub_is_not_done_yet(capsys):
    def stub(q, k, v, d_out):
        raise NotImplementedError

    assert not check.check_attention_backward(stub)
    assert "not done yet" in capsys.readouterr().out


# --- cross-entropy ---


def _ce(flip=None):
    def fn(logits, targets):
        axis = 0 if flip == "wrong axis" else -1
        z = logits - logits.max(axis=axis, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=axis, keepdims=True)
        onehot = np.eye(logits.shape[-1])[targets]
        m = 1 if flip in ("sum", "grad not divided") else targets.size
        loss = -np.log((p * onehot).sum(axis=-1)).sum() / m
        if flip == "grad not divided":
            loss = loss / targets.size
        if flip == "loss sign":
            loss = -loss
        d = (p - onehot) / m
        if flip == "no onehot":
            d = p / m
        if flip == "grad sign":
            d = -d
        return loss, d
    return fn


def test_cross_entropy_right_answer_passes(capsys):
    assert check.check_cross_entropy(_ce())
    assert "right in all 4 cases" in capsys.readouterr().out


@pytest.mark.parametrize("flip,hint", [
    ("sum", "summed over the positions, not averaged"),
    ("grad not divided", "not divided by the number of positions"),
    ("loss sign", "lost its minus sign"),
    ("no onehot", "one-hot of the target is not subtracted"),
    ("grad sign", "the sign is flipped"),
    ("wrong axis", "softmax runs over the wrong axis"),
])
def test_wrong_cross_entropy_is_rejected_and_named(flip, hint, capsys):
    assert not check.check_cross_entropy(_ce(flip))
    out = " ".join(capsys.readouterr().out.split())
    assert hint in out, out


def test_naive_exp_overflow_is_rejected(capsys):
    def naive(logits, targets):
        with np.errstate(all="ignore"):
            p = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
        onehot = np.eye(logits.shape[-1])[targets]
        return -np.log((p * onehot).sum(axis=-1)).mean(), (p - onehot) / targets.size

    assert not check.check_cross_entropy(naive)
    assert "large logits" in capsys.readouterr().out


@pytest.mark.parametrize("result", [None, 1.0, (1.0,), (None, None), ("a", "b"), [0.5, [[1], [2, 3]]]])
def test_cross_entropy_checker_never_crashes(result, capsys):
    assert not check.check_cross_entropy(lambda *a: result)
    assert "FAILED" in capsys.readouterr().out


# --- mistakes found by reading the chapters as a learner ---


def _backward_variant(kind):
    """More wrong answers a learner plausibly writes, each a whole function."""
    right = _backward()

    def fn(q, k, v, d_out):
        c = 1 / np.sqrt(q.shape[-1])
        if kind == "order":  # returns (dv, dq, dk)
            dq, dk, dv = right(q, k, v, d_out)
            return dv, dq, dk
        if kind == ".T on a batch":  # .T reverses every axis of (B, N, d)
            a = ref.softmax(q @ k.T * c)
            da = d_out @ v.T
            ds = a * (da - (da * a).sum(axis=-1, keepdims=True))
            return ds @ k * c, ds.T @ q * c, a.T @ d_out
        if kind == "scale from dv":
            c = 1 / np.sqrt(v.shape[-1])
        a = ref.softmax(q @ np.swapaxes(k, -2, -1)
                        * (1.0 if kind == "unscaled forward" else c))
        da = d_out @ np.swapaxes(v, -2, -1)
        rowsum = (da if kind == "rowsum of dA alone" else da * a).sum(
            axis=-1, keepdims=True)
        ds = a * (da - rowsum)
        return (ds @ k * c, np.swapaxes(ds, -2, -1) @ q * c,
                np.swapaxes(a, -2, -1) @ d_out)
    return fn


@pytest.mark.parametrize("kind,hint", [
    ("order", "right but in another order"),
    (".T on a batch", "right for one sequence, wrong for a batch"),
    ("scale from dv", "the scale uses dv"),
    ("unscaled forward", "forward pass inside your function leaves out"),
    ("rowsum of dA alone", "rowsum is missing its factor A"),
])
def test_more_wrong_backwards_are_named(kind, hint, capsys):
    assert not check.check_attention_backward(_backward_variant(kind))
    out = " ".join(capsys.readouterr().out.split())
    assert "FAILED" in out
    assert hint in out, out


def _ce_variant(kind):
    def fn(logits, targets):
        z = logits - logits.max(axis=-1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
        onehot = np.eye(logits.shape[-1])[targets]
        m = logits.shape[0] if kind.startswith("by sequences") else targets.size
        loss = -(log_p * onehot).sum() / m
        if kind == "by sequences, loss a mean":
            loss = -(log_p * onehot).sum() / targets.size
        if kind == "mean over every entry":
            loss = -(log_p * onehot).mean()
        return loss, (np.exp(log_p) - onehot) / m
    return fn


@pytest.mark.parametrize("kind,hint", [
    ("by sequences", "taken over logits.shape[0], the sequences"),
    ("by sequences, loss a mean", "taken over logits.shape[0], the sequences"),
    ("mean over every entry", "averaged over all the M x V entries"),
])
def test_more_wrong_cross_entropies_are_named(kind, hint, capsys):
    assert not check.check_cross_entropy(_ce_variant(kind))
    out = " ".join(capsys.readouterr().out.split())
    assert hint in out, out


def test_a_hint_that_contradicts_the_learner_is_not_given(capsys):
    # the loss is right, only the gradient is not divided: the hint about a
    # summed loss would be wrong, so it is not printed
    assert not check.check_cross_entropy(_ce("grad not divided"))
    out = " ".join(capsys.readouterr().out.split())
    assert "not divided by the number of positions" in out
    assert "summed over the positions" not in out, out
