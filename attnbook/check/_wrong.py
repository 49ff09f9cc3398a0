"""Wrong answers of Parts I-III, computed: the softmax and attention variants
with one mistake each, and the hints that name them (shared by the checkers of
:mod:`attnbook.check.softmax`, :mod:`attnbook.check.self_attention` and
:mod:`attnbook.check.multihead`)."""

from __future__ import annotations

import numpy as np

from .. import reference as ref
from ..checking import Mistake


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
HINT_BATCH_SIZE = ("the scores are scaled by the square root of the batch size "
                   "(shape[0] of a batch); dk is the last axis, shape[-1]")
HINT_TRANSPOSE_021 = ("k.transpose(0, 2, 1) needs exactly 3 axes, so it fails on an "
                      "unbatched (N, dk) input; k.swapaxes(-2, -1) works for both")
HINT_NP_DOT = ("np.dot does not treat the first axis as a batch: on 3-D arrays it "
               "pairs every sequence with every other, (B, N, dk) with (B, dk, N) "
               "giving (B, N, B, N). Use @ (np.matmul), which keeps the batch axis")
HINT_POLARITY = ("inverted polarity: True must mean 'may attend' (the book's "
                 "convention); you marked the hidden positions True")


def _batch_size(a):
    """shape[0] of a batch; an unbatched (N, d) array has no batch size."""
    if np.ndim(a) < 3:
        raise ValueError("no batch axis")
    return a.shape[0]


def _batch_axis_mistakes(project):
    """The batch-axis mistakes of an attention whose ``project(*args)`` gives
    (q, k, v), that are not ``.T`` (``batch_rule`` names that one):
    ``transpose(0, 2, 1)``, which fails without a batch axis, and np.dot."""
    def with_scores(scores):
        def f(*args):
            q, k, v = project(*args)
            return _sm(scores(q, k) / np.sqrt(k.shape[-1])) @ v
        return f

    return [
        Mistake(HINT_TRANSPOSE_021, with_scores(lambda q, k: q @ k.transpose(0, 2, 1))),
        Mistake(HINT_NP_DOT, with_scores(lambda q, k: np.dot(q, np.swapaxes(k, -2, -1)))),
    ]


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
        out.append(Mistake(HINT_BATCH_SIZE,
                           fn_of_scale(lambda q, k, v: np.sqrt(_batch_size(k)))))
    if dv:
        out.append(Mistake(HINT_DV, fn_of_scale(lambda q, k, v: np.sqrt(v.shape[-1]))))
    if width_d is not None:
        out.append(Mistake(HINT_WIDTH_D, fn_of_scale(lambda q, k, v: np.sqrt(width_d))))
    return out


# --- softmax ---------------------------------------------------------------
