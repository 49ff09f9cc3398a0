"""Exercise checkers of the part "Attention that learns".

Chapters import them from :mod:`attnbook.check`. Each checker runs the
learner's function on several cases, compares it with the answer key, and
prints a pass or the first case that failed. When the wrong result is one of
the mistakes learners often make (the rowsum term left out, the scale
forgotten, a transpose missing ...), it says which.
"""

from __future__ import annotations

import textwrap
from typing import Callable

import numpy as np

from . import reference as ref
from .check import Case, Verdict, _compare, run_cases

__all__ = ["check_attention_backward", "check_cross_entropy"]


# --- the gradient of attention (chapter 11) ---

def attention_backward_cases() -> list[Case]:
    rng = np.random.default_rng(16)

    def args(*shapes):
        return tuple(rng.normal(size=s) for s in shapes)

    cases = [
        ("3 queries, 3 keys, dk = dv = 2 (a square score matrix)",
         args((3, 2), (3, 2), (3, 2), (3, 2))),
        ("2 queries, 5 keys, dk = 4, dv = 3 (Nq != Nk, dk != dv)",
         args((2, 4), (5, 4), (5, 3), (2, 3))),
        ("a batch of 2: q (2, 3, 4), k (2, 6, 4), v (2, 6, 2)",
         args((2, 3, 4), (2, 6, 4), (2, 6, 2), (2, 3, 2))),
        ("one key: its weight is 1 whatever the scores, so dq = dk = 0",
         args((4, 3), (1, 3), (1, 2), (4, 2))),
        ("large scores (q and k times 4): sharp weights, dk = 16",
         tuple(a * f for a, f in zip(args((3, 16), (4, 16), (4, 2), (3, 2)),
                                     (4, 4, 1, 1)))),
    ]
    return [Case(label, a, ref.attention_backward(*a)) for label, a in cases]


def _wrong_backward_forms(q, k, v, d_out):
    """The gradients as common mistakes compute them: (hint, (dq, dk, dv))."""
    d = q.shape[-1]
    c = 1 / np.sqrt(d)
    _, a = ref.scaled_dot_product_attention(q, k, v)
    at = np.swapaxes(a, -2, -1)
    d_a = d_out @ np.swapaxes(v, -2, -1)  # (..., Nq, Nk)
    ds = a * (d_a - (d_a * a).sum(axis=-1, keepdims=True))
    right = (ds @ k * c, np.swapaxes(ds, -2, -1) @ q * c, at @ d_out)

    def through(ds_wrong, scale=c):
        return (ds_wrong @ k * scale,
                np.swapaxes(ds_wrong, -2, -1) @ q * scale, right[2])

    forms = [
        ("the softmax step is missing its rowsum term: dS = A * dA. The "
         "Jacobian diag(a) - a a^T has two parts; the second gives "
         "- a * sum(dA * A) in every row.",
         lambda: through(a * d_a)),
        ("the rowsum runs over the wrong axis: it must sum over the keys, "
         "axis=-1 with keepdims=True, one number per query (row), as the "
         "softmax itself does.",
         lambda: through(a * (d_a - (d_a * a).sum(axis=-2, keepdims=True)))),
        ("the rowsum lost its keepdims: (dA * A).sum(axis=-1) has shape "
         "(..., Nq) and broadcasts along the wrong axis.",
         lambda: through(a * (d_a - (d_a * a).sum(axis=-1)))),
        ("the sign of the softmax step is flipped: dS = A * (dA - "
         "rowsum(dA * A)), not A * (rowsum(dA * A) - dA).",
         lambda: through(-ds)),
        ("the softmax step is skipped: dS = dA. The weights come out of a "
         "softmax, so dA must go through its Jacobian first.",
         lambda: through(d_a)),
        ("the rowsum is missing its factor A: it is rowsum(dA * A), the "
         "sum over the keys of dA[i, j] * A[i, j], one number per query; "
         "rowsum(dA) alone is not the softmax's Jacobian.",
         lambda: through(a * (d_a - d_a.sum(axis=-1, keepdims=True)))),
        ("dq and dk are missing the 1/sqrt(dk): the scores were divided by "
         "sqrt(dk), so their gradient carries the same factor.",
         lambda: through(ds, 1.0)),
        ("dq and dk are divided by dk instead of sqrt(dk).",
         lambda: through(ds, 1.0 / d)),
        ("the scale uses dv, the width of v: it is 1/sqrt(dk), with dk = "
         "q.shape[-1], the width of the queries and keys.",
         lambda: _backward_with_scales(q, k, v, d_out,
                                       1 / np.sqrt(v.shape[-1]),
                                       1 / np.sqrt(v.shape[-1]))),
        ("the forward pass inside your function leaves out the scale: the "
         "weights are A = softmax(q k^T / sqrt(dk)), so dv = A^T dO needs "
         "that A.",
         lambda: _backward_with_scales(q, k, v, d_out, 1.0, c)),
        ("dk is computed without the transpose: dK = dS^T Q / sqrt(dk), "
         "(Nk, Nq) @ (Nq, dk). dS Q is only defined when Nq == Nk, and "
         "wrong then.",
         lambda: (right[0], ds @ q * c, right[2])),
        ("dq uses the transpose of dS: dQ = dS K / sqrt(dk), (Nq, Nk) @ "
         "(Nk, dk).",
         lambda: (np.swapaxes(ds, -2, -1) @ k * c, right[1], right[2])),
        ("dv is computed without the transpose: dV = A^T dO, (Nk, Nq) @ "
         "(Nq, dv). Value j receives from every query i that used it, with "
         "weight A[i, j].",
         lambda: (right[0], right[1], a @ d_out)),
        ("dA is transposed: dA = dO V^T has one row per query, (Nq, dv) @ "
         "(dv, Nk).",
         lambda: through(a * (np.swapaxes(d_a, -2, -1) - (
             np.swapaxes(d_a, -2, -1) * a).sum(axis=-1, keepdims=True)))),
    ]
    out = []
    for hint, make in forms:
        try:
            with np.errstate(all="ignore"):
                out.append((hint, tuple(np.asarray(x) for x in make())))
        except ValueError:  # the wrong form is not even defined here
            continue
    return out


def _backward_with_scales(q, k, v, d_out, forward_scale, backward_scale):
    """The backward pass with a scale in the forward pass (inside the
    softmax) and another in dq and dk: the right one has both 1/sqrt(dk)."""
    a = ref.softmax(q @ np.swapaxes(k, -2, -1) * forward_scale)
    d_a = d_out @ np.swapaxes(v, -2, -1)
    ds = a * (d_a - (d_a * a).sum(axis=-1, keepdims=True))
    return (ds @ k * backward_scale,
            np.swapaxes(ds, -2, -1) @ q * backward_scale,
            np.swapaxes(a, -2, -1) @ d_out)


def _three_arrays(fn):
    """Call fn and insist on a tuple or list (dq, dk, dv)."""
    def call(*args, **kwargs):
        result = fn(*args, **kwargs)
        if not (isinstance(result, (tuple, list)) and len(result) == 3):
            raise TypeError(f"return a tuple (dq, dk, dv) of three arrays; "
                            f"got {type(result).__name__}"
                            + (f" of length {len(result)}"
                               if isinstance(result, (tuple, list)) else ""))
        return result
    return call


def _as_array(x):
    try:
        return np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        return None


def _close(a, b):
    return (a is not None and np.shape(a) == np.shape(b)
            and np.allclose(a, b, rtol=1e-6, atol=1e-9))


def _contradicts(wrong, parts, expected):
    """True if the wrong form gets a part wrong that the learner got right:
    then it does not describe the learner's mistake."""
    return any(_close(got, exp) and not _close(w, exp)
               for w, got, exp in zip(wrong, parts, expected))


def _print_hints(fn, cases, forms_of, index, said=None):
    """For the first case where the learner's part ``index`` computes but is
    wrong, name the mistake if it is a known one. Returns True if it did."""
    said = set() if said is None else said
    for case in cases:
        try:
            args = tuple(np.array(a, copy=True) for a in case.args)
            with np.errstate(all="ignore"):
                result = fn(*args)
            got = _as_array(result[index])
            parts = [_as_array(x) for x in result]
        except Exception:  # this case does not run; try the next one
            continue
        try:
            expected = case.expected[index]
            if got is None or _compare(expected, got, 1e-6, 1e-9) is None:
                continue
            found = False
            if not np.all(np.isfinite(got)):
                return False  # inf or nan: the report above says enough
            with np.errstate(all="ignore"):
                forms = forms_of(*case.args)
            for hint, wrong in forms:
                w = wrong[index]
                if (w.shape == got.shape and not np.allclose(w, expected)
                        and np.allclose(got, w, rtol=1e-6, atol=1e-9)
                        and not _contradicts(wrong, parts, case.expected)):
                    found = True
                    if hint not in said:
                        said.add(hint)
                        print(textwrap.fill(hint, 79,
                                            initial_indent="    hint: ",
                                            subsequent_indent="    "))
            return found
        except Exception:  # a hint is a courtesy: never crash on it
            return False
    return False


def _right_on(fn, case):
    """True if fn gets all three gradients of this case right."""
    try:
        args = tuple(np.array(a, copy=True) for a in case.args)
        with np.errstate(all="ignore"):
            result = fn(*args)
        return all(_close(_as_array(g), e)
                   for g, e in zip(result, case.expected))
    except Exception:
        return False


def _print_structure_hint(fn, cases):
    """Two mistakes that no wrong formula describes: the gradients returned
    in another order, and a transpose that only works without a batch."""
    def say(hint):
        print(textwrap.fill(hint, 79, initial_indent="    hint: ",
                            subsequent_indent="    "))

    try:
        with np.errstate(all="ignore"):
            result = [_as_array(g) for g in fn(*cases[0].args)]
        for order in ((0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)):
            if all(_close(result[i], cases[0].expected[j])
                   for i, j in zip(range(3), order)):
                say("the three gradients are right but in another order: "
                    "return (dq, dk, dv), in the order of the arguments "
                    "q, k, v.")
                return
    except Exception:
        pass
    batched = [c for c in cases if np.ndim(c.args[0]) > 2]
    single = [c for c in cases if np.ndim(c.args[0]) == 2]
    if (all(_right_on(fn, c) for c in single)
            and not all(_right_on(fn, c) for c in batched)):
        say("right for one sequence, wrong for a batch: .T (or np.transpose "
            "without axes) reverses every axis of a (B, N, d) array. Use "
            "swapaxes(-2, -1) to swap only the last two, and sum with "
            "axis=-1.")


def check_attention_backward(fn: Callable) -> Verdict:
    """Check a learner's ``attention_backward(q, k, v, d_out)`` returning
    ``(dq, dk, dv)``: the gradients of softmax(q k^T / sqrt(dk)) v, for one
    sequence (Nq, d) or a batch (B, Nq, d)."""
    wrapped = _three_arrays(fn)
    cases = attention_backward_cases()
    name = "check_attention_backward"
    for part, index in (("dv", 2), ("dq", 0), ("dk", 1)):
        part_cases = [Case(f"{c.label} [{part}]", c.args, c.expected[index])
                      for c in cases]
        verdict = run_cases(wrapped, part_cases, f"{name} ({part})",
                            pick=lambda r, i=index: r[i])
        if not verdict:
            said = set()
            for i in (index, 2, 0, 1):  # the failing part first, then the rest
                _print_hints(wrapped, cases, _wrong_backward_forms, i, said)
            if not said:
                _print_structure_hint(wrapped, cases)
            return Verdict(False, name)
    print(f"{name}: dq, dk and dv right in all {len(cases)} cases.")
    return Verdict(True, name)


# --- cross-entropy (chapter 12) ---

def cross_entropy_cases() -> list[Case]:
    rng = np.random.default_rng(17)
    logits2 = rng.normal(size=(4, 5))
    logits3 = rng.normal(size=(2, 3, 6))
    big = np.array([[1000.0, 1002.0, 999.0], [-5.0, 790.0, 800.0]])
    cases = [
        ("4 positions, 5 classes: logits (4, 5), targets (4,)",
         (logits2, np.array([0, 3, 1, 4]))),
        ("a batch: logits (2, 3, 6), targets (2, 3)",
         (logits3, rng.integers(0, 6, size=(2, 3)))),
        ("large logits (1000, 800): exp overflows unless you subtract the "
         "row maximum", (big, np.array([1, 2]))),
        ("one position, three classes", (np.array([[0.5, -1.0, 2.0]]),
                                         np.array([2]))),
    ]
    return [Case(label, a, ref.cross_entropy(*a)) for label, a in cases]


def _wrong_cross_entropy_forms(logits, targets):
    def log_softmax(axis):
        z = logits - logits.max(axis=axis, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))

    onehot = np.eye(logits.shape[-1])[targets]
    m = targets.size
    p = np.exp(log_softmax(-1))
    right = (p - onehot) / m
    loss = -(log_softmax(-1) * onehot).sum(axis=-1).mean()
    p_col = np.exp(log_softmax(-2))
    n_seq = logits.shape[0]  # a plausible M: the sequences, not the positions
    by_seq = ("the mean is taken over logits.shape[0], the sequences of the "
              "batch, not over every position: M = targets.size, here "
              f"{m} = {' x '.join(str(n) for n in targets.shape)}.")
    return [
        (by_seq, (np.asarray(loss * m / n_seq), right * m / n_seq)),
        (by_seq, (np.asarray(loss), right * m / n_seq)),
        ("the loss is averaged over all the M x V entries of log(p) * "
         "onehot, not over the M positions: sum over the classes (or pick "
         "the target's entry) first, then take the mean.",
         (np.asarray(loss / logits.shape[-1]), right)),
        ("the loss and its gradient are summed over the positions, not "
         "averaged: divide by M, the number of positions.",
         (np.asarray(loss * m), right * m)),
        ("the gradient is not divided by the number of positions: the loss "
         "is a mean, so each position's p - onehot is divided by M.",
         (np.asarray(loss), right * m)),
        ("the loss has lost its minus sign: it is -log p[target], a "
         "positive number.", (np.asarray(-loss), right)),
        ("the one-hot of the target is not subtracted: the gradient of "
         "-log p[target] is p - onehot(target), not p.",
         (np.asarray(loss), p / m)),
        ("the sign is flipped: the gradient is (p - onehot) / M; following "
         "onehot - p would make the loss grow.", (np.asarray(loss), -right)),
        ("the softmax runs over the wrong axis: probabilities are over the "
         "classes, the last axis.",
         (np.asarray(-(log_softmax(-2) * onehot).sum(axis=-1).mean()),
          (p_col - onehot) / m)),
    ]


def check_cross_entropy(fn: Callable) -> Verdict:
    """Check a learner's ``cross_entropy(logits, targets)`` returning
    ``(loss, d_logits)``: the mean cross-entropy over every position and its
    gradient with respect to the logits."""
    def two(*args):
        result = fn(*args)
        if not (isinstance(result, (tuple, list)) and len(result) == 2):
            raise TypeError(f"return a tuple (loss, d_logits); got "
                            f"{type(result).__name__}")
        return result

    cases = cross_entropy_cases()
    name = "check_cross_entropy"
    for part, index in (("loss", 0), ("d_logits", 1)):
        part_cases = [Case(f"{c.label} [{part}]", c.args, c.expected[index])
                      for c in cases]
        verdict = run_cases(two, part_cases, f"{name} ({part})",
                            pick=lambda r, i=index: r[i])
        if not verdict:
            said = set()
            for i in (index, 1 - index):
                _print_hints(two, cases, _wrong_cross_entropy_forms, i, said)
            return Verdict(False, name)
    print(f"{name}: the loss and its gradient right in all {len(cases)} "
          "cases.")
    return Verdict(True, name)
