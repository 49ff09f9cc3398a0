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
        ("dq and dk are missing the 1/sqrt(dk): the scores were divided by "
         "sqrt(dk), so their gradient carries the same factor.",
         lambda: through(ds, 1.0)),
        ("dq and dk are divided by dk instead of sqrt(dk).",
         lambda: through(ds, 1.0 / d)),
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


def _print_hints(fn, cases, forms_of, index, said=None):
    """For the first case where the learner's part ``index`` computes but is
    wrong, name the mistake if it is a known one. Returns True if it did."""
    said = set() if said is None else said
    for case in cases:
        try:
            args = tuple(np.array(a, copy=True) for a in case.args)
            with np.errstate(all="ignore"):
                got = _as_array(fn(*args)[index])
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
                        and np.allclose(got, w, rtol=1e-6, atol=1e-9)):
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
    return [
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
