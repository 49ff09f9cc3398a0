"""Exercise checkers of Part V, "Attention that learns" (chapters 11-12).

Chapters import them from :mod:`attnbook.check`. Each checker runs the
learner's function on several cases, compares it with the answer key, and
prints a pass or the first case that failed. When the wrong result is one of
the mistakes learners often make (the rowsum term left out, the scale
forgotten, a transpose missing ...), it says which.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import BadResult, Case, Mistake, Verdict, _same, parts_of, run_cases
from ._rules import batch_rule, order_rule

__all__ = ["check_attention_backward", "check_cross_entropy",
           "check_self_attention_backward"]


# --- the gradient of attention (chapter 11) ---

_GRADS = ("dq", "dk", "dv")

def attention_backward_cases() -> list[Case]:
    rng = np.random.default_rng(16)

    def args(*shapes):
        return tuple(rng.normal(size=s) for s in shapes)

    cases = [
        ("3 queries, 3 keys, dk = dv = 2 (a square score matrix)",
         args((3, 2), (3, 2), (3, 2), (3, 2))),
        ("2 queries, 4 keys, dk = 5, dv = 3 (Nq != Nk, dk != dv)",
         args((2, 5), (4, 5), (4, 3), (2, 3))),
        ("a batch of 3: q (3, 2, 6), k (3, 4, 6), v (3, 4, 5)",
         args((3, 2, 6), (3, 4, 6), (3, 4, 5), (3, 2, 5))),
        ("one key: its weight is 1 whatever the scores, so dq = dk = 0",
         args((4, 3), (1, 3), (1, 2), (4, 2))),
        ("large scores (q and k times 4): sharp weights, dk = 16",
         tuple(a * f for a, f in zip(args((3, 16), (5, 16), (5, 2), (3, 2)),
                                     (4, 4, 1, 1)))),
    ]
    # Sizes chosen so that no two mistakes give the same numbers: no B, Nq
    # or Nk equals dk or sqrt(dk), and in the batch q.shape[1] (Nq) differs
    # from q.shape[-1] (dk). tests/check/test_check_learn.py checks both.
    return [Case(label, a, dict(zip(_GRADS, ref.attention_backward(*a))))
            for label, a in cases]


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
        ("the scale is taken from q.shape[0]: for one sequence (Nq, dk) "
         "that is Nq, for a batch B. Use q.shape[-1], the last axis: dk.",
         lambda: _backward_with_scales(q, k, v, d_out,
                                       1 / np.sqrt(q.shape[0]),
                                       1 / np.sqrt(q.shape[0]))),
        ("the scale is taken from q.shape[1]: for a batch (B, Nq, dk) that "
         "is Nq. Use q.shape[-1], the last axis, which is dk with or "
         "without a batch.",
         lambda: _backward_with_scales(q, k, v, d_out,
                                       1 / np.sqrt(q.shape[1]),
                                       1 / np.sqrt(q.shape[1]))),
        ("the gradients are divided by the batch size: nothing in one "
         "attention call averages over the batch (if the loss is a mean, "
         "d_out already carries that factor), so dq, dk and dv are sums of "
         "contributions, not means.",
         lambda: _per_batch(right, q)),
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


def _per_batch(grads, q):
    """The gradients divided by the batch size; not defined without a batch."""
    if q.ndim < 3:
        raise ValueError("no batch axis")
    return tuple(g / q.shape[0] for g in grads)


def _backward_with_scales(q, k, v, d_out, forward_scale, backward_scale):
    """The backward pass with a scale in the forward pass (inside the
    softmax) and another in dq and dk: the right one has both 1/sqrt(dk)."""
    a = ref.softmax(q @ np.swapaxes(k, -2, -1) * forward_scale)
    d_a = d_out @ np.swapaxes(v, -2, -1)
    ds = a * (d_a - (d_a * a).sum(axis=-1, keepdims=True))
    return (ds @ k * backward_scale,
            np.swapaxes(ds, -2, -1) @ q * backward_scale,
            np.swapaxes(a, -2, -1) @ d_out)


def _call_backward(fn, case):
    """The learner's (dq, dk, dv) by name, checked dv first (it needs no softmax
    step), then dq and dk."""
    result = fn(*(np.array(a, copy=True) for a in case.args))
    return parts_of(result, _GRADS, order=("dv", "dq", "dk"))


_order_rule = order_rule(_GRADS, "the three gradients are right but in another order: "
                         "return (dq, dk, dv), in the order of the arguments q, k, v.")


_BATCH_HINT = ("right for one sequence, wrong for a batch: .T (or np.transpose "
               "without axes) reverses every axis of a (B, N, d) array. Use "
               "swapaxes(-2, -1) to swap only the last two, and sum with axis=-1.")


def check_attention_backward(fn: Callable) -> Verdict:
    """Check a learner's ``attention_backward(q, k, v, d_out)`` returning
    ``(dq, dk, dv)``: the gradients of softmax(q k^T / sqrt(dk)) v, for one
    sequence (Nq, d) or a batch (B, Nq, d)."""
    cases = [Case(c.label, c.args, {n: c.expected[n] for n in ("dv", "dq", "dk")})
             for c in attention_backward_cases()]
    return run_cases(
        fn, cases, "check_attention_backward", call=_call_backward,
        mistakes=lambda case: [Mistake.result(hint, wrong)
                               for hint, wrong in _wrong_backward_forms(*case.args)],
        rules=[_order_rule, batch_rule(_BATCH_HINT)],
        passed=f"check_attention_backward: dq, dk and dv right in all {len(cases)} cases.")


# --- cross-entropy (chapter 12) ---

FAR_BELOW = 798.0  # exp(-798) is 0 in float64, so -log(p) would be inf


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
        (f"a target's logit {FAR_BELOW:g} below its row's maximum: its p "
         "underflows to 0", (np.array([[2.0, 2.0 + FAR_BELOW, -1.0],
                                       [0.3, -0.2, 1.1]]),
                             np.array([0, 2]))),
    ]
    return [Case(label, a, dict(zip(("loss", "d_logits"), ref.cross_entropy(*a))))
            for label, a in cases]


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


def _call_cross_entropy(fn, case):
    result = fn(*(np.array(a, copy=True) for a in case.args))
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise BadResult(f"return a tuple (loss, d_logits); got {type(result).__name__}")
    return dict(zip(("loss", "d_logits"), result))


_LOG_OF_P = (
    "the loss is wrong only where a target's logit is far below its row's "
    f"maximum ({FAR_BELOW:g} below): the softmax's p underflows to 0 there, and "
    "-log(0) is inf (adding a small eps to p hides the inf but gives a wrong "
    "number). Take the log before the exponential: log p = z - max - "
    "log(sum(exp(z - max))), then pick the target's entry.")


def _log_of_p_rule(fn, call, cases, index, rtol, atol, want_bool):
    """The loss right everywhere except where p underflows: -log(softmax)."""
    if "underflows" not in cases[index].label:
        return None
    for i, case in enumerate(cases):
        try:
            loss = call(fn, case)["loss"]
        except Exception:
            return None
        right = _same(loss, case.expected["loss"], rtol, atol)
        if right == (i == index):
            return None
    return _LOG_OF_P


def check_cross_entropy(fn: Callable) -> Verdict:
    """Check a learner's ``cross_entropy(logits, targets)`` returning
    ``(loss, d_logits)``: the mean cross-entropy over every position and its
    gradient with respect to the logits."""
    cases = cross_entropy_cases()
    return run_cases(
        fn, cases, "check_cross_entropy", call=_call_cross_entropy,
        mistakes=lambda case: [Mistake.result(hint, wrong)
                               for hint, wrong in _wrong_cross_entropy_forms(*case.args)],
        rules=[_log_of_p_rule],
        passed=("check_cross_entropy: the loss and its gradient right in all "
                f"{len(cases)} cases."))


# --- self-attention's backward pass (chapter 11, third exercise) ---

_SELF_GRADS = ("dx", "dw_q", "dw_k", "dw_v")


def self_attention_backward_cases() -> list[Case]:
    rng = np.random.default_rng(18)

    def args(x_shape, d_k, d_v):
        d_model = x_shape[-1]
        x = rng.normal(size=x_shape)
        w = [rng.normal(size=(d_model, n)) / np.sqrt(d_model)
             for n in (d_k, d_k, d_v)]
        return (x, *w, rng.normal(size=x_shape[:-1] + (d_v,)))

    cases = [
        ("x (3, 5), w_q and w_k (5, 2), w_v (5, 3)", args((3, 5), 2, 3)),
        ("two tokens: x (2, 6), dk = 4, dv = 1", args((2, 6), 4, 1)),
        ("a batch of 4 sequences: x (4, 3, 5), the weights shared",
         args((4, 3, 5), 2, 3)),
    ]
    # No size equals another (N, D, dk, dv, B), so that W for W^T, dW^T for
    # dW and x.T on a batch fail with a shape, not pass by accident.
    return [Case(label, a, dict(zip(_SELF_GRADS,
                                    ref.self_attention_backward(*a))))
            for label, a in cases]


def _self_backward_variant(kind):
    """A learner's self-attention backward pass with one mistake (the tests
    and the hints use the same functions)."""
    def fn(x, w_q, w_k, w_v, d_out):
        dq, dk, dv = ref.attention_backward(x @ w_q, x @ w_k, x @ w_v, d_out)
        if kind == "no scale":
            dq, dk = dq * np.sqrt(w_q.shape[1]), dk * np.sqrt(w_q.shape[1])
        w_back = {"q": w_q.T, "k": w_k.T, "v": w_v.T}
        if kind == "w not transposed":
            w_back = {"q": w_q, "k": w_k, "v": w_v}
        paths = {"q": dq @ w_back["q"], "k": dk @ w_back["k"],
                 "v": dv @ w_back["v"]}
        keep = {"no V path": "qk", "no K path": "qv", "no Q path": "kv",
                "Q path only": "q"}.get(kind, "qkv")
        dx = sum(paths[p] for p in keep)
        grads = (dq, dk, dv)
        if kind == "not summed over the batch":
            dws = tuple(np.swapaxes(x, -2, -1) @ g for g in grads)
        elif kind == ".T on a batch":
            dws = tuple(x.T @ g for g in grads)
        elif kind == "dW transposed":
            flat = x.reshape(-1, x.shape[-1])
            dws = tuple(g.reshape(-1, g.shape[-1]).T @ flat for g in grads)
        else:
            flat = x.reshape(-1, x.shape[-1])
            dws = tuple(flat.T @ g.reshape(-1, g.shape[-1]) for g in grads)
        return (dx, *dws)
    return fn


_PATHS = "x is used three times, so dx = dQ w_q^T + dK w_k^T + dV w_v^T"

SELF_BACKWARD_MISTAKES = [
    Mistake(f"dx misses the path through V: {_PATHS}.",
            _self_backward_variant("no V path")),
    Mistake(f"dx misses the path through K: {_PATHS}.",
            _self_backward_variant("no K path")),
    Mistake(f"dx misses the path through Q: {_PATHS}.",
            _self_backward_variant("no Q path")),
    Mistake(f"dx has only the path through Q: {_PATHS}.",
            _self_backward_variant("Q path only")),
    Mistake("dq and dk are missing the 1/sqrt(dk) of the scores: it comes "
            "back in the backward pass (chapter 11, section 5).",
            _self_backward_variant("no scale")),
    Mistake("the gradient goes back through w, not its transpose: Q = x w_q "
            "gives dx = dQ w_q^T, (N, dk) @ (dk, D).",
            _self_backward_variant("w not transposed")),
    Mistake("dW is not summed over the batch: one w_q serves every sequence, "
            "so its gradient adds up over all of them; stack the batch's "
            "tokens (reshape to (B * N, D)) and take x^T dQ once.",
            _self_backward_variant("not summed over the batch")),
    Mistake(".T reverses every axis of a batch (B, N, D): use swapaxes(-2, "
            "-1), or reshape x and dQ to (B * N, width) first.",
            _self_backward_variant(".T on a batch")),
    Mistake("dW is transposed: Q = x w_q gives dw_q = x^T dQ, of w_q's shape "
            "(D, dk), not dQ^T x.", _self_backward_variant("dW transposed")),
]


def _call_self_backward(fn, case):
    result = fn(*(np.array(a, copy=True) for a in case.args))
    if not (isinstance(result, (tuple, list)) and len(result) == 4):
        raise BadResult("return a tuple (dx, dw_q, dw_k, dw_v) of four arrays; "
                        f"got {type(result).__name__}"
                        + (f" of length {len(result)}"
                           if isinstance(result, (tuple, list)) else ""))
    return dict(zip(_SELF_GRADS, result))


def check_self_attention_backward(fn: Callable) -> Verdict:
    """Check a learner's ``self_attention_backward(x, w_q, w_k, w_v, d_out)``
    returning ``(dx, dw_q, dw_k, dw_v)``: one head of self-attention with
    Q = x w_q, K = x w_k, V = x w_v, for one sequence (N, D) or a batch."""
    cases = self_attention_backward_cases()
    return run_cases(
        fn, cases, "check_self_attention_backward", call=_call_self_backward,
        mistakes=SELF_BACKWARD_MISTAKES,
        rules=[order_rule(_SELF_GRADS, "the four gradients are right but in another "
                                       "order: return (dx, dw_q, dw_k, dw_v)")],
        passed=("check_self_attention_backward: dx, dw_q, dw_k and dw_v right "
                f"in all {len(cases)} cases."))
