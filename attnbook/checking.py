"""The checking machinery every exercise checker of the book uses, written once.

A checker is a list of :class:`Case` (a label a learner understands, the
arguments, the expected result computed by the answer key) and a list of known
wrong answers (:class:`Mistake`, each with the hint that names it), handed to
:func:`run_cases`, which runs the learner's function on each case and prints
either a pass or the first case that failed, with what was expected beside
what the function returned, and the hint of every known mistake whose result
equals the learner's. It returns a :class:`Verdict`, true on a pass, so a
solution cell can ``assert`` it.

A result may have several parts: an output and its attention weights
``(output, weights)``, gradients ``(dq, dk, dv)``, a state ``(m, l, o)``. A
case whose ``expected`` is a dict names the parts (checked in that order) and
the checker's ``call`` adapter returns the learner's parts under the same
names. A mistake names the learner's error when it gives the same value on the
part that failed and is not contradicted by a part the learner got right.

A checker never raises on a learner's answer: a stub raising
``NotImplementedError`` is reported as "not done yet"; any other exception,
or a result that is not an array, is reported as a failed case. Every printed
line fits in 79 characters. This module imports nothing of ``attnbook``.
"""

from __future__ import annotations

import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

__all__ = ["Case", "Mistake", "Verdict", "BadResult", "run_cases", "parts_of"]

WIDTH = 79  # every printed line fits in the book's 79 columns


@dataclass
class Case:
    """One test case: a label a learner understands, the arguments, the expected result.

    ``weights`` (optional) are the expected attention weights, compared with
    the second element when the learner returns ``(output, weights)``;
    ``extra`` (optional) maps a name to another expected array that the
    checker's ``call`` adapter reports (the PyTorch checker's gradients).
    """

    label: str
    args: tuple
    expected: Any
    kwargs: dict = field(default_factory=dict)
    weights: Any = None
    extra: dict = field(default_factory=dict)


@dataclass
class Mistake:
    """A known wrong answer and the hint that names it.

    ``fn`` takes the learner's arguments and computes the wrong answer, in the
    form the learner's function returns it. For a wrong answer computed for one
    case (a checker's ``mistakes`` given as a function of the case), use
    :meth:`result` instead. ``rows`` limits the comparison to some rows of the
    failing part (a wrong answer that differs only where the learner's may).
    ``parts`` (the wrong answer's parts, as the checker's ``call`` reports
    them) or ``raises`` (an exception type and message) hold a wrong answer
    computed in advance, as a student kit's checkers carry them.
    """

    hint: str
    fn: Callable | None = None
    rows: Any = None
    value: Any = None
    parts: dict | None = None
    raises: tuple | None = None

    @classmethod
    def result(cls, hint: str, value, rows=None) -> "Mistake":
        """The wrong answer ``value`` itself (what the learner's function returned)."""
        return cls(hint, None, rows, value)

    def compute(self, call, case):
        if self.raises is not None:
            kind, message = self.raises
            raise kind(message)
        if self.parts is not None:
            return self.parts
        fn = self.fn if self.fn is not None else (lambda *a, **k: self.value)
        return call(fn, case)

    def computed(self, call, case) -> "Mistake":
        """The same mistake with its parts (or its exception) on ``case`` computed now."""
        try:
            parts = _quiet(self.compute, call, case)
        except Exception as exc:
            return Mistake(self.hint, rows=self.rows, raises=(type(exc), str(exc)))
        return Mistake(self.hint, rows=self.rows, parts=parts)


class BadResult(Exception):
    """Raised by a checker's ``call`` adapter when the learner's function
    returned something of the wrong form; its message is the report."""


class Verdict:
    """The result of a check: true when every case passed.

    It prints nothing of its own in a notebook (the checker has already
    printed its report), so a cell can end with ``check.check_softmax(f)``
    without a stray ``True`` or ``False`` below it, while ``assert
    check.check_softmax(f)`` still works.
    """

    def __init__(self, passed: bool, name: str):
        self.passed = bool(passed)
        self.name = name

    def __bool__(self):
        return self.passed

    def __repr__(self):
        return f"Verdict({self.name}: {'passed' if self.passed else 'not passed'})"

    def _ipython_display_(self):
        pass


# --- printing, within 79 columns ------------------------------------------

def _say(text: str, indent: int = 4, hang: int = 0) -> None:
    """Print ``text`` wrapped to WIDTH, indented; continuation lines hang by ``hang`` more."""
    for para in str(text).splitlines() or [""]:
        print(textwrap.fill(para, WIDTH, initial_indent=" " * indent,
                            subsequent_indent=" " * (indent + hang),
                            break_long_words=True, break_on_hyphens=False))


def _as_number_array(value):
    """An array of numbers (or booleans), or None when ``value`` is not one."""
    value = _to_numpy(value)
    if value is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.asarray(value)
    except Exception:
        return None
    if arr.dtype.kind not in "biuf":
        return None
    return arr


def _fmt(value, linewidth: int = WIDTH - 4) -> str:
    arr = _as_number_array(value)
    if arr is not None and arr.dtype == bool:  # masks: 1/0 fit, True/False wrap
        with np.printoptions(threshold=40, edgeitems=2, linewidth=linewidth):
            return f"shape {arr.shape}, bool (1 = True)\n{arr.astype(int)}"
    if arr is not None:
        with np.printoptions(precision=4, suppress=True, threshold=40, edgeitems=2,
                             linewidth=linewidth):
            return f"shape {arr.shape}\n{arr}"
    text = repr(value)
    if len(text) > 240:
        text = text[:240] + " ..."
    text = f"{type(value).__name__}: {text}"
    return "\n".join(textwrap.fill(line, linewidth) for line in text.splitlines())


def _show(expected, got, got_label="your function returned:") -> None:
    """Print the expected and the returned values side by side, or one above the other."""
    half = (WIDTH - 8) // 2
    left = ["expected:"] + _fmt(expected, half).splitlines()
    right = [got_label] + _fmt(got, half).splitlines()
    if max(map(len, left)) <= half and max(map(len, right)) <= half:
        rows = max(len(left), len(right))
        left += [""] * (rows - len(left))
        right += [""] * (rows - len(right))
        for a, b in zip(left, right):
            print(f"    {a:<{half + 4}}{b}".rstrip())
        return
    for line in ["expected:"] + _fmt(expected).splitlines():
        print(f"    {line}".rstrip())
    for line in [got_label] + _fmt(got).splitlines():
        print(f"    {line}".rstrip())


# --- reading and comparing a learner's result -----------------------------

def _to_numpy(value):
    """A torch tensor as a NumPy array (detached); anything else unchanged."""
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        try:
            return value.detach().cpu().numpy()
        except Exception:
            return value
    return value


def _split_result(got, expected_shape):
    """(output, weights) from what a learner's function returned.

    A tuple or list of two is ``(output, weights)``, unless the two stack
    into an array of the expected output's shape (a list of two rows).
    """
    if isinstance(got, (tuple, list)) and len(got) == 2:
        stacked = _as_number_array([_to_numpy(g) for g in got])
        if stacked is not None and stacked.shape == tuple(expected_shape):
            return stacked, None
        return got[0], got[1]
    return got, None


def _index(flat_mask) -> tuple:
    return tuple(int(i) for i in np.argwhere(flat_mask)[0])


def _compare(expected, got, rtol=1e-6, atol=1e-9, *, want_bool=False, what="the result"):
    """Return None when ``got`` agrees with ``expected``, else a short reason."""
    if got is None:
        return f"{what} is None (is a return statement missing?)"
    got_arr = _as_number_array(got)
    if got_arr is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if np.iscomplexobj(_to_numpy(got)):
                    return f"{what} is complex; it must be real"
        except Exception:
            pass
        return (f"{what} is not an array of numbers "
                f"(got {type(got).__name__})")
    exp_arr = np.asarray(expected)
    if want_bool and got_arr.dtype != bool:
        vals = set(np.unique(got_arr[np.isfinite(got_arr)]).tolist()) if got_arr.size else set()
        tip = ("add .astype(bool), or build it with dtype=bool")
        if got_arr.dtype.kind in "iu" and got_arr.shape != exp_arr.shape:
            # e.g. the indices of the kept keys (np.argsort(...)[..., :k]):
            # .astype(bool) would not turn them into a mask
            tip = (f"these look like indices (shape {got_arr.shape}), not a "
                   f"mask of shape {exp_arr.shape}: start from "
                   "np.zeros(shape, dtype=bool) and set True at those "
                   "indices (np.put_along_axis(m, idx, True, axis=-1))")
        if np.isneginf(got_arr).any() and vals <= {0.0}:
            tip = ("this is an additive 0/-inf mask; the book's mask is "
                   "boolean, True = may attend: use mask == 0")
        return (f"the mask must be a boolean array (True = may attend), "
                f"got dtype {got_arr.dtype}; {tip}")
    low = got_arr.dtype if got_arr.dtype in (np.float16, np.float32) else None
    got_arr = got_arr.astype(float)
    exp_arr = exp_arr.astype(float)
    lead = "" if what == "the result" else f"{what}: "
    if got_arr.shape != exp_arr.shape:
        return f"{lead}wrong shape: expected {exp_arr.shape}, got {got_arr.shape}"
    new_nan = np.isnan(got_arr) & ~np.isnan(exp_arr)
    if new_nan.any():
        return (f"{what} contains nan (first at index {_index(new_nan)}); "
                "nan comes from 0/0 or inf/inf")
    new_inf = np.isinf(got_arr) & np.isfinite(exp_arr)
    if new_inf.any():
        return f"{what} contains inf (first at index {_index(new_inf)})"
    close = np.isclose(got_arr, exp_arr, rtol=rtol, atol=atol, equal_nan=True)
    if not close.all():
        diff = np.where(close, -1.0, np.nan_to_num(np.abs(got_arr - exp_arr), nan=np.inf))
        worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
        if low is not None and np.allclose(got_arr, exp_arr, rtol=1e-3, atol=1e-5):
            return (f"{lead}right only to about {7 if low == np.float32 else 3} "
                    f"digits: your result is {low}, and the checker expects "
                    "float64 precision. Compute in float64 (the default of "
                    "NumPy; drop astype(np.float32) or dtype=float32)")
        return (f"{lead}wrong values (largest difference at index "
                f"{tuple(int(i) for i in worst)})")
    return None


def _same(a, b, rtol=1e-6, atol=1e-9) -> bool:
    """True when a and b are arrays of the same shape and values (nan equal to nan)."""
    x, y = _as_number_array(a), _as_number_array(b)
    if x is None or y is None or x.shape != y.shape:
        return False
    if (x.dtype == bool) != (y.dtype == bool):
        return False
    return bool(np.allclose(x.astype(float), y.astype(float), rtol=rtol, atol=atol,
                            equal_nan=True))


def _copy_args(args):
    return tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args)


def parts_of(result, names: tuple, order: tuple | None = None) -> dict:
    """A result that must be a tuple or list of ``len(names)`` arrays, as its named
    parts, checked in ``order``; any other form raises BadResult saying so."""
    if not (isinstance(result, (tuple, list)) and len(result) == len(names)):
        count = {2: "two", 3: "three"}.get(len(names), str(len(names)))
        raise BadResult(f"return a tuple ({', '.join(names)}) of {count} arrays; got "
                        f"{type(result).__name__}"
                        + (f" of length {len(result)}"
                           if isinstance(result, (tuple, list)) else ""))
    parts = dict(zip(names, result))
    return {name: parts[name] for name in (order or names)}


def _unchanged(args, originals) -> None:
    """Raise BadResult if the function wrote into one of its array arguments."""
    for i, (arg, original) in enumerate(zip(args, originals), 1):
        if isinstance(original, np.ndarray) and isinstance(arg, np.ndarray) and not (
                arg.shape == original.shape and np.array_equal(arg, original, equal_nan=True)):
            raise BadResult(
                f"your function changed its argument {i} in place (for example with "
                "x -= ... or x[...] = ...): the caller's array changes too. Work on "
                "a new array: x = x - x.max(axis=-1, keepdims=True) makes one")


def _call_numpy(fn, case):
    """Run ``fn`` on a copy of the case's arguments; return its parts: output and weights."""
    args = _copy_args(case.args)
    got = fn(*args, **case.kwargs)
    _unchanged(args, case.args)
    out, weights = _split_result(got, np.shape(case.expected))
    return {"output": out, "weights": weights}


def _quiet(call, fn, case):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(fn, case)


def _expected_parts(case) -> dict:
    """The parts a case expects, in the order they are checked, with their labels."""
    if isinstance(case.expected, dict):
        return {name: (value, name) for name, value in case.expected.items()}
    parts = {"output": (case.expected, "the result")}
    if case.weights is not None:
        parts["weights"] = (case.weights, "the weights (second element)")
    for name, value in case.extra.items():
        parts[name] = (value, f"the {name}")
    return parts


def _problems(case, parts, rtol, atol, want_bool) -> dict:
    """{part: reason} for every part of the result that disagrees, in order.

    The weights of an ``(output, weights)`` result are optional: ``None`` in
    their place is not checked. Any other part must be there.
    """
    found = {}
    for name, (expected, what) in _expected_parts(case).items():
        got = parts.get(name)
        if name == "weights" and got is None:
            continue
        if got is None and name != "output" and not isinstance(case.expected, dict):
            found[name] = (f"no {name}: return torch tensors computed from q, k "
                           "and v (no .numpy(), no new tensors), so that the "
                           "gradients flow back")
            continue
        reason = _compare(expected, got, rtol, atol, what=what,
                          want_bool=want_bool and name == "output")
        if reason:
            found[name] = reason
    return found


def _rows(value, rows):
    if rows is None or value is None:
        return value
    try:
        return np.asarray(value)[rows]
    except Exception:
        return value


def _mistakes_for(mistakes, case):
    if callable(mistakes):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return list(mistakes(case))
        except Exception:  # a hint is a courtesy: never crash on it
            return []
    return list(mistakes)


def _hints(mistakes, call, case, problems, parts, rtol, atol):
    """The hints of the known mistakes that describe the learner's result on this case.

    A mistake describes it when, on a part the learner got wrong, it gives
    the learner's value (and is itself wrong there), while on every part the
    learner got right it is right too. The part that failed first comes first.
    """
    expected = _expected_parts(case)
    found = []
    computed = []
    for mistake in _mistakes_for(mistakes, case):
        try:
            computed.append((mistake, _quiet(mistake.compute, call, case)))
        except Exception:
            continue
    for part in problems:
        for mistake, wrong in computed:
            if mistake.hint in found or wrong.get(part) is None:
                continue
            if not _same(_rows(parts.get(part), mistake.rows),
                         _rows(wrong.get(part), mistake.rows), rtol, atol):
                continue
            if _same(wrong.get(part), expected[part][0], rtol, atol):
                continue  # not a wrong answer on this case
            contradicted = any(
                _same(parts.get(name), exp, rtol, atol)
                and wrong.get(name) is not None
                and not _same(wrong.get(name), exp, rtol, atol)
                for name, (exp, _) in expected.items() if name not in problems)
            if not contradicted:
                found.append(mistake.hint)
    return found


def _raise_hints(mistakes, call, case, exc):
    """The hints of the known mistakes that raise the same error as the learner's."""
    found = []
    for mistake in _mistakes_for(mistakes, case):
        try:
            _quiet(mistake.compute, call, case)
        except Exception as wrong:
            if type(wrong) is type(exc) and str(wrong) == str(exc) \
                    and mistake.hint not in found:
                found.append(mistake.hint)
    return found


def _later_hints(fn, call, cases, first, mistakes, rtol, atol, want_bool) -> list:
    """After a raise: the hints on the first later case where the function runs
    and is wrong (a mistake that raises on some shapes and not on others),
    each saying which case it is about."""
    for j, case in enumerate(cases, first):
        try:
            parts = _quiet(call, fn, case)
        except Exception:
            continue
        problems = _problems(case, parts, rtol, atol, want_bool)
        if problems:
            return [f"on case {j} ({case.label}), which runs: {hint}"
                    for hint in _hints(mistakes, call, case, problems, parts, rtol, atol)]
    return []


def _rule_hints(rules, *args) -> list:
    """The hint of the first rule that recognises the failure (a list of 0 or 1)."""
    for rule in rules:
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the learner's warnings, from a rule's calls
                hint = rule(*args)
        except Exception:  # a hint is a courtesy: never crash on it
            hint = None
        if hint:
            return [hint]
    return []


def _report(name, i, n, label):
    _say(f"{name}: case {i}/{n} FAILED: {label}", 0, 4)


class _Pick:
    def __init__(self, pick):
        self.pick = pick

    def __call__(self, f, case):
        args = _copy_args(case.args)
        got = f(*args, **case.kwargs)
        _unchanged(args, case.args)
        return {"output": self.pick(got)}


def adapter(call=None, pick=None) -> Callable:
    """How :func:`run_cases` calls a function: ``call``, or through ``pick``, or plainly."""
    if pick is not None:
        return _Pick(pick)
    return call if call is not None else _call_numpy


def run_cases(fn: Callable, cases: list[Case], name: str, *, rtol=1e-6, atol=1e-9,
              pick: Callable | None = None, mistakes=(), want_bool=False,
              call: Callable | None = None, rules=(), on_error: Callable | None = None,
              passed: str | None = None) -> Verdict:
    """Run ``fn`` on every case; print a pass or the first failure. The Verdict is true on a pass.

    ``fn`` may return its output or ``(output, weights)``; ``pick``, when
    given, extracts the output from what ``fn`` returned instead.
    ``call(fn, case)`` replaces the way ``fn`` is called and returns a dict
    of parts (``"output"``, ``"weights"``, the names in ``case.extra``, or
    the names of a dict ``case.expected``); it may raise :class:`BadResult`.
    ``mistakes`` is a list of :class:`Mistake`, or a function of the case
    returning one: on a failure, the hint of every mistake that describes the
    learner's result is printed. ``rules`` are functions
    ``rule(fn, call, cases, index, rtol, atol, want_bool) -> hint or None``,
    asked when no mistake matched (see :mod:`attnbook.check._rules`). ``on_error(exc,
    case) -> hint or None`` adds a hint to an exception the learner's
    function raised. ``want_bool`` asks for a boolean result (a mask).
    ``passed`` replaces the line printed on a pass.
    """
    call = adapter(call, pick)
    for i, case in enumerate(cases, 1):
        try:
            parts = _quiet(call, fn, case)
        except NotImplementedError:
            print(f"{name}: not done yet (replace the stub with your code).")
            return Verdict(False, name)
        except BadResult as exc:
            _report(name, i, len(cases), case.label)
            _say(str(exc), 4, 4)
            return Verdict(False, name)
        except Exception as exc:  # the learner's bug, reported rather than raised
            _report(name, i, len(cases), case.label)
            # one paragraph: the message's own line breaks would cut the wrapped
            # report into pieces that read like unfinished sentences
            _say(f"your function raised {type(exc).__name__}: "
                 f"{' '.join(str(exc).split())}", 4, 4)
            hints = _raise_hints(mistakes, call, case, exc)
            if not hints and on_error is not None:
                try:
                    hints = [h for h in [on_error(exc, case)] if h]
                except Exception:
                    hints = []
            if not hints:
                hints = _rule_hints(rules, fn, call, cases, i - 1, rtol, atol, want_bool)
            if not hints:
                hints = _later_hints(fn, call, cases[i:], i + 1, mistakes, rtol, atol,
                                     want_bool)
            for hint in hints:
                _say(f"hint: {hint}", 4, 6)
            return Verdict(False, name)
        problems = _problems(case, parts, rtol, atol, want_bool)
        if not problems:
            continue
        part, reason = next(iter(problems.items()))
        _report(name, i, len(cases), case.label)
        _say(reason, 4, 4)
        hints = _hints(mistakes, call, case, problems, parts, rtol, atol)
        if not hints:
            hints = _rule_hints(rules, fn, call, cases, i - 1, rtol, atol, want_bool)
        for hint in hints:
            _say(f"hint: {hint}", 4, 6)
        expected, what = _expected_parts(case)[part]
        if part not in ("output", "weights"):
            print(f"    {part}:")
        # a case's extra parts (the PyTorch checker's gradients) are computed
        # by the checker from what the function returned, not returned by it
        _show(expected, parts.get(part), "from your output, by autograd:"
              if part in case.extra else "your function returned:")
        return Verdict(False, name)
    print(passed or f"{name}: all {len(cases)} cases passed.")
    return Verdict(True, name)
