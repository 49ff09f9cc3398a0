"""Exercise checkers.

Each ``check_*`` function runs the learner's function on several cases, edge
cases included, compares the result with the answer key in
:mod:`attnbook.reference`, and prints either a pass or the first case that
failed, with the expected and actual values side by side. It returns ``True``
on a pass and ``False`` otherwise, so a solution cell can ``assert`` it.

A function that raises ``NotImplementedError`` (the stub in an unsolved
exercise) is reported as "not done yet" rather than as a crash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import reference as ref

__all__ = ["Case", "Verdict", "run_cases", "check_softmax", "check_attention", "check_scores"]


@dataclass
class Case:
    """One test case: a label a learner understands, the arguments, the expected result."""

    label: str
    args: tuple
    expected: Any
    kwargs: dict = field(default_factory=dict)


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


def _fmt(value) -> str:
    if isinstance(value, np.ndarray) or isinstance(value, (list, tuple)):
        arr = np.asarray(value)
        if arr.dtype != object:
            with np.printoptions(precision=4, suppress=True, threshold=40):
                return f"shape {arr.shape}\n{arr}"
    return repr(value)


def _side_by_side(expected, got) -> str:
    left = ["expected:"] + _fmt(expected).splitlines()
    right = ["your function returned:"] + _fmt(got).splitlines()
    width = max(len(s) for s in left) + 4
    rows = max(len(left), len(right))
    left += [""] * (rows - len(left))
    right += [""] * (rows - len(right))
    return "\n".join(f"    {a:<{width}}{b}" for a, b in zip(left, right))


def _compare(expected, got, rtol, atol):
    """Return None when they agree, else a short reason."""
    try:
        got_arr = np.asarray(got, dtype=float)
    except (TypeError, ValueError):
        return f"the result is not an array of numbers (got {type(got).__name__})"
    exp_arr = np.asarray(expected, dtype=float)
    if got_arr.shape != exp_arr.shape:
        return f"wrong shape: expected {exp_arr.shape}, got {got_arr.shape}"
    if np.isnan(got_arr).any() and not np.isnan(exp_arr).any():
        return "the result contains nan"
    if not np.allclose(got_arr, exp_arr, rtol=rtol, atol=atol, equal_nan=True):
        worst = np.unravel_index(np.nanargmax(np.abs(got_arr - exp_arr)), exp_arr.shape)
        return f"wrong values (largest difference at index {tuple(int(i) for i in worst)})"
    return None


def run_cases(fn: Callable, cases: list[Case], name: str, *, rtol=1e-6, atol=1e-9,
              pick: Callable | None = None) -> Verdict:
    """Run ``fn`` on every case; print a pass or the first failure. The Verdict is true on a pass.

    ``pick`` extracts the value to compare from what ``fn`` returned (for
    example the first element of an ``(output, weights)`` tuple).
    """
    for i, case in enumerate(cases, 1):
        args = tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in case.args)
        try:
            with np.errstate(all="ignore"):  # overflow shows up below as inf/nan, with the case that caused it
                got = fn(*args, **case.kwargs)
        except NotImplementedError:
            print(f"{name}: not done yet (replace the stub with your code).")
            return Verdict(False, name)
        except Exception as exc:  # the learner's bug, reported rather than raised
            print(f"{name}: case {i}/{len(cases)} FAILED: {case.label}")
            print(f"    your function raised {type(exc).__name__}: {exc}")
            return Verdict(False, name)
        if pick is not None:
            got = pick(got)
        reason = _compare(case.expected, got, rtol, atol)
        if reason:
            print(f"{name}: case {i}/{len(cases)} FAILED: {case.label}")
            print(f"    {reason}")
            print(_side_by_side(case.expected, got))
            return Verdict(False, name)
    print(f"{name}: all {len(cases)} cases passed.")
    return Verdict(True, name)


def _first_if_tuple(result):
    return result[0] if isinstance(result, tuple) else result


def softmax_cases() -> list[Case]:
    rng = np.random.default_rng(1)
    batch = rng.normal(size=(2, 3, 4))
    big = np.array([1000.0, 1001.0, 1002.0])
    with_inf = np.array([0.5, -np.inf, 1.5, -np.inf])
    three_tokens = np.array([10.0, 58.0, 106.0]) / np.sqrt(2)
    return [
        Case("a small row [1, 2, 3]", (np.array([1.0, 2.0, 3.0]),), ref.softmax(np.array([1.0, 2.0, 3.0]))),
        Case("large values [1000, 1001, 1002] (naive exp overflows)", (big,), ref.softmax(big)),
        Case("a row with -inf entries (masked positions must get weight 0)", (with_inf,), ref.softmax(with_inf)),
        Case("a row of length one", (np.array([7.0]),), np.array([1.0])),
        Case("a batch of shape (2, 3, 4), softmax over the last axis", (batch,), ref.softmax(batch)),
        Case("the three-token chapter's first scaled row", (three_tokens,), ref.softmax(three_tokens)),
    ]


def check_softmax(fn: Callable) -> Verdict:
    """Check a learner's ``softmax(x)`` over the last axis."""
    return run_cases(fn, softmax_cases(), "check_softmax")


def scores_cases() -> list[Case]:
    rng = np.random.default_rng(2)
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=float)
    q, k = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    return [
        Case("the three tokens of chapter 1 as both queries and keys", (x, x), x @ x.T / 2.0),
        Case("4 queries against 6 keys, dk = 3 (the result is 4 x 6)", (q, k), q @ k.T / np.sqrt(3)),
    ]


def check_scores(fn: Callable) -> Verdict:
    """Check a learner's ``scores(Q, K)`` = Q K^T / sqrt(dk) for one sequence."""
    return run_cases(fn, scores_cases(), "check_scores")


def attention_cases() -> list[Case]:
    rng = np.random.default_rng(3)
    x = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]], dtype=float)
    wq = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    wk = np.array([[0, 1], [0, 1], [1, 0], [1, 0]], dtype=float)
    wv = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=float)
    small = x / 10
    q, k, v = rng.normal(size=(2, 5)), rng.normal(size=(4, 5)), rng.normal(size=(4, 3))
    out = []
    for label, args in [
        ("the three-token example (scores up to about 290)", (x @ wq, x @ wk, x @ wv)),
        ("the three-token example with X / 10 (soft weights)", (small @ wq, small @ wk, small @ wv)),
        ("2 queries, 4 keys, dk = 5, dv = 3", (q, k, v)),
        ("one key: every query must return that key's value", (q, k[:1], v[:1])),
    ]:
        out.append(Case(label, args, ref.scaled_dot_product_attention(*args)[0]))
    return out


def check_attention(fn: Callable) -> Verdict:
    """Check a learner's ``attention(Q, K, V)`` for one sequence (returns the output,
    or an ``(output, weights)`` tuple)."""
    return run_cases(fn, attention_cases(), "check_attention", pick=_first_if_tuple)


# --- Part I: soft lookup and temperature ---

def soft_lookup_cases() -> list[Case]:
    heights = np.array([175.0, 180.0, 166.0, 170.0])
    keys = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    rng = np.random.default_rng(4)
    k, v, q = rng.normal(size=(5, 3)), rng.normal(size=(5, 2)), rng.normal(size=3)
    big_q = np.array([0.0, 800.0, 0.0])

    def expect(query, ks, vs):
        return ref.softmax(ks @ query) @ vs

    cases = [
        ("the query 'girls' = [0, 10, 0] over the four students' heights", (np.array([0.0, 10.0, 0.0]), keys, heights)),
        ("a query that matches nobody ([0, 0, 0]): the plain average", (np.zeros(3), keys, heights)),
        ("5 keys of width 3, values of width 2 (the result has shape (2,))", (q, k, v)),
        ("one key: the result is that key's value", (q, k[:1], v[:1])),
        ("large scores (800): exp(800) overflows float64 unless you subtract the maximum", (big_q, keys, heights)),
    ]
    return [Case(label, args, expect(*args)) for label, args in cases]


def check_soft_lookup(fn: Callable) -> Verdict:
    """Check a learner's ``soft_lookup(query, keys, values)`` = softmax(keys @ query) @ values
    for one query vector (d,), keys (n, d) and values (n,) or (n, dv)."""
    return run_cases(fn, soft_lookup_cases(), "check_soft_lookup")


def temperature_softmax_cases() -> list[Case]:
    z = np.array([1.0, 2.0, 7.0, 12.0, 8.0, 5.0, 2.0, 1.0])
    rng = np.random.default_rng(5)
    batch = rng.normal(size=(2, 3, 4))
    ties = np.array([3.0, 1.0, 3.0])
    cases = [
        ("the source's scores [1, 2, 7, 12, 8, 5, 2, 1] at t = 1", (z, 1.0)),
        ("the same scores at t = 16 (= sqrt(256))", (z, 16.0)),
        ("a small temperature, t = 0.01 (exp overflows unless you subtract the maximum first)", (z, 0.01)),
        ("a batch of shape (2, 3, 4) at t = 2, over the last axis", (batch, 2.0)),
        ("t = 0, the limit: all the weight on the maximum", (z, 0.0)),
        ("t = 0 with a tie for the maximum: the weight is split equally", (ties, 0.0)),
    ]
    return [Case(label, args, ref.softmax(args[0], temperature=args[1])) for label, args in cases]


def check_temperature_softmax(fn: Callable) -> Verdict:
    """Check a learner's ``softmax_t(x, t)`` = softmax(x / t) over the last axis, with
    t = 0 meaning the limit t -> 0+ (all weight on the maximum, ties split equally)."""
    return run_cases(fn, temperature_softmax_cases(), "check_temperature_softmax")


__all__ += ["check_soft_lookup", "check_temperature_softmax"]
# --- Part II: self-attention, masking, cross-attention ---

__all__ += ["check_self_attention_batched", "check_causal_mask", "check_padding_mask",
            "check_cross_attention"]


def _reference_self_attention(x, w_q, w_k, w_v):
    return ref.scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)[0]


def self_attention_cases() -> list[Case]:
    rng = np.random.default_rng(4)
    d, hs, dv = 6, 4, 5
    w_q, w_k, w_v = rng.normal(size=(d, hs)), rng.normal(size=(d, hs)), rng.normal(size=(d, dv))
    w_v4 = rng.normal(size=(d, hs))
    x3 = rng.normal(size=(3, 5, d))
    x1 = rng.normal(size=(1, 4, d))
    x2d = rng.normal(size=(5, d))
    xone = rng.normal(size=(2, 1, d))
    out = []
    for label, args in [
        ("a batch: x (3, 5, 6), weights (6, 4), dv = dk = 4", (x3, w_q, w_k, w_v4)),
        ("a batch of one: x (1, 4, 6)", (x1, w_q, w_k, w_v4)),
        ("no batch axis: x (5, 6) must give (5, 4)", (x2d, w_q, w_k, w_v4)),
        ("value width differs: W_v (6, 5), so the output is (3, 5, 5)", (x3, w_q, w_k, w_v)),
        ("sequences of one token: x (2, 1, 6)", (xone, w_q, w_k, w_v4)),
    ]:
        out.append(Case(label, args, _reference_self_attention(*args)))
    return out


def check_self_attention_batched(fn: Callable) -> Verdict:
    """Check a learner's ``self_attention(x, W_q, W_k, W_v)`` for x of shape (B, N, D) or (N, D)
    (returns the output, or an ``(output, weights)`` tuple)."""
    return run_cases(fn, self_attention_cases(), "check_self_attention_batched", pick=_first_if_tuple)


def _require_bool(fn: Callable) -> Callable:
    """Wrap a mask builder so that a non-boolean mask is reported with the book's convention."""
    def wrapped(*args, **kwargs):
        m = fn(*args, **kwargs)
        dtype = getattr(m, "dtype", None)
        if dtype != bool:
            raise TypeError(
                f"the mask must be a boolean array (True = may attend), got "
                f"{type(m).__name__} with dtype {dtype}; add .astype(bool) or build it with dtype=bool"
            )
        return m
    return wrapped


def causal_mask_cases() -> list[Case]:
    return [Case(f"n = {n}" + (" (an empty sequence: shape (0, 0))" if n == 0 else ""), (n,), ref.causal_mask(n))
            for n in (3, 1, 6, 0)]


def check_causal_mask(fn: Callable) -> Verdict:
    """Check a learner's ``causal_mask(n)``: a boolean (n, n) array, True where query i may see key j."""
    return run_cases(_require_bool(fn), causal_mask_cases(), "check_causal_mask")


def padding_mask_cases() -> list[Case]:
    return [
        Case("lengths [3, 5] padded to n = 5 (shape (2, 1, 5): hides key columns)", (np.array([3, 5]), 5),
             ref.padding_mask([3, 5], 5)),
        Case("lengths [2, 4, 1] padded to n = 4", (np.array([2, 4, 1]), 4), ref.padding_mask([2, 4, 1], 4)),
        Case("one sequence with no padding: lengths [4], n = 4", (np.array([4]), 4), ref.padding_mask([4], 4)),
        Case("lengths [5, 0]: an empty sequence has every key hidden", (np.array([5, 0]), 5),
             ref.padding_mask([5, 0], 5)),
    ]


def check_padding_mask(fn: Callable) -> Verdict:
    """Check a learner's ``padding_mask(lengths, n)``: boolean, shape (B, 1, n), True = a real key."""
    return run_cases(_require_bool(fn), padding_mask_cases(), "check_padding_mask")


def cross_attention_cases() -> list[Case]:
    rng = np.random.default_rng(5)
    d, hs, dv = 6, 4, 3
    w_q, w_k, w_v = rng.normal(size=(d, hs)), rng.normal(size=(d, hs)), rng.normal(size=(d, dv))
    xq, xv = rng.normal(size=(2, 3, d)), rng.normal(size=(2, 5, d))
    out = []
    for label, args in [
        ("a batch: xq (2, 3, 6) against xv (2, 5, 6); the output is (2, 3, 3)", (xq, xv, w_q, w_k, w_v)),
        ("more queries than keys: xq (2, 5, 6), xv (2, 3, 6)", (xv, xq, w_q, w_k, w_v)),
        ("no batch axis: xq (3, 6), xv (5, 6)", (xq[0], xv[0], w_q, w_k, w_v)),
        ("a single query: xq (2, 1, 6)", (xq[:, :1], xv, w_q, w_k, w_v)),
    ]:
        x_q, x_v = args[0], args[1]
        expected = ref.scaled_dot_product_attention(x_q @ w_q, x_v @ w_k, x_v @ w_v)[0]
        out.append(Case(label, args, expected))
    return out


def check_cross_attention(fn: Callable) -> Verdict:
    """Check a learner's ``cross_attention(xq, xv, W_q, W_k, W_v)``: queries from xq, keys and
    values from xv (returns the output, or an ``(output, weights)`` tuple)."""
    return run_cases(fn, cross_attention_cases(), "check_cross_attention", pick=_first_if_tuple)
# --- multi-head attention (Part III) ---

def _mha_list_expected(x, W_qs, W_ks, W_vs, W_o, mask=None):
    """Multi-head attention from lists of per-head matrices (any NH * HS), via the answer key."""
    outs = [ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv, mask)[0] for wq, wk, wv in zip(W_qs, W_ks, W_vs)]
    return np.concatenate(outs, axis=-1) @ W_o


def multihead_list_cases() -> list[Case]:
    rng = np.random.default_rng(8)

    def heads(nh, d, hs):
        return [[rng.normal(size=(d, hs)) for _ in range(nh)] for _ in range(3)]

    out = []
    for label, b, n, d, nh, hs, causal in [
        ("one head (NH = 1, HS = D = 4), one sequence", 1, 3, 4, 1, 4, False),
        ("two heads of HS = 4, D = 8", 1, 5, 8, 2, 4, False),
        ("three heads of HS = 2, D = 8 (NH * HS = 6 is not D)", 1, 4, 8, 3, 2, False),
        ("a batch of 3 sequences, four heads of HS = 2", 3, 4, 8, 4, 2, False),
        ("two heads with a causal mask (N, N), the same for every head", 2, 5, 8, 2, 4, True),
    ]:
        x = rng.normal(size=(b, n, d))
        W_qs, W_ks, W_vs = heads(nh, d, hs)
        W_o = rng.normal(size=(nh * hs, d))
        kwargs = {"mask": ref.causal_mask(n)} if causal else {}
        out.append(Case(label, (x, W_qs, W_ks, W_vs, W_o), _mha_list_expected(x, W_qs, W_ks, W_vs, W_o, **kwargs),
                        kwargs))
    return out


def check_multihead_list(fn: Callable) -> Verdict:
    """Check ``fn(x, W_qs, W_ks, W_vs, W_o, mask=None)``: multi-head attention from lists of
    per-head (D, HS) matrices and the output projection W_o (NH * HS, D); x is (B, N, D).
    It may return the output or an ``(output, weights)`` tuple."""
    return run_cases(fn, multihead_list_cases(), "check_multihead_list", pick=_first_if_tuple)


def split_heads_cases() -> list[Case]:
    rng = np.random.default_rng(9)
    pictured = np.arange(24, dtype=float).reshape(1, 4, 6)  # the diagrams' example: entry = 6 * token + column
    out = []
    for label, x, nh in [
        ("the pictured example: (B, N, D) = (1, 4, 6), 3 heads, x[0, t, c] = 6t + c", pictured, 3),
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


def _reshape_hint(fn, cases, wrong_forms, name):
    """After a failure: say so if the learner's result is a known wrong form (reshape without transpose)."""
    for case in cases:
        try:
            with np.errstate(all="ignore"):
                got = np.asarray(fn(*(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in case.args)),
                                 dtype=float)
        except Exception:
            return
        if _compare(case.expected, got, 1e-6, 1e-9) is None:
            continue  # this case passed; the hint is about the first case that failed
        for hint, wrong in wrong_forms(*case.args):
            if got.shape == wrong.shape and np.array_equal(got, wrong):
                print(f"    hint: {hint}")
        return


def check_split_heads(fn: Callable) -> Verdict:
    """Check ``fn(x, n_heads)``: (B, N, D) -> (B, NH, N, HS), head h holding columns h*HS:(h+1)*HS."""
    cases = split_heads_cases()
    verdict = run_cases(fn, cases, "check_split_heads")

    def wrong_forms(x, nh):
        b, n, d = x.shape
        return [
            ("your result is x reshaped straight to (B, NH, N, HS), without the transpose. That reads "
             "the numbers in memory order, so a 'head' gets whole rows of one token and part of the next: "
             "tokens are mixed across heads. Reshape to (B, N, NH, HS) first, then swap axes 1 and 2.",
             x.reshape(b, nh, n, d // nh)),
            ("your result is (B, N, NH, HS): the reshape is right, but axes 1 (N) and 2 (NH) still need to "
             "be swapped, e.g. with .transpose(0, 2, 1, 3).", x.reshape(b, n, nh, d // nh)),
        ]

    if not verdict:
        _reshape_hint(fn, cases, wrong_forms, "check_split_heads")
    return verdict


def check_merge_heads(fn: Callable) -> Verdict:
    """Check ``fn(h)``: (B, NH, N, HS) -> (B, N, NH * HS), the inverse of split_heads."""
    cases = merge_heads_cases()
    verdict = run_cases(fn, cases, "check_merge_heads")

    def wrong_forms(h):
        b, nh, n, hs = h.shape
        return [("your result is the heads reshaped straight to (B, N, NH * HS), without the transpose. A "
                 "token's row then holds several tokens' outputs from one head. Swap axes 1 (NH) and 2 (N) "
                 "first, giving (B, N, NH, HS), then reshape.", h.reshape(b, n, nh * hs))]

    if not verdict:
        _reshape_hint(fn, cases, wrong_forms, "check_merge_heads")
    return verdict


__all__ += ["check_multihead_list", "check_split_heads", "check_merge_heads"]
# --- PyTorch chapter ---
# These checkers import torch only when called, so this module still imports without it.

def _torch_call(fn):
    """Wrap a learner's torch function so run_cases can feed it NumPy arrays and compare NumPy results."""
    import torch

    def to_torch(a):
        if isinstance(a, np.ndarray):
            return torch.from_numpy(a.copy())  # float64 stays float64; bool stays bool
        return a

    def to_numpy(r):
        if isinstance(r, tuple):
            return tuple(to_numpy(x) for x in r)
        if isinstance(r, torch.Tensor):
            return r.detach().cpu().numpy()
        return r

    def call(*args, **kwargs):
        result = fn(*(to_torch(a) for a in args), **kwargs)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise TypeError(f"return a tuple (output, weights); got {type(result).__name__}")
        return to_numpy(result)

    return call


def torch_attention_cases() -> list[Case]:
    rng = np.random.default_rng(10)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 6))
    pad = ref.padding_mask(np.array([5, 3]), 5)  # (2, 1, 5): the second sequence has 2 padded keys
    causal = ref.causal_mask(4)
    x = rng.normal(size=(1, 2, 4, 3))  # (B, NH, N, HS)
    one_empty = np.ones((3, 5), dtype=bool)
    one_empty[1] = False  # query 1 may attend to nothing
    zero_len = ref.padding_mask(np.array([0, 2]), 5)  # a sequence that is all padding
    cases = [
        ("no mask: 3 queries, 5 keys, dk = 4, dv = 6", (q, k, v, None), {}),
        ("a padding mask (True = may attend) hiding the last 2 keys of sequence 2", (q, k, v, pad), {}),
        ("a causal mask on 2 heads of 4 tokens", (x, x, x, causal), {}),
        ("query 1 has every key masked: its weights and output must be 0, not nan", (q, k, v, one_empty), {}),
        ("a sequence that is all padding: every one of its rows is fully masked", (q, k, v, zero_len), {}),
    ]
    out = []
    for label, args, kwargs in cases:
        expected = ref.scaled_dot_product_attention(*args, fully_masked="zeros")
        out.append(Case(label, args, expected, kwargs))
    return out


def check_torch_attention(fn: Callable) -> Verdict:
    """Check a learner's PyTorch ``attention(q, k, v, mask)`` returning ``(output, weights)``:
    mask True = may attend; a fully masked query gets zero weights and a zero output."""
    wrapped = _torch_call(fn)
    cases = torch_attention_cases()
    for part, index in (("output", 0), ("weights", 1)):
        part_cases = [Case(f"{c.label} [{part}]", c.args, c.expected[index], c.kwargs) for c in cases]
        verdict = run_cases(wrapped, part_cases, f"check_torch_attention ({part})",
                            pick=lambda r, i=index: r[i], rtol=1e-5, atol=1e-6)
        if not verdict:
            return Verdict(False, "check_torch_attention")
    return Verdict(True, "check_torch_attention")


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
