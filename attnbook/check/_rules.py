"""Rules for :func:`attnbook.checking.run_cases`: hints that no single wrong
answer computes, asked when no known mistake matched the learner's result."""

from __future__ import annotations

import itertools

import numpy as np

from ..checking import _as_number_array, _expected_parts, _problems, _quiet, _same

__all__ = ["batch_rule", "order_rule"]


class batch_rule:
    """A rule for :func:`run_cases`: the mark of ``.T`` on a batch. Every case
    without a batch axis passes, and on a batched case the function either
    raised a shape error from a matrix product, or returned the right shape
    with every sequence of the batch wrong (``.T`` mixes them all). A mistake
    that breaks only some sequences, or the shape, is something else."""

    HINT = ("right for one sequence, wrong for a batch: .T (or np.transpose "
            "without axes) reverses every axis of a (B, N, d) array. Use "
            "np.swapaxes(a, -2, -1) (or a.swapaxes(-2, -1)) to swap only the last two.")

    def __init__(self, hint: str | None = None):
        self.hint = hint or self.HINT

    @staticmethod
    def _batched(case):
        return any(np.ndim(a) > 2 for a in case.args
                   if isinstance(a, np.ndarray) and a.dtype != bool)

    def __call__(self, fn, call, cases, index, rtol, atol, want_bool):
        case = cases[index]
        if not self._batched(case):
            return None
        for other in cases:
            if self._batched(other):
                continue
            try:
                parts = _quiet(call, fn, other)
            except Exception:
                return None
            if _problems(other, parts, rtol, atol, want_bool):
                return None
        try:
            parts = _quiet(call, fn, case)
        except ValueError as exc:
            return self.hint if "matmul" in str(exc) or "shape" in str(exc) else None
        except Exception:
            return None
        for name, (expected, _) in _expected_parts(case).items():
            got = _as_number_array(parts.get(name))
            if got is None or got.shape != np.shape(expected) or got.ndim < 3:
                continue
            wrong = [not np.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
                     for g, e in zip(got.astype(float), np.asarray(expected, float))]
            if all(wrong):
                return self.hint
        return None


class order_rule:
    """A rule for :func:`run_cases`: every part right, but returned in another
    order. ``names`` are the parts in the order the function must return them."""

    def __init__(self, names: tuple, hint: str | None = None):
        self.names = tuple(names)
        self.hint = hint or (f"the results are right but in another order: return "
                             f"({', '.join(self.names)})")

    def __call__(self, fn, call, cases, index, rtol, atol, want_bool):
        case = cases[index]
        got, want = call(fn, case), case.expected
        for order in itertools.permutations(range(len(self.names))):
            if order != tuple(range(len(self.names))) and all(
                    _same(got[self.names[i]], want[self.names[j]], rtol, atol)
                    for i, j in enumerate(order)):
                return self.hint
        return None
