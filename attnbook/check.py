"""Exercise checkers.

Each ``check_*`` function runs the learner's function on several cases, edge
cases included, compares the result with the answer key in
:mod:`attnbook.reference`, and prints either a pass or the first case that
failed, with the expected and actual values. It returns a :class:`Verdict`,
true on a pass, so a solution cell can ``assert`` it.

The return contract is the same for every exercise: the function returns its
output, or a tuple or list ``(output, weights)``. Where a checker knows the
expected attention weights, it checks the second element too (``None`` in
its place is accepted and not checked).

Every checker also holds a list of known wrong answers (:class:`Mistake`),
computed by code: when the learner's result matches one of them, the report
adds a ``hint:`` line naming the mistake. A checker never raises on a
learner's answer (a stub raising ``NotImplementedError`` is reported as "not
done yet"; any other exception, or a result that is not an array, is
reported as a failed case). Every printed line fits in 79 characters.
"""

from __future__ import annotations

import textwrap
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import reference as ref

__all__ = ["Case", "Mistake", "Verdict", "run_cases", "check_softmax", "check_attention",
           "check_scores"]

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
    """A known wrong answer: ``fn`` takes the learner's arguments and computes it.

    When the learner's result equals ``fn``'s on the failing case, the
    checker prints ``hint: <hint>``.
    """

    hint: str
    fn: Callable


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


def _show(expected, got) -> None:
    """Print the expected and the returned values side by side, or one above the other."""
    half = (WIDTH - 8) // 2
    left = ["expected:"] + _fmt(expected, half).splitlines()
    right = ["your function returned:"] + _fmt(got, half).splitlines()
    if max(map(len, left)) <= half and max(map(len, right)) <= half:
        rows = max(len(left), len(right))
        left += [""] * (rows - len(left))
        right += [""] * (rows - len(right))
        for a, b in zip(left, right):
            print(f"    {a:<{half + 4}}{b}".rstrip())
        return
    for line in ["expected:"] + _fmt(expected).splitlines():
        print(f"    {line}".rstrip())
    for line in ["your function returned:"] + _fmt(got).splitlines():
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
        if np.isneginf(got_arr).any() and vals <= {0.0}:
            tip = ("this is an additive 0/-inf mask; the book's mask is "
                   "boolean, True = may attend: use mask == 0")
        return (f"the mask must be a boolean array (True = may attend), "
                f"got dtype {got_arr.dtype}; {tip}")
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


def _call_numpy(fn, case):
    """Run ``fn`` on a copy of the case's arguments; return its parts: output and weights."""
    got = fn(*_copy_args(case.args), **case.kwargs)
    out, weights = _split_result(got, np.shape(case.expected))
    return {"output": out, "weights": weights}


def _quiet(call, fn, case):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(fn, case)


def _first_problem(case, parts, rtol, atol, want_bool):
    """(part name, reason) for the first part of the result that disagrees, or None."""
    reason = _compare(case.expected, parts.get("output"), rtol, atol, want_bool=want_bool)
    if reason:
        return "output", reason
    if case.weights is not None and parts.get("weights") is not None:
        reason = _compare(case.weights, parts["weights"], rtol, atol,
                          what="the weights (second element)")
        if reason:
            return "weights", reason
    for name, expected in case.extra.items():
        if parts.get(name) is None:
            return name, (f"no {name}: return torch tensors computed from q, k "
                          "and v (no .numpy(), no new tensors), so that the "
                          "gradients flow back")
        reason = _compare(expected, parts.get(name), rtol, atol, what=f"the {name}")
        if reason:
            return name, reason
    return None


def _hints(mistakes, call, case, part, parts, rtol, atol):
    """The hints of the known mistakes whose result equals the learner's, on this case."""
    found = []
    for mistake in mistakes:
        try:
            wrong = _quiet(call, mistake.fn, case)
        except Exception:
            continue
        if not _same(parts.get("output"), wrong.get("output"), rtol, atol):
            continue
        if part != "output" and not _same(parts.get(part), wrong.get(part), rtol, atol):
            continue
        if mistake.hint not in found:
            found.append(mistake.hint)
    return found


def _raise_hints(mistakes, call, case, exc):
    """The hints of the known mistakes that raise the same error as the learner's."""
    found = []
    for mistake in mistakes:
        try:
            _quiet(call, mistake.fn, case)
        except Exception as wrong:
            if type(wrong) is type(exc) and str(wrong) == str(exc) \
                    and mistake.hint not in found:
                found.append(mistake.hint)
    return found


def run_cases(fn: Callable, cases: list[Case], name: str, *, rtol=1e-6, atol=1e-9,
              pick: Callable | None = None, mistakes=(), want_bool=False,
              call: Callable | None = None) -> Verdict:
    """Run ``fn`` on every case; print a pass or the first failure. The Verdict is true on a pass.

    ``fn`` may return its output or ``(output, weights)``; ``pick``, when
    given, extracts the output from what ``fn`` returned instead.
    ``mistakes`` is a list of :class:`Mistake`: on a failure, the hint of
    every mistake whose result equals the learner's is printed.
    ``want_bool`` asks for a boolean result (a mask). ``call(fn, case)``
    replaces the way ``fn`` is called and returns a dict of parts
    (``"output"``, ``"weights"``, and any names in ``case.extra``).
    """
    if call is None:
        call = _call_numpy
    if pick is not None:
        def call(f, case):
            return {"output": pick(f(*_copy_args(case.args), **case.kwargs))}

    for i, case in enumerate(cases, 1):
        try:
            parts = _quiet(call, fn, case)
        except NotImplementedError:
            print(f"{name}: not done yet (replace the stub with your code).")
            return Verdict(False, name)
        except Exception as exc:  # the learner's bug, reported rather than raised
            _say(f"{name}: case {i}/{len(cases)} FAILED: {case.label}", 0, 4)
            _say(f"your function raised {type(exc).__name__}: {exc}", 4, 4)
            for hint in _raise_hints(mistakes, call, case, exc):
                _say(f"hint: {hint}", 4, 6)
            return Verdict(False, name)
        problem = _first_problem(case, parts, rtol, atol, want_bool)
        if problem is None:
            continue
        part, reason = problem
        _say(f"{name}: case {i}/{len(cases)} FAILED: {case.label}", 0, 4)
        _say(reason, 4, 4)
        for hint in _hints(mistakes, call, case, part, parts, rtol, atol):
            _say(f"hint: {hint}", 4, 6)
        if part == "output":
            _show(case.expected, parts.get("output"))
        elif part == "weights":
            _show(case.weights, parts.get("weights"))
        else:
            _show(case.extra[part], parts.get(part))
        return Verdict(False, name)
    print(f"{name}: all {len(cases)} cases passed.")
    return Verdict(True, name)


# --- wrong answers, computed ------------------------------------------------

def _sm(s, axis=-1, shift="row", keepdims=True):
    """A softmax with a chosen mistake: shift "row" (right), "global" or "none";
    keepdims True (right), False, or "max" / "sum" for the one that lacks it."""
    if shift == "row":
        s = s - s.max(axis=axis, keepdims=keepdims not in (False, "max"))
    elif shift == "global":
        s = s - s.max()
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=keepdims not in (False, "sum"))


def _attn(q, k, v, mask=None, *, scale=None, axis=-1, shift="row", keepdims=True,
          swap=False):
    """Attention with a chosen mistake; scale(q, k, v) is the divisor (default sqrt(dk))."""
    s = (k @ np.swapaxes(q, -2, -1)) if swap else q @ np.swapaxes(k, -2, -1)
    s = s / (np.sqrt(q.shape[-1]) if scale is None else scale(q, k, v))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _sm(s, axis, shift, keepdims)
    return w @ v, w


HINT_NO_SCALE = "the scores are not scaled: divide them by sqrt(dk)"
HINT_DK = "the scores are divided by dk; divide by sqrt(dk) instead"
HINT_TIMES = "the scores are multiplied by sqrt(dk); divide by it instead"
HINT_DV = ("the scores are scaled by sqrt(dv), the width of the values; "
           "scale by sqrt(dk), the width of the queries and keys")
HINT_TOKENS = ("the scores are scaled by the square root of a number of tokens "
               "(a shape[0] or shape[1]); dk is the last axis, shape[-1]")
HINT_WIDTH_D = ("the scores are scaled by sqrt(D), the width of x; scale by "
                "sqrt(dk), the width of one head's queries and keys")
HINT_AXIS = ("softmax over the wrong axis: each row of weights (one query) "
             "must sum to 1, so take max and sum over axis=-1")
HINT_NAIVE = ("exp overflowed: subtract each row's maximum before exp "
              "(softmax does not change, and exp stays <= 1)")
HINT_GLOBAL = ("one maximum for the whole array: a row far below it underflows "
               "to 0/0. Subtract each row's own maximum: "
               "x.max(axis=-1, keepdims=True)")
HINT_KEEPDIMS = ("max or sum without keepdims=True: the per-row values line up "
                 "with the columns instead of the rows")
HINT_TRANSPOSED = ("the score matrix is transposed: K @ Q.T (or W_q and W_k "
                   "swapped); the scores are Q @ K.T, one row per query")
HINT_WEIGHTS = ("this is the weights; return the output weights @ V, "
                "or the tuple (output, weights) in that order")
HINT_SUM_ALL = ("divided by the sum of the whole array; each row is divided "
                "by its own sum (axis=-1, keepdims=True)")
HINT_MIX_BATCH = ("the sequences of the batch are mixed: each token attended "
                  "to the tokens of every sequence. Keep the batch axis: "
                  "use k.swapaxes(-2, -1), not a reshape to (B*N, D)")


def _scale_mistakes(fn_of_scale, dv=True, width_d=None, batched=True):
    """The scaling mistakes, for an attention computed by ``fn_of_scale(scale)``."""
    out = [
        Mistake(HINT_NO_SCALE, fn_of_scale(lambda q, k, v: 1.0)),
        Mistake(HINT_DK, fn_of_scale(lambda q, k, v: k.shape[-1])),
        Mistake(HINT_TIMES, fn_of_scale(lambda q, k, v: 1 / np.sqrt(k.shape[-1]))),
        Mistake(HINT_TOKENS, fn_of_scale(lambda q, k, v: np.sqrt(k.shape[-2]))),
        Mistake(HINT_TOKENS, fn_of_scale(lambda q, k, v: np.sqrt(q.shape[-2]))),
    ]
    if batched:  # k.shape[1] is N for a batch (B, N, HS); for (N, dk) it is right
        out.append(Mistake(HINT_TOKENS, fn_of_scale(lambda q, k, v: np.sqrt(k.shape[1]))))
    if dv:
        out.append(Mistake(HINT_DV, fn_of_scale(lambda q, k, v: np.sqrt(v.shape[-1]))))
    if width_d is not None:
        out.append(Mistake(HINT_WIDTH_D, fn_of_scale(lambda q, k, v: np.sqrt(width_d))))
    return out


# --- softmax ---------------------------------------------------------------

def softmax_cases() -> list[Case]:
    rng = np.random.default_rng(1)
    batch = rng.normal(size=(2, 3, 4))
    big = np.array([1000.0, 1001.0, 1002.0])
    with_inf = np.array([0.5, -np.inf, 1.5, -np.inf])
    three_tokens = np.array([10.0, 58.0, 106.0]) / np.sqrt(2)
    square = np.array([[1.0, 2.0, 3.0], [0.0, 0.0, 5.0], [2.0, -1.0, 0.0]])
    apart = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    gap = apart.max() - apart[1].max()
    cases = [
        ("a small row [1, 2, 3]", np.array([1.0, 2.0, 3.0])),
        ("large values [1000, 1001, 1002] (naive exp overflows)", big),
        ("a row with -inf entries (masked positions must get weight 0)", with_inf),
        ("a row of length one", np.array([7.0])),
        ("a batch of shape (2, 3, 4), softmax over the last axis", batch),
        ("the three-token chapter's first scaled row", three_tokens),
        ("a 3 x 3 matrix, not symmetric: each row on its own", square),
        (f"two rows {gap:g} apart: each row needs its own maximum", apart),
    ]
    return [Case(label, (x,), ref.softmax(x)) for label, x in cases]


def _softmax_mistakes():
    return [
        Mistake(HINT_NAIVE, lambda x: _sm(x, shift="none")),
        Mistake(HINT_GLOBAL, lambda x: _sm(x, shift="global")),
        Mistake(HINT_AXIS, lambda x: _sm(x, axis=0)),
        Mistake(HINT_AXIS, lambda x: _sm(x, axis=-2)),
        Mistake(HINT_KEEPDIMS, lambda x: _sm(x, keepdims=False)),
        Mistake(HINT_KEEPDIMS, lambda x: _sm(x, keepdims="max")),
        Mistake(HINT_KEEPDIMS, lambda x: _sm(x, keepdims="sum")),
        Mistake(HINT_SUM_ALL, lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(
            x - x.max(-1, keepdims=True)).sum()),
    ]


def check_softmax(fn: Callable) -> Verdict:
    """Check a learner's ``softmax(x)`` over the last axis."""
    return run_cases(fn, softmax_cases(), "check_softmax", mistakes=_softmax_mistakes())


# --- scores ------------------------------------------------------------------

def scores_cases() -> list[Case]:
    rng = np.random.default_rng(2)
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=float)
    q, k = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    q3, k3 = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    return [
        Case("the three tokens of chapter 1 as both queries and keys", (x, x), x @ x.T / 2.0),
        Case("4 queries against 6 keys, dk = 3 (the result is 4 x 6)", (q, k),
             q @ k.T / np.sqrt(3)),
        Case("3 queries against 3 other keys, dk = 5 (not symmetric)", (q3, k3),
             q3 @ k3.T / np.sqrt(5)),
    ]


def _scores_mistakes():
    def by(scale):
        return lambda q, k: q @ k.T / scale(q, k, None)
    out = _scale_mistakes(by, dv=False, batched=False)
    out.append(Mistake(HINT_TRANSPOSED, lambda q, k: k @ q.T / np.sqrt(q.shape[-1])))
    return out


def check_scores(fn: Callable) -> Verdict:
    """Check a learner's ``scores(Q, K)`` = Q K^T / sqrt(dk) for one sequence."""
    return run_cases(fn, scores_cases(), "check_scores", mistakes=_scores_mistakes())


# --- attention, one sequence -------------------------------------------------

def attention_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=float)
    wq = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    wk = np.array([[0, 1], [0, 1], [1, 0], [1, 0]], dtype=float)
    wv = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=float)
    small, double = x / 10, x * 2
    q, k, v = rng.normal(size=(2, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 3))
    q_apart = np.array([[1200.0, 0.0], [0.0, 1.0]])
    k_apart = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1.0]])
    v_apart = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0]])

    def top(qq, kk):
        return (qq @ kk.T / np.sqrt(kk.shape[-1])).max()

    s_apart = q_apart @ k_apart.T / np.sqrt(2)
    gap = s_apart.max() - s_apart[1].max()
    out = []
    for label, args in [
        (f"the three-token example (scaled scores up to "
         f"{top(x @ wq, x @ wk):.2f})", (x @ wq, x @ wk, x @ wv)),
        ("the three-token example with X / 10 (soft weights)",
         (small @ wq, small @ wk, small @ wv)),
        ("2 queries, 4 keys, dk = 5, dv = 3", (q, k, v)),
        ("one key: every query must return that key's value", (q, k[:1], v[:1])),
        (f"the three-token example with 2 X: scaled scores up to "
         f"{top(double @ wq, double @ wk):.2f}, so exp overflows unless you "
         f"subtract each row's maximum", (double @ wq, double @ wk, double @ wv)),
        (f"two queries whose best scores are {gap:.1f} apart: each row needs "
         f"its own maximum", (q_apart, k_apart, v_apart)),
    ]:
        o, w = ref.scaled_dot_product_attention(*args)
        out.append(Case(label, args, o, weights=w))
    return out


def _attention_mistakes():
    def by(scale):
        return lambda q, k, v: _attn(q, k, v, scale=scale)
    return _scale_mistakes(by, batched=False) + [
        Mistake(HINT_AXIS, lambda q, k, v: _attn(q, k, v, axis=0)),
        Mistake(HINT_NAIVE, lambda q, k, v: _attn(q, k, v, shift="none")),
        Mistake(HINT_GLOBAL, lambda q, k, v: _attn(q, k, v, shift="global")),
        Mistake(HINT_KEEPDIMS, lambda q, k, v: _attn(q, k, v, keepdims=False)),
        Mistake(HINT_KEEPDIMS, lambda q, k, v: _attn(q, k, v, keepdims="max")),
        Mistake(HINT_KEEPDIMS, lambda q, k, v: _attn(q, k, v, keepdims="sum")),
        Mistake(HINT_TRANSPOSED, lambda q, k, v: _attn(q, k, v, swap=True)),
        Mistake(HINT_WEIGHTS, lambda q, k, v: _attn(q, k, v)[1]),
        Mistake(HINT_WEIGHTS, lambda q, k, v: _attn(q, k, v)[::-1]),
    ]


def check_attention(fn: Callable) -> Verdict:
    """Check a learner's ``attention(Q, K, V)`` for one sequence (returns the output,
    or an ``(output, weights)`` tuple or list; the weights are checked too)."""
    return run_cases(fn, attention_cases(), "check_attention", mistakes=_attention_mistakes())


# --- Part I: soft lookup and temperature ---

def soft_lookup_cases() -> list[Case]:
    heights = np.array([175.0, 180.0, 166.0, 170.0])
    keys = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    rng = np.random.default_rng(4)
    k, v, q = rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), rng.normal(size=3)
    big_q = np.array([0.0, 800.0, 0.0])
    cases = [
        ("the query 'girls' = [0, 10, 0] over the four students' heights",
         (np.array([0.0, 10.0, 0.0]), keys, heights)),
        ("a query that matches nobody ([0, 0, 0]): the plain average",
         (np.zeros(3), keys, heights)),
        ("5 keys of width 3, values of width 2 (the result has shape (2,))", (q, k, v)),
        ("one key: the result is that key's value", (q, k[:1], v[:1])),
        ("large scores (800): exp(800) overflows float64 unless you subtract the maximum",
         (big_q, keys, heights)),
    ]
    out = []
    for label, args in cases:
        query, ks, vs = args
        w = ref.softmax(ks @ query)
        out.append(Case(label, args, w @ vs, weights=w))
    return out


def _soft_lookup_mistakes():
    def hard(query, keys, values):
        s = keys @ query
        return (s == s.max()).astype(float) / (s == s.max()).sum() @ values

    return [
        Mistake(HINT_NAIVE, lambda q, k, v: _sm(k @ q, shift="none") @ v),
        Mistake("the scores are scaled by sqrt(d); this soft lookup has no scale "
                "(the scale comes in the scaling chapter)",
                lambda q, k, v: _sm(k @ q / np.sqrt(q.shape[-1])) @ v),
        Mistake("a hard lookup: all the weight on the best key (an argmax); "
                "use the softmax of the scores as weights", hard),
        Mistake("a hard lookup: the value of the single best key (an argmax); "
                "the soft lookup averages all the values, weighted by the softmax",
                lambda q, k, v: v[np.argmax(k @ q)]),
        Mistake("the weights are exp(scores) without dividing by their sum",
                lambda q, k, v: np.exp(k @ q - (k @ q).max()) @ v),
        Mistake("the plain average of the values: the query is ignored",
                lambda q, k, v: v.mean(axis=0)),
        Mistake("this is the weights; return the weighted sum weights @ values",
                lambda q, k, v: _sm(k @ q)),
    ]


def check_soft_lookup(fn: Callable) -> Verdict:
    """Check a learner's ``soft_lookup(query, keys, values)`` = softmax(keys @ query) @ values
    for one query vector (d,), keys (n, d) and values (n,) or (n, dv)."""
    return run_cases(fn, soft_lookup_cases(), "check_soft_lookup",
                     mistakes=_soft_lookup_mistakes())


def temperature_softmax_cases() -> list[Case]:
    z = np.array([1.0, 2.0, 7.0, 12.0, 8.0, 5.0, 2.0, 1.0])
    rng = np.random.default_rng(5)
    batch = rng.normal(size=(2, 3, 4))
    ties = np.array([3.0, 1.0, 3.0])
    rows0 = np.array([[1.0, 5.0, 3.0], [2.0, 0.0, 1.0], [4.0, 4.0, -1.0]])
    apart = np.array([[1000.0, 1001.0, 1002.0], [0.0, 1.0, 2.0]])
    cases = [
        ("the source's scores [1, 2, 7, 12, 8, 5, 2, 1] at t = 1", (z, 1.0)),
        ("the same scores at t = 16 (= sqrt(256))", (z, 16.0)),
        ("a small temperature, t = 0.01 (exp overflows unless you subtract the "
         "maximum first)", (z, 0.01)),
        ("a batch of shape (2, 3, 4) at t = 2, over the last axis", (batch, 2.0)),
        ("t = 0, the limit: all the weight on the maximum", (z, 0.0)),
        ("t = 0 with a tie for the maximum: the weight is split equally", (ties, 0.0)),
        ("t = 0 on three rows with different maxima: each row's own maximum",
         (rows0, 0.0)),
        (f"t = 1 on two rows {apart.max() - apart[1].max():g} apart: each row's "
         f"own maximum", (apart, 1.0)),
    ]
    return [Case(label, args, ref.softmax(args[0], temperature=args[1]))
            for label, args in cases]


def _temperature_mistakes():
    def variant(shift="row", axis=-1, zero="split", times=False, zero_shift="row"):
        def f(x, t):
            x = np.asarray(x, dtype=float)
            if t == 0:
                m = x.max() if zero_shift == "global" else x.max(axis=axis, keepdims=True)
                hot = (x == m).astype(float)
                if zero == "raw":
                    return hot
                if zero == "first":
                    return np.eye(x.shape[-1])[np.argmax(x, axis=-1)]
                return hot / hot.sum(axis=axis, keepdims=True)
            return _sm(x * t if times else x / t, axis=axis, shift=shift)
        return f

    return [
        Mistake("x * t instead of x / t: a small t must sharpen the weights",
                variant(times=True)),
        Mistake(HINT_NAIVE, variant(shift="none")),
        Mistake(HINT_GLOBAL, variant(shift="global")),
        Mistake(HINT_GLOBAL + " (in the t = 0 branch)", variant(zero_shift="global")),
        Mistake(HINT_AXIS, variant(axis=0)),
        Mistake(HINT_AXIS, variant(axis=-2)),
        Mistake("at t = 0 the weight of a tie is split equally; argmax picks "
                "only the first maximum", variant(zero="first")),
        Mistake("at t = 0 the one-hot (x == max) must be divided by the number "
                "of maxima, so that it sums to 1", variant(zero="raw")),
    ]


def check_temperature_softmax(fn: Callable) -> Verdict:
    """Check a learner's ``softmax_t(x, t)`` = softmax(x / t) over the last axis, with
    t = 0 meaning the limit t -> 0+ (all weight on the maximum, ties split equally)."""
    return run_cases(fn, temperature_softmax_cases(), "check_temperature_softmax",
                     mistakes=_temperature_mistakes())


__all__ += ["check_soft_lookup", "check_temperature_softmax"]
# --- Part II: self-attention, masking, cross-attention ---

__all__ += ["check_self_attention_batched", "check_causal_mask", "check_padding_mask",
            "check_cross_attention"]


def self_attention_cases() -> list[Case]:
    rng = np.random.default_rng(4)
    d, hs, dv = 6, 4, 5
    w_q, w_k, w_v = rng.normal(size=(d, hs)), rng.normal(size=(d, hs)), rng.normal(size=(d, dv))
    w_v4 = rng.normal(size=(d, hs))
    x3 = rng.normal(size=(3, 5, d))
    x1 = rng.normal(size=(1, 4, d))
    x2d = rng.normal(size=(5, d))
    xone = rng.normal(size=(2, 1, d))
    x_apart = np.stack([x3[0], 25 * x3[1]])  # the second sequence's scores are huge
    scores = (x_apart @ w_q) @ np.swapaxes(x_apart @ w_k, -2, -1) / np.sqrt(hs)
    gap = scores.max() - scores[0].max(axis=-1).min()
    out = []
    for label, args in [
        ("a batch: x (3, 5, 6), weights (6, 4), dv = dk = 4", (x3, w_q, w_k, w_v4)),
        ("a batch of one: x (1, 4, 6)", (x1, w_q, w_k, w_v4)),
        ("no batch axis: x (5, 6) must give (5, 4)", (x2d, w_q, w_k, w_v4)),
        ("value width differs: W_v (6, 5), so the output is (3, 5, 5)",
         (x3, w_q, w_k, w_v)),
        ("sequences of one token: x (2, 1, 6)", (xone, w_q, w_k, w_v4)),
        (f"two sequences whose scores lie {gap:.0f} apart: each row needs its "
         f"own maximum", (x_apart, w_q, w_k, w_v)),
    ]:
        x, wq, wk, wv = args
        o, w = ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv)
        out.append(Case(label, args, o, weights=w))
    return out


def _self_mistakes():
    def sa(**kw):
        return lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv, **kw)

    def by(scale):
        return sa(scale=scale)

    def mixed(x, wq, wk, wv):
        flat = x.reshape(-1, x.shape[-1])
        o, _ = _attn(flat @ wq, flat @ wk, flat @ wv)
        return o.reshape(*x.shape[:-1], wv.shape[-1])

    return _scale_mistakes(by) + [
        Mistake(HINT_WIDTH_D, lambda x, wq, wk, wv: _attn(
            x @ wq, x @ wk, x @ wv, scale=lambda q, k, v: np.sqrt(x.shape[-1]))),
        Mistake(HINT_AXIS, sa(axis=-2)),
        Mistake(HINT_NAIVE, sa(shift="none")),
        Mistake(HINT_GLOBAL, sa(shift="global")),
        Mistake(HINT_TRANSPOSED, sa(swap=True)),
        Mistake(HINT_MIX_BATCH, mixed),
        Mistake(HINT_WEIGHTS, lambda x, wq, wk, wv: _attn(x @ wq, x @ wk, x @ wv)[1]),
    ]


def check_self_attention_batched(fn: Callable) -> Verdict:
    """Check a learner's ``self_attention(x, W_q, W_k, W_v)`` for x of shape (B, N, D) or (N, D)
    (returns the output, or an ``(output, weights)`` tuple; the weights are checked too)."""
    return run_cases(fn, self_attention_cases(), "check_self_attention_batched",
                     mistakes=_self_mistakes())


def causal_mask_cases() -> list[Case]:
    return [Case(f"n = {n}" + (" (an empty sequence: shape (0, 0))" if n == 0 else ""),
                 (n,), ref.causal_mask(n))
            for n in (3, 1, 6, 0)]


HINT_POLARITY = ("inverted polarity: True must mean 'may attend' (the book's "
                 "convention); you marked the hidden positions True")


def _causal_mistakes():
    def tri(k=0, upper=False, invert=False):
        def f(n):
            m = (np.triu if upper else np.tril)(np.ones((n, n), dtype=bool), k=k)
            return ~m if invert else m
        return f

    return [
        Mistake(HINT_POLARITY, tri(invert=True)),
        Mistake(HINT_POLARITY, tri(k=1, upper=True)),
        Mistake("off by one: k=-1 hides the diagonal, but query i may attend "
                "to key i itself (np.tril keeps it with the default k=0)", tri(k=-1)),
        Mistake("off by one: k=1 lets query i see key i + 1, one step into the "
                "future (use the default k=0)", tri(k=1)),
        Mistake("the upper triangle lets query i see keys i..n-1, the future; "
                "the causal mask is the lower triangle, np.tril", tri(upper=True)),
        Mistake("nothing is hidden: every entry is True",
                lambda n: np.ones((n, n), dtype=bool)),
    ]


def check_causal_mask(fn: Callable) -> Verdict:
    """Check a learner's ``causal_mask(n)``: a boolean (n, n) array, True where query i may see key j."""
    return run_cases(fn, causal_mask_cases(), "check_causal_mask", want_bool=True,
                     mistakes=_causal_mistakes())


def padding_mask_cases() -> list[Case]:
    return [
        Case("lengths [3, 5] padded to n = 5 (shape (2, 1, 5): hides key columns)",
             (np.array([3, 5]), 5), ref.padding_mask([3, 5], 5)),
        Case("lengths [2, 4, 1] padded to n = 4", (np.array([2, 4, 1]), 4),
             ref.padding_mask([2, 4, 1], 4)),
        Case("one sequence with no padding: lengths [4], n = 4", (np.array([4]), 4),
             ref.padding_mask([4], 4)),
        Case("lengths [5, 0]: an empty sequence has every key hidden", (np.array([5, 0]), 5),
             ref.padding_mask([5, 0], 5)),
    ]


def _padding_mistakes():
    def real(lengths, n, op=np.less, shift=0):
        return op(np.arange(n)[None, :], np.asarray(lengths)[:, None] + shift)  # (B, n)

    return [
        Mistake("the mask hides query rows: shape (B, n, 1). Padding hides keys, "
                "the columns: put the size-1 axis in the middle, (B, 1, n)",
                lambda lengths, n: real(lengths, n)[:, :, None]),
        Mistake("shape (B, n) has no query axis: against (B, Nq, Nk) scores its "
                "B would line up with the queries. Return (B, 1, n)",
                lambda lengths, n: real(lengths, n)),
        Mistake("(B, 1, 1, n) is the form for multi-head scores; this exercise "
                "wants one head's (B, 1, n)", lambda lengths, n: real(lengths, n)[:, None, None]),
        Mistake(HINT_POLARITY, lambda lengths, n: ~real(lengths, n)[:, None]),
        Mistake("off by one: position lengths[b] is already padding (positions "
                "count from 0): use <, not <=",
                lambda lengths, n: real(lengths, n, np.less_equal)[:, None]),
        Mistake("off by one: the last real key (position lengths[b] - 1) is "
                "hidden", lambda lengths, n: real(lengths, n, shift=-1)[:, None]),
    ]


def check_padding_mask(fn: Callable) -> Verdict:
    """Check a learner's ``padding_mask(lengths, n)``: boolean, shape (B, 1, n), True = a real key."""
    return run_cases(fn, padding_mask_cases(), "check_padding_mask", want_bool=True,
                     mistakes=_padding_mistakes())


def cross_attention_cases() -> list[Case]:
    rng = np.random.default_rng(5)
    d, hs, dv = 6, 4, 3
    w_q, w_k, w_v = rng.normal(size=(d, hs)), rng.normal(size=(d, hs)), rng.normal(size=(d, dv))
    xq, xv = rng.normal(size=(2, 3, d)), rng.normal(size=(2, 5, d))
    xq4, xv4 = rng.normal(size=(2, 4, d)), rng.normal(size=(2, 4, d))
    out = []
    for label, args in [
        ("a batch: xq (2, 3, 6) against xv (2, 5, 6); the output is (2, 3, 3)",
         (xq, xv, w_q, w_k, w_v)),
        ("more queries than keys: xq (2, 5, 6), xv (2, 3, 6)", (xv, xq, w_q, w_k, w_v)),
        ("no batch axis: xq (3, 6), xv (5, 6)", (xq[0], xv[0], w_q, w_k, w_v)),
        ("a single query: xq (2, 1, 6)", (xq[:, :1], xv, w_q, w_k, w_v)),
        ("as many queries as keys: xq (2, 4, 6), xv (2, 4, 6), different tokens",
         (xq4, xv4, w_q, w_k, w_v)),
    ]:
        x_q, x_v = args[0], args[1]
        o, w = ref.scaled_dot_product_attention(x_q @ w_q, x_v @ w_k, x_v @ w_v)
        out.append(Case(label, args, o, weights=w))
    return out


def _cross_mistakes():
    def ca(**kw):
        return lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xv @ wk, xv @ wv, **kw)

    return _scale_mistakes(lambda scale: ca(scale=scale)) + [
        Mistake(HINT_WIDTH_D, lambda xq, xv, wq, wk, wv: _attn(
            xq @ wq, xv @ wk, xv @ wv, scale=lambda q, k, v: np.sqrt(xq.shape[-1]))),
        Mistake(HINT_AXIS, ca(axis=-2)),
        Mistake(HINT_TRANSPOSED, lambda xq, xv, wq, wk, wv: _attn(
            xq @ wk, xv @ wq, xv @ wv)),
        Mistake("the keys come from xq: in cross-attention the keys and the "
                "values both come from xv, the sequence attended to",
                lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xq @ wk, xv @ wv)),
        Mistake("the values come from xq: in cross-attention the keys and the "
                "values both come from xv, the sequence attended to",
                lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xv @ wk, xq @ wv)),
        Mistake("this is self-attention of xq: the keys and values must come "
                "from xv", lambda xq, xv, wq, wk, wv: _attn(xq @ wq, xq @ wk, xq @ wv)),
        Mistake("the roles are swapped: the queries come from xq and the keys "
                "and values from xv", lambda xq, xv, wq, wk, wv: _attn(
                    xv @ wq, xq @ wk, xq @ wv)),
        Mistake(HINT_WEIGHTS, lambda xq, xv, wq, wk, wv: _attn(
            xq @ wq, xv @ wk, xv @ wv)[1]),
    ]


def check_cross_attention(fn: Callable) -> Verdict:
    """Check a learner's ``cross_attention(xq, xv, W_q, W_k, W_v)``: queries from xq, keys and
    values from xv (returns the output, or an ``(output, weights)`` tuple; weights checked)."""
    return run_cases(fn, cross_attention_cases(), "check_cross_attention",
                     mistakes=_cross_mistakes())
# --- multi-head attention (Part III) ---

def _mha_list(x, W_qs, W_ks, W_vs, W_o, mask=None, *, scale=None, axis=-1, invert=False,
              combine="concat", same_head=False):
    """Multi-head attention from lists of per-head matrices, with a chosen mistake."""
    outs, weights = [], []
    for h, (wq, wk, wv) in enumerate(zip(W_qs, W_ks, W_vs)):
        if same_head:
            wq, wk, wv = W_qs[0], W_ks[0], W_vs[0]
        m = None if mask is None else (~mask if invert else mask)
        o, w = _attn(x @ wq, x @ wk, x @ wv, m, axis=axis,
                     scale=None if scale is None else (lambda q, k, v: scale(x, W_qs)))
        outs.append(o)
        weights.append(w)
    hs = W_qs[0].shape[1]
    if combine == "concat":
        y = np.concatenate(outs, axis=-1) @ W_o
    elif combine == "no_wo":
        y = np.concatenate(outs, axis=-1)
    elif combine == "average":
        y = sum(o @ W_o[:hs] for o in outs) / len(outs)
    elif combine == "d_over_nh":  # HS taken as D // NH to slice W_o
        step = x.shape[-1] // len(W_qs)
        y = sum(o @ W_o[h * step:(h + 1) * step] for h, o in enumerate(outs))
    else:
        raise ValueError(combine)
    return y, np.stack(weights, axis=-3)


def multihead_list_cases() -> list[Case]:
    rng = np.random.default_rng(8)

    def heads(nh, d, hs):
        return [[rng.normal(size=(d, hs)) for _ in range(nh)] for _ in range(3)]

    out = []
    for label, b, n, d, nh, hs, mask in [
        ("one head (NH = 1, HS = D = 4), one sequence", 1, 3, 4, 1, 4, None),
        ("two heads of HS = 4, D = 8", 1, 5, 8, 2, 4, None),
        ("three heads of HS = 2, D = 8 (NH * HS = 6 is not D)", 1, 4, 8, 3, 2, None),
        ("a batch of 3 sequences, four heads of HS = 2", 3, 4, 8, 4, 2, None),
        ("two heads with a causal mask (N, N), the same for every head", 2, 5, 8, 2, 4,
         "causal"),
        ("two heads of HS = 3, D = 8: HS is W_q's width, not D // NH = 4",
         2, 4, 8, 2, 3, None),
        ("three heads of HS = 2, D = 4: NH * HS = 6 > D, and D // NH = 1",
         1, 3, 4, 3, 2, None),
        ("a padding mask (B, 1, N), lengths [4, 2]: per sequence, every head",
         2, 4, 6, 2, 3, "padding"),
    ]:
        x = rng.normal(size=(b, n, d))
        W_qs, W_ks, W_vs = heads(nh, d, hs)
        W_o = rng.normal(size=(nh * hs, d))
        kwargs = {}
        if mask == "causal":
            kwargs = {"mask": ref.causal_mask(n)}
        elif mask == "padding":
            kwargs = {"mask": ref.padding_mask([4, 2], n)}
        y, w = _mha_list(x, W_qs, W_ks, W_vs, W_o, **kwargs)
        out.append(Case(label, (x, W_qs, W_ks, W_vs, W_o), y, kwargs, weights=w))
    return out


def _multihead_mistakes():
    def mh(**kw):
        return lambda x, W_qs, W_ks, W_vs, W_o, mask=None: _mha_list(
            x, W_qs, W_ks, W_vs, W_o, mask, **kw)

    hs_from_d = ("HS is computed as D // NH; here NH * HS != D, so take HS from "
                 "the matrices: HS = W_qs[0].shape[1]")
    return [
        Mistake(HINT_NO_SCALE, mh(scale=lambda x, W: 1.0)),
        Mistake(HINT_WIDTH_D, mh(scale=lambda x, W: np.sqrt(x.shape[-1]))),
        Mistake(hs_from_d, mh(scale=lambda x, W: np.sqrt(x.shape[-1] // len(W)))),
        Mistake(hs_from_d, mh(combine="d_over_nh")),
        Mistake("the mask is ignored: pass it to every head",
                lambda x, W_qs, W_ks, W_vs, W_o, mask=None: _mha_list(
                    x, W_qs, W_ks, W_vs, W_o)),
        Mistake(HINT_POLARITY, mh(invert=True)),
        Mistake(HINT_AXIS, mh(axis=-2)),
        Mistake("the heads are averaged; multi-head attention concatenates "
                "them and multiplies by W_o", mh(combine="average")),
        Mistake("W_o is not applied: multiply the concatenated heads by W_o",
                mh(combine="no_wo")),
        Mistake("every head uses the first head's matrices: head h uses "
                "W_qs[h], W_ks[h], W_vs[h]", mh(same_head=True)),
    ]


def check_multihead_list(fn: Callable) -> Verdict:
    """Check ``fn(x, W_qs, W_ks, W_vs, W_o, mask=None)``: multi-head attention from lists of
    per-head (D, HS) matrices and the output projection W_o (NH * HS, D); x is (B, N, D).
    It may return the output or an ``(output, weights)`` tuple, weights (B, NH, N, N)."""
    return run_cases(fn, multihead_list_cases(), "check_multihead_list",
                     mistakes=_multihead_mistakes())


def split_heads_cases() -> list[Case]:
    rng = np.random.default_rng(9)
    pictured = np.arange(24, dtype=float).reshape(1, 4, 6)  # entry = 6 * token + column
    out = []
    for label, x, nh in [
        ("the pictured example: (B, N, D) = (1, 4, 6), 3 heads, x[0, t, c] = 6t + c",
         pictured, 3),
        ("a batch (2, 5, 8) into 4 heads of 2", rng.normal(size=(2, 5, 8)), 4),
        ("(2, 3, 6) into 2 heads of 3", rng.normal(size=(2, 3, 6)), 2),
        ("one head: (2, 3, 4) -> (2, 1, 3, 4)", rng.normal(size=(2, 3, 4)), 1),
        ("heads of size 1: (1, 3, 4) into 4 heads", rng.normal(size=(1, 3, 4)), 4),
    ]:
        out.append(Case(label, (x, nh), ref.split_heads(x, nh)))
    return out


def merge_heads_cases() -> list[Case]:
    rng = np.random.default_rng(10)
    pictured = ref.split_heads(np.arange(24, dtype=float).reshape(1, 4, 6), 3)  # (1, 3, 4, 2)
    out = []
    for label, h in [
        ("the pictured example: (B, NH, N, HS) = (1, 3, 4, 2) -> (1, 4, 6)", pictured),
        ("(2, 4, 5, 2) -> (2, 5, 8)", rng.normal(size=(2, 4, 5, 2))),
        ("(2, 2, 3, 3) -> (2, 3, 6)", rng.normal(size=(2, 2, 3, 3))),
        ("one head: (2, 1, 3, 4) -> (2, 3, 4)", rng.normal(size=(2, 1, 3, 4))),
    ]:
        out.append(Case(label, (h,), ref.merge_heads(h)))
    return out


HINT_SPLIT_NO_T = (
    "your result is x reshaped straight to (B, NH, N, HS), without the "
    "transpose. That reads the numbers in memory order, so a 'head' gets "
    "whole rows of one token and part of the next: tokens are mixed across "
    "heads. Reshape to (B, N, NH, HS) first, then swap axes 1 and 2.")
HINT_SPLIT_NO_SWAP = (
    "your result is (B, N, NH, HS): the reshape is right, but axes 1 (N) and "
    "2 (NH) still need to be swapped, e.g. with .transpose(0, 2, 1, 3).")
HINT_SPLIT_INTERLEAVED = (
    "head h got the columns h, h + NH, h + 2 NH, ... (a reshape to "
    "(B, N, HS, NH)); head h holds the block of columns h*HS:(h+1)*HS, so "
    "reshape to (B, N, NH, HS)")
HINT_MERGE_NO_T = (
    "your result is the heads reshaped straight to (B, N, NH * HS), without "
    "the transpose. A token's row then holds several tokens' outputs from one "
    "head. Swap axes 1 (NH) and 2 (N) first, giving (B, N, NH, HS), then "
    "reshape.")
HINT_MERGE_INTERLEAVED = (
    "the heads' columns are interleaved (a transpose to (B, N, HS, NH) before "
    "the reshape); head h's output must fill the block h*HS:(h+1)*HS: "
    "transpose to (B, N, NH, HS)")


def check_split_heads(fn: Callable) -> Verdict:
    """Check ``fn(x, n_heads)``: (B, N, D) -> (B, NH, N, HS), head h holding columns h*HS:(h+1)*HS."""
    def no_t(x, nh):
        b, n, d = x.shape
        return x.reshape(b, nh, n, d // nh)

    def no_swap(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, nh, d // nh)

    def interleaved(x, nh):
        b, n, d = x.shape
        return x.reshape(b, n, d // nh, nh).transpose(0, 3, 1, 2)

    mistakes = [Mistake(HINT_SPLIT_NO_T, no_t), Mistake(HINT_SPLIT_NO_SWAP, no_swap),
                Mistake(HINT_SPLIT_INTERLEAVED, interleaved)]
    return run_cases(fn, split_heads_cases(), "check_split_heads", mistakes=mistakes)


def check_merge_heads(fn: Callable) -> Verdict:
    """Check ``fn(h)``: (B, NH, N, HS) -> (B, N, NH * HS), the inverse of split_heads."""
    def no_t(h):
        b, nh, n, hs = h.shape
        return h.reshape(b, n, nh * hs)

    def interleaved(h):
        b, nh, n, hs = h.shape
        return h.transpose(0, 2, 3, 1).reshape(b, n, nh * hs)

    mistakes = [Mistake(HINT_MERGE_NO_T, no_t), Mistake(HINT_MERGE_INTERLEAVED, interleaved)]
    return run_cases(fn, merge_heads_cases(), "check_merge_heads", mistakes=mistakes)


__all__ += ["check_multihead_list", "check_split_heads", "check_merge_heads"]
# --- PyTorch chapter ---
# These checkers import torch only when called, so this module still imports without it.

GRAD_NAMES = ("gradient of q", "gradient of k", "gradient of v")


def _call_torch(fn, case):
    """Call a learner's torch function on float64 tensors; report output, weights, gradients.

    The gradients are those of sum(output * g) for a fixed random g, with
    respect to q, k and v: a fully masked row must not make them nan.
    """
    import torch

    # the chapter may have turned gradients off (torch.set_grad_enabled(False)):
    # the check needs them, for this call only
    with torch.inference_mode(False), torch.enable_grad():
        return _call_torch_grad(fn, case)


def _call_torch_grad(fn, case):
    import torch

    tensors = []
    for a in case.args:
        if isinstance(a, np.ndarray) and a.dtype != bool:
            tensors.append(torch.tensor(a, dtype=torch.float64, requires_grad=True))
        elif isinstance(a, np.ndarray):
            tensors.append(torch.from_numpy(a.copy()))
        else:
            tensors.append(a)
    got = fn(*tensors, **case.kwargs)
    out, weights = _split_result(got, np.shape(case.expected))
    parts = {"output": _to_numpy(out), "weights": _to_numpy(weights)}
    leaves = [t for t in tensors[:3] if isinstance(t, torch.Tensor)]
    if isinstance(out, torch.Tensor) and out.requires_grad and out.shape == case.expected.shape:
        g = torch.from_numpy(np.random.default_rng(0).normal(size=out.shape))
        grads = torch.autograd.grad((out * g.to(out.dtype)).sum(), leaves, allow_unused=True)
        for name, grad in zip(GRAD_NAMES, grads):
            parts[name] = None if grad is None else grad.detach().numpy()
    return parts


def torch_attention_cases() -> list[Case]:
    import torch

    from . import torch_attention as ta

    rng = np.random.default_rng(10)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))
    pad = ref.padding_mask(np.array([5, 3]), 5)  # (2, 1, 5): the second sequence has 2 padded keys
    causal = ref.causal_mask(4)
    x = rng.normal(size=(1, 2, 4, 3))  # (B, NH, N, HS)
    one_empty = np.ones((3, 5), dtype=bool)
    one_empty[1] = False  # query 1 may attend to nothing
    zero_len = ref.padding_mask(np.array([0, 2]), 5)  # a sequence that is all padding
    cases = [
        ("no mask: 3 queries, 5 keys, dk = 4, dv = 6", (q, k, v, None)),
        ("a padding mask (True = may attend) hiding the last 2 keys of sequence 2",
         (q, k, v, pad)),
        ("a causal mask on 2 heads of 4 tokens", (x, x.copy(), x.copy(), causal)),
        ("query 1 has every key masked: its weights and output must be 0, not nan, "
         "and so must the gradients flowing back from it", (q, k, v, one_empty)),
        ("a sequence that is all padding: every one of its rows is fully masked",
         (q, k, v, zero_len)),
    ]
    out = []
    for label, args in cases:
        o, w = ref.scaled_dot_product_attention(*args, fully_masked="zeros")
        expected = Case(label, args, o, weights=w)
        parts = _call_torch(lambda *a: ta.attention(*a, fully_masked="zeros"), expected)
        expected.extra = {name: parts[name] for name in GRAD_NAMES}
        out.append(expected)
    del torch
    return out


def _torch_mistakes():
    import math

    import torch

    def make(fill=float("-inf"), empty="zeros", scale=None, axis=-1, invert=False,
             additive=False):
        def f(q, k, v, mask=None):
            d = q.shape[-1] if scale is None else scale(q, k, v)
            s = q @ k.transpose(-2, -1) / math.sqrt(d)
            if mask is not None and additive:
                s = s + torch.zeros(mask.shape, dtype=s.dtype).masked_fill(~mask, fill)
            elif mask is not None:
                s = s.masked_fill(mask if invert else ~mask, fill)
            if empty == "nan_to_num":
                w = torch.nan_to_num(torch.softmax(s, dim=axis))
            elif empty == "zeros" and mask is not None:
                rows = ~(mask if not invert else ~mask).any(dim=-1, keepdim=True)
                w = torch.softmax(s.masked_fill(rows, 0.0), dim=axis).masked_fill(rows, 0.0)
            else:
                w = torch.softmax(s, dim=axis)
            return w @ v, w
        return f

    return [
        Mistake("nan_to_num (or a where) after the softmax fixes the forward pass "
                "only: with an additive -inf mask, the gradient of a fully masked "
                "row is still nan. Give such a row finite scores (e.g. 0) before "
                "the softmax, then zero its weights",
                make(empty="nan_to_num", additive=True)),
        Mistake("a fully masked row is not handled: its softmax is 0/0 = nan. "
                "Find the rows with no allowed key and give them zero weights",
                make(empty="none")),
        Mistake("masked with a large finite number instead of -inf: a fully "
                "masked row then gets equal weights on every key instead of "
                "zeros", make(fill=-1e9, empty="none")),
        Mistake(HINT_POLARITY + " (nn.MultiheadAttention's polarity)",
                make(invert=True)),
        Mistake(HINT_NO_SCALE, make(scale=lambda q, k, v: 1.0)),
        Mistake(HINT_DV, make(scale=lambda q, k, v: v.shape[-1])),
        Mistake(HINT_AXIS, make(axis=-2)),
    ]


def check_torch_attention(fn: Callable) -> Verdict:
    """Check a learner's PyTorch ``attention(q, k, v, mask)``: mask True = may attend;
    a fully masked query gets zero weights and a zero output, and the backward pass
    stays finite. Returns the output, or ``(output, weights)`` (weights checked);
    the gradients of sum(output * g) with respect to q, k and v are checked too."""
    return run_cases(fn, torch_attention_cases(), "check_torch_attention", rtol=1e-5,
                     atol=1e-6, call=_call_torch, mistakes=_torch_mistakes())


__all__ += ["check_torch_attention"]


# The checkers of the later parts live in modules of their own (one per part of
# the book); chapters import them from here.
from .check_learn import check_attention_backward, check_cross_entropy  # noqa: E402
from .check_llm import __all__ as _llm_all  # noqa: E402
from .check_llm import *  # noqa: E402,F401,F403
from .check_mla import check_absorbed_scores  # noqa: E402
from .check_fast import check_attention_flops, check_merge_states  # noqa: E402

__all__ += ["check_attention_backward", "check_cross_entropy"]           # Part V
__all__ += _llm_all + ["check_absorbed_scores"]                          # Part VI
__all__ += ["check_merge_states", "check_attention_flops"]               # Part VII
