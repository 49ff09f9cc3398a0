"""The checkers of "Attention that learns": they pass right answers, reject the
wrong answers learners plausibly write (naming the mistake), and never crash.

The wrong answers each checker rejects, with the hint it gives (every one is
a test below):

check_attention_backward (chapter 11, first exercise)
    rowsum term left out             "missing its rowsum term"
    rowsum over axis 0               "rowsum runs over the wrong axis"
    rowsum without keepdims          "lost its keepdims"
    softmax step with its sign flipped, or skipped (dS = dA)
    rowsum(dA) without the factor A  "rowsum is missing its factor A"
    scale forgotten, or divided by dk, or taken from dv, or from q.shape[0]
    or q.shape[1], or left out of the forward pass; gradients divided by B
    dK without the transpose, dQ with it, dV without it, dA transposed
    the three gradients in another order; .T on a batch
    a crash on a later case is reported under the checker's name, never
    as "(dv) FAILED" when dv was right
check_cross_entropy (chapter 12, first exercise)
    a sum instead of a mean; a mean over the sequences; a mean over all
    M x V entries; the gradient not divided by M; the loss's sign; the
    one-hot not subtracted; the gradient's sign; the softmax over the wrong
    axis; exp without the row maximum (overflow); -log(softmax) (or
    -log(p + eps)), which fails where p underflows
check_self_attention_backward (chapter 11, third exercise)
    a path of dx left out (V, K or Q), only the Q path; the scale
    forgotten; w instead of w^T; dW not summed over the batch; .T on a
    batch; dW transposed
check_rope is tested in tests/check/test_check_llm.py.
"""

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
    assert "a batch of 3" in capsys.readouterr().out


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
        log_p = z - np.log(np.exp(z).sum(axis=axis, keepdims=True))
        loss = -(log_p * onehot).sum() / m
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
    assert "right in all 5 cases" in capsys.readouterr().out


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


# --- issue 21: cases where two mistakes used to coincide, crashes, underflow ---


def _scale_variant(kind):
    """attention_backward with the scale taken from the wrong place, or the
    gradients divided by the batch size."""
    def fn(q, k, v, d_out):
        n = {"q.shape[0]": q.shape[0], "q.shape[1]": q.shape[1]}.get(
            kind, q.shape[-1])
        c = 1 / np.sqrt(n)
        a = ref.softmax(q @ np.swapaxes(k, -2, -1) * c)
        da = d_out @ np.swapaxes(v, -2, -1)
        ds = a * (da - (da * a).sum(axis=-1, keepdims=True))
        grads = (ds @ k * c, np.swapaxes(ds, -2, -1) @ q * c,
                 np.swapaxes(a, -2, -1) @ d_out)
        if kind == "divided by B" and q.ndim > 2:
            grads = tuple(g / q.shape[0] for g in grads)
        return grads
    return fn


@pytest.mark.parametrize("kind,hint,not_said", [
    ("q.shape[0]", "taken from q.shape[0]", "divided by dk instead"),
    ("q.shape[1]", "taken from q.shape[1]", ".T (or np.transpose"),
    ("divided by B", "divided by the batch size", "divided by dk instead"),
])
def test_scale_mistakes_get_their_own_hint(kind, hint, not_said, capsys):
    assert not check.check_attention_backward(_scale_variant(kind))
    out = " ".join(capsys.readouterr().out.split())
    assert hint in out and not_said not in out, out


def test_backward_cases_do_not_make_mistakes_coincide():
    # B, Nq and Nk never equal dk or sqrt(dk), and q.shape[1] != dk in a
    # batch: so dividing by any of them cannot pass for the right scale
    from attnbook.check.learn import _wrong_backward_forms, attention_backward_cases
    cases = attention_backward_cases()
    for case in cases:
        q, k = case.args[0], case.args[1]
        d = q.shape[-1]
        sizes = set(q.shape[:-1]) | {k.shape[-2]}
        assert d not in sizes and np.sqrt(d) not in sizes, case.label

    def same(a, b):
        return all(x.shape == y.shape and np.allclose(x, y) for x, y in zip(a, b))

    # on the first case where a mistake is wrong (where the checker names
    # it), no other mistake gives the same numbers
    first = {}
    for case in cases:
        right = tuple(case.expected[n] for n in ("dq", "dk", "dv"))
        forms = dict(_wrong_backward_forms(*case.args))
        for hint, wrong in forms.items():
            if hint not in first and not same(wrong, right):
                first[hint] = (case.label, forms, right)
    every = {h for c in cases for h, _ in _wrong_backward_forms(*c.args)}
    assert set(first) == every  # each mistake is wrong on some case
    for hint, (label, forms, right) in first.items():
        for other, wrong in forms.items():
            assert other == hint or not same(wrong, forms[hint]), (label, hint, other)


def test_a_later_crash_is_not_blamed_on_a_part_that_was_right(capsys):
    def crashes_on_the_batch(q, k, v, d_out):
        if q.ndim > 2:
            raise IndexError("tuple index out of range")
        return _backward()(q, k, v, d_out)

    assert not check.check_attention_backward(crashes_on_the_batch)
    out = capsys.readouterr().out
    assert "(dv) FAILED" not in out and "(dq) FAILED" not in out, out
    assert "check_attention_backward: case 3/5 FAILED" in out
    assert "raised IndexError" in out


def _log_of_softmax(eps=0.0):
    """The naive cross-entropy: -log of the softmax's p (optionally + eps)."""
    def fn(logits, targets):
        z = logits - logits.max(axis=-1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
        onehot = np.eye(logits.shape[-1])[targets]
        with np.errstate(divide="ignore"):
            loss = -np.log((p * onehot).sum(axis=-1) + eps).mean()
        return loss, (p - onehot) / targets.size
    return fn


@pytest.mark.parametrize("eps", [0.0, 1e-12])
def test_log_of_softmax_is_rejected_and_named(eps, capsys):
    assert not check.check_cross_entropy(_log_of_softmax(eps))
    out = " ".join(capsys.readouterr().out.split())
    assert "below its row's maximum" in out
    assert "hint: the loss is wrong only where a target's logit" in out, out


# --- self_attention_backward (chapter 11, third exercise) ---

SELF_MISTAKES = [
    ("no V path", "misses the path through V"),
    ("no K path", "misses the path through K"),
    ("no Q path", "misses the path through Q"),
    ("Q path only", "has only the path through Q"),
    ("no scale", "missing the 1/sqrt(dk)"),
    ("w not transposed", "goes back through w, not its transpose"),
    ("not summed over the batch", "not summed over the batch"),
    (".T on a batch", ".T reverses every axis"),
    ("dW transposed", "dW is transposed"),
]


def test_self_attention_backward_right_answer_passes(capsys):
    assert check.check_self_attention_backward(ref.self_attention_backward)
    assert "right in all 3 cases" in capsys.readouterr().out


@pytest.mark.parametrize("kind,hint", SELF_MISTAKES)
def test_self_attention_backward_mistakes_are_named(kind, hint, capsys):
    from attnbook.check.learn import _self_backward_variant
    assert not check.check_self_attention_backward(_self_backward_variant(kind))
    out = " ".join(capsys.readouterr().out.split())
    assert "FAILED" in out and hint in out, out
    for _, other in SELF_MISTAKES:  # and no other mistake's hint
        assert other == hint or other not in out, (kind, other)


@pytest.mark.parametrize("order", [(3, 2, 1, 0), (0, 1, 3, 2), (1, 0, 2, 3)])
def test_self_attention_backward_in_another_order_is_named(order, capsys):
    def reordered(*args):
        grads = ref.self_attention_backward(*args)
        return tuple(grads[i] for i in order)

    assert not check.check_self_attention_backward(reordered)
    out = " ".join(capsys.readouterr().out.split())
    assert "right but in another order: return (dx, dw_q, dw_k, dw_v)" in out, out
    assert out.count("hint:") == 1, out


@pytest.mark.parametrize("result", [None, 2.0, (1, 2, 3), [np.zeros(2)] * 4,
                                    ("a", "b", "c", "d")])
def test_self_attention_backward_checker_never_crashes(result, capsys):
    assert not check.check_self_attention_backward(lambda *a: result)
    assert "FAILED" in capsys.readouterr().out


def test_self_attention_backward_stub_is_not_done_yet(capsys):
    def stub(x, w_q, w_k, w_v, d_out):
        raise NotImplementedError

    assert not check.check_self_attention_backward(stub)
    assert "not done yet" in capsys.readouterr().out


def _mistakes_distinct_where_named(cases, forms_of, right_of):
    """For each mistake, on the first case where it is wrong (where the checker
    would name it), no other mistake gives the same numbers."""
    from attnbook.checking import _same
    first = {}
    for case in cases:
        forms = forms_of(case)
        for hint, wrong in forms:
            if hint not in first and not all(
                    _same(a, b) for a, b in zip(wrong, right_of(case))):
                first[hint] = (case.label, forms)
    for hint, (label, forms) in first.items():
        mine = dict(forms)[hint]
        for other, wrong in forms:
            assert other == hint or not all(
                _same(a, b) for a, b in zip(wrong, mine)), (label, hint, other)
    return first


def test_cross_entropy_and_self_backward_mistakes_never_coincide():
    from attnbook.check import learn

    def self_forms(case):
        out = []
        for m in learn.SELF_BACKWARD_MISTAKES:
            try:
                out.append((m.hint, tuple(m.fn(*case.args))))
            except ValueError:  # does not run on this case
                pass
        return out

    named = _mistakes_distinct_where_named(
        learn.cross_entropy_cases(),
        lambda c: learn._wrong_cross_entropy_forms(*c.args),
        lambda c: (c.expected["loss"], c.expected["d_logits"]))
    assert len(named) == 8  # the 9 forms, two of which share a hint
    named = _mistakes_distinct_where_named(
        learn.self_attention_backward_cases(), self_forms,
        lambda c: tuple(c.expected.values()))
    # two of them only raise (w for w^T, .T on a batch): named by their error
    assert len(named) == len(learn.SELF_BACKWARD_MISTAKES) - 2


@pytest.mark.parametrize("checker,right", [
    (check.check_attention_backward, ref.attention_backward),
    (check.check_self_attention_backward, ref.self_attention_backward),
])
def test_a_float32_answer_is_told_its_precision_is_the_problem(checker, right, capsys):
    def in_float32(*args):
        return tuple(np.asarray(g, dtype=np.float32)
                     for g in right(*(a.astype(np.float32) for a in args)))

    assert not checker(in_float32)
    out = " ".join(capsys.readouterr().out.split())
    assert "float32" in out and "float64" in out, out
