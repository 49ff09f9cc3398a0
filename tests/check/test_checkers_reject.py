"""Every checker rejects the wrong answers a learner plausibly writes, names the mistake
where it is recognisable, accepts the right answer in both return forms, and never
crashes on a strange answer. Every printed line fits in 79 columns.

The wrong answers below are written the way a learner would write them, independently
of the checkers' own list of known mistakes (``attnbook.check.Mistake``)."""

import numpy as np
import pytest

from attnbook import check
from attnbook.check import multihead as check_multihead_part
from attnbook.check import self_attention as check_self_attention_part
from attnbook.check import softmax as check_softmax_part
from attnbook import reference as ref

from attnbook.check import _wrong as H  # the hint texts of Parts I-III
from attnbook.check import multihead as HM  # the hints of splitting and merging heads

# the hint of attnbook.check._rules.batch_rule: right without a batch axis, wrong with one
HINT_DOT_T = ".T (or np.transpose without axes) reverses every axis"


def flat(text):
    return " ".join(text.split())


def run(checker, fn, capsys):
    verdict = checker(fn)
    out = capsys.readouterr().out
    for line in out.splitlines():
        assert len(line) <= 79, f"line of {len(line)} characters: {line!r}"
    return verdict, out


def assert_rejected(checker, fn, hint, capsys, *, only=False):
    """``only``: the report prints exactly one hint, this one (the checkers of
    chapters 05-09 choose case sizes where no two mistakes give the same numbers)."""
    verdict, out = run(checker, fn, capsys)
    assert not verdict, out
    assert "FAILED" in out, out
    if hint is None:
        assert "hint:" not in out, out
    else:
        assert "hint:" in out and flat(hint) in flat(out), out
        if only:
            assert out.count("hint:") == 1, out
    return out


# --- helpers a learner would write ---------------------------------------------

def sm(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sm_naive(s, axis=-1):
    e = np.exp(s)
    return e / e.sum(axis=axis, keepdims=True)


def sm_global(s, axis=-1):
    e = np.exp(s - s.max())
    return e / e.sum(axis=axis, keepdims=True)


def sm_no_keepdims(s):
    e = np.exp(s - s.max(axis=-1))
    return e / e.sum(axis=-1, keepdims=True)


# --- Part I's checkers (check_softmax, check_scores, check_attention, check_soft_lookup,
# check_temperature_softmax): their wrong answers are in tests/check/test_checkers_reject_softmax.py.
# The two right answers below are used by the tests of every checker at the end of this file.

def attention(Q, K, V, scale=None, softmax=sm, transpose=False):
    S = (K @ Q.T) if transpose else Q @ K.T
    S = S / (np.sqrt(K.shape[-1]) if scale is None else scale(Q, K, V))
    W = softmax(S)
    return W @ V, W


def softmax_t(x, t):
    x = np.asarray(x, dtype=float)
    if t == 0:
        hot = (x == x.max(axis=-1, keepdims=True)).astype(float)
        return hot / hot.sum(axis=-1, keepdims=True)
    return sm(x / t)


# --- check_self_attention_batched ---------------------------------------------------------

def self_attention(x, W_q, W_k, W_v, *, scale=None, softmax=sm, swap=False):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = (k @ q.swapaxes(-2, -1)) if swap else q @ k.swapaxes(-2, -1)
    s = s / (np.sqrt(k.shape[-1]) if scale is None else scale(x, q, k, v))
    w = softmax(s)
    return w @ v, w


def mixed_batch(x, W_q, W_k, W_v):
    flat_x = x.reshape(-1, x.shape[-1])
    out, _ = self_attention(flat_x, W_q, W_k, W_v)
    return out.reshape(*x.shape[:-1], -1)


SELF_WRONG = {
    "no scale": (lambda *a: self_attention(*a, scale=lambda x, q, k, v: 1.0)[0], H.HINT_NO_SCALE),
    "divided by dk": (lambda *a: self_attention(*a, scale=lambda x, q, k, v: k.shape[-1])[0],
                      H.HINT_DK),
    "sqrt(k.shape[1]) = sqrt(N) for a batch": (
        lambda *a: self_attention(*a, scale=lambda x, q, k, v: np.sqrt(k.shape[1]))[0],
        H.HINT_TOKENS),
    "sqrt(D), the width of x": (
        lambda *a: self_attention(*a, scale=lambda x, q, k, v: np.sqrt(x.shape[-1]))[0],
        H.HINT_WIDTH_D),
    "sqrt(dv)": (lambda *a: self_attention(*a, scale=lambda x, q, k, v: np.sqrt(v.shape[-1]))[0],
                 H.HINT_DV),
    "softmax over axis -2": (lambda *a: self_attention(*a, softmax=lambda s: sm(s, -2))[0],
                             H.HINT_AXIS),
    "naive softmax": (lambda *a: self_attention(*a, softmax=sm_naive)[0], H.HINT_NAIVE),
    "global maximum": (lambda *a: self_attention(*a, softmax=sm_global)[0], H.HINT_GLOBAL),
    "W_q and W_k swapped": (lambda x, wq, wk, wv: self_attention(x, wk, wq, wv)[0],
                            H.HINT_TRANSPOSED),
    "the batch flattened into one sequence": (mixed_batch, H.HINT_MIX_BATCH),
    # raises on the batch; the hint is about the later case that runs (no scale either)
    "k.T on a batch, no scale": (lambda x, wq, wk, wv: sm((x @ wq) @ (x @ wk).T) @ (x @ wv),
                                 "which runs: " + H.HINT_NO_SCALE),
    "k.T on a batch": (lambda x, wq, wk, wv: sm((x @ wq) @ (x @ wk).T / 2.0) @ (x @ wv),
                       HINT_DOT_T),
    "np.transpose(k) on a batch, scaled first": (
        lambda x, wq, wk, wv: sm((x @ wq) / np.sqrt(wk.shape[1]) @ np.transpose(x @ wk))
        @ (x @ wv), HINT_DOT_T),
    "np.dot(q, k.T)": (lambda x, wq, wk, wv: sm(np.dot(x @ wq, (x @ wk).T) / 2) @ (x @ wv),
                       HINT_DOT_T),
    "np.dot with swapaxes": (lambda x, wq, wk, wv: sm(np.dot(
        x @ wq, (x @ wk).swapaxes(-2, -1)) / np.sqrt(wk.shape[1])) @ (x @ wv), H.HINT_NP_DOT),
    "k.transpose(0, 2, 1): no unbatched input": (lambda x, wq, wk, wv: sm(
        (x @ wq) @ (x @ wk).transpose(0, 2, 1) / np.sqrt(wk.shape[1])) @ (x @ wv),
        H.HINT_TRANSPOSE_021),
    "sqrt(k.shape[0]) = sqrt(B) for a batch": (
        lambda *a: self_attention(*a, scale=lambda x, q, k, v: np.sqrt(k.shape[0]))[0],
        H.HINT_BATCH_SIZE),
    "times sqrt(dk)": (lambda *a: self_attention(
        *a, scale=lambda x, q, k, v: 1 / np.sqrt(k.shape[-1]))[0], H.HINT_TIMES),
    "returns the weights": (lambda *a: self_attention(*a)[1], H.HINT_WEIGHTS),
    "the scores, never softmaxed": (lambda *a: self_attention(
        *a, softmax=lambda s: s)[0], None),
    "max without keepdims": (lambda *a: self_attention(*a, softmax=sm_no_keepdims)[0],
                             H.HINT_KEEPDIMS),
    "returns (weights, output)": (lambda *a: self_attention(*a)[::-1], H.HINT_WEIGHTS),
    "values not projected": (lambda x, wq, wk, wv: sm(
        (x @ wq) @ (x @ wk).swapaxes(-2, -1) / np.sqrt(wk.shape[1])) @ x, "the values are x"),
    "keys projected with W_q": (lambda x, wq, wk, wv: self_attention(x, wq, wq, wv)[0],
                                "projected with W_q"),
}


@pytest.mark.parametrize("name", SELF_WRONG)
def test_self_attention_batched_rejects(name, capsys):
    fn, hint = SELF_WRONG[name]
    assert_rejected(check.check_self_attention_batched, fn, hint, capsys, only=True)


# --- check_causal_mask --------------------------------------------------------------------------

CAUSAL_WRONG = {
    "inverted: triu(k=1)": (lambda n: np.triu(np.ones((n, n), dtype=bool), k=1), H.HINT_POLARITY),
    "inverted: ~tril": (lambda n: ~np.tril(np.ones((n, n), dtype=bool)), H.HINT_POLARITY),
    "tril(k=-1)": (lambda n: np.tril(np.ones((n, n), dtype=bool), k=-1), "k=-1 hides the diagonal"),
    "tril(k=1)": (lambda n: np.tril(np.ones((n, n), dtype=bool), k=1), "one step into the"),
    "triu (transposed)": (lambda n: np.triu(np.ones((n, n), dtype=bool)), "the upper triangle"),
    "all True": (lambda n: np.ones((n, n), dtype=bool), "nothing is hidden"),
    "0/1 floats": (lambda n: np.tril(np.ones((n, n))), None),
    "additive 0/-inf": (lambda n: np.where(np.tril(np.ones((n, n))) == 1, 0.0, -np.inf), None),
    "extra axis (1, n, n)": (lambda n: np.tril(np.ones((1, n, n), dtype=bool)), None),
    "np.tri(n): floats": (lambda n: np.tri(n), None),
    "np.ones(n, n)": (lambda n: np.tril(np.ones(n, n)), "the shape as one tuple"),
    "a list of lists of bools, from a loop": (
        lambda n: [[j <= i for j in range(n)] for i in range(n)], None),
    "a list of lists of 0/1": (lambda n: [[int(j <= i) for j in range(n)] for i in range(n)],
                               None),
}


@pytest.mark.parametrize("name", CAUSAL_WRONG)
def test_causal_mask_rejects(name, capsys):
    fn, hint = CAUSAL_WRONG[name]
    out = assert_rejected(check.check_causal_mask, fn, hint, capsys, only=True)
    if name == "additive 0/-inf":
        assert "additive 0/-inf mask" in flat(out) and "mask == 0" in out
    if name in ("0/1 floats", "np.tri(n): floats"):
        assert ".astype(bool)" in out
    if name.startswith("a list of lists"):
        assert "returned a Python list" in flat(out) and "np.array(..., dtype=bool)" in flat(out)


# --- check_padding_mask ---------------------------------------------------------------------

def real(lengths, n):
    return np.arange(n) < np.asarray(lengths)[:, None]  # (B, n)


PADDING_WRONG = {
    "rows hidden (B, n, 1)": (lambda lengths, n: real(lengths, n)[:, :, None], "hides query rows"),
    "no query axis (B, n)": (lambda lengths, n: real(lengths, n), "has no query axis"),
    "multi-head form (B, 1, 1, n)": (lambda lengths, n: real(lengths, n)[:, None, None],
                                     "the form for multi-head scores"),
    "inverted": (lambda lengths, n: (np.arange(n) >= np.asarray(lengths)[:, None])[:, None],
                 H.HINT_POLARITY),
    "<= (one too many)": (lambda lengths, n: (np.arange(n) <= np.asarray(lengths)[:, None])[:, None],
                          "use <, not <="),
    "< lengths - 1": (lambda lengths, n: (np.arange(n) < np.asarray(lengths)[:, None] - 1)[:, None],
                      "the last real key"),
    "ints": (lambda lengths, n: real(lengths, n)[:, None].astype(int), None),
    "rows and columns hidden (B, n, n)": (
        lambda lengths, n: real(lengths, n)[:, None] & real(lengths, n)[:, :, None],
        "also hides the padded queries' rows"),
    "keys repeated for every query (B, n, n)": (
        lambda lengths, n: np.broadcast_to(real(lengths, n)[:, None],
                                           (len(lengths), n, n)).copy(),
        "repeated for every query"),
    "a list of lists, from a loop": (
        lambda lengths, n: [[[j < L for j in range(n)]] for L in lengths], None),
    "lengths without [:, None]": (lambda lengths, n: (np.arange(n) < lengths)[:, None],
                                  "compare every position with every length"),
}


@pytest.mark.parametrize("name", PADDING_WRONG)
def test_padding_mask_rejects(name, capsys):
    fn, hint = PADDING_WRONG[name]
    out = assert_rejected(check.check_padding_mask, fn, hint, capsys, only=True)
    if name == "ints":
        assert ".astype(bool)" in out
    if name.startswith("a list of lists"):
        assert "returned a Python list" in flat(out) and "np.array(..., dtype=bool)" in flat(out)


# --- check_cross_attention ---------------------------------------------------------------------

def cross(xq, xv, W_q, W_k, W_v, *, scale=None, softmax=sm, q_from=None, k_from=None, v_from=None):
    q = (xq if q_from is None else q_from(xq, xv)) @ W_q
    k = (xv if k_from is None else k_from(xq, xv)) @ W_k
    v = (xv if v_from is None else v_from(xq, xv)) @ W_v
    s = q @ k.swapaxes(-2, -1) / (np.sqrt(k.shape[-1]) if scale is None else scale(xq, q, k, v))
    w = softmax(s)
    return w @ v, w


CROSS_WRONG = {
    "no scale": (lambda *a: cross(*a, scale=lambda x, q, k, v: 1.0)[0], H.HINT_NO_SCALE),
    "sqrt(dv)": (lambda *a: cross(*a, scale=lambda x, q, k, v: np.sqrt(v.shape[-1]))[0], H.HINT_DV),
    "sqrt(D)": (lambda *a: cross(*a, scale=lambda x, q, k, v: np.sqrt(x.shape[-1]))[0],
                H.HINT_WIDTH_D),
    "sqrt(Nk) via k.shape[1]": (lambda *a: cross(
        *a, scale=lambda x, q, k, v: np.sqrt(k.shape[1]))[0], H.HINT_TOKENS),
    "softmax over axis -2": (lambda *a: cross(*a, softmax=lambda s: sm(s, -2))[0], H.HINT_AXIS),
    "keys from xq": (lambda *a: cross(*a, k_from=lambda xq, xv: xq)[0], "the keys come from xq"),
    "values from xq": (lambda *a: cross(*a, v_from=lambda xq, xv: xq)[0], "the values come from xq"),
    "self-attention of xq": (lambda xq, xv, *w: cross(xq, xq, *w)[0], "self-attention of xq"),
    "roles swapped": (lambda xq, xv, *w: cross(xv, xq, *w)[0], "the roles are swapped"),
    "W_q and W_k swapped": (lambda xq, xv, wq, wk, wv: cross(xq, xv, wk, wq, wv)[0],
                            H.HINT_TRANSPOSED),
    "returns the weights": (lambda *a: cross(*a)[1], H.HINT_WEIGHTS),
    "no scale, Nq = Nk case first fails": (lambda *a: cross(
        *a, scale=lambda x, q, k, v: 1.0)[0], H.HINT_NO_SCALE),
    "sqrt(Nq)": (lambda *a: cross(*a, scale=lambda x, q, k, v: np.sqrt(q.shape[-2]))[0],
                 H.HINT_TOKENS),
    "divided by dk": (lambda *a: cross(*a, scale=lambda x, q, k, v: k.shape[-1])[0], H.HINT_DK),
    "sqrt(k.shape[0]) = sqrt(B) for a batch": (
        lambda *a: cross(*a, scale=lambda x, q, k, v: np.sqrt(k.shape[0]))[0],
        H.HINT_BATCH_SIZE),
    "k.T on a batch": (lambda xq, xv, wq, wk, wv: sm(
        (xq @ wq) @ (xv @ wk).T / np.sqrt(wk.shape[1])) @ (xv @ wv), HINT_DOT_T),
    "np.dot with swapaxes": (lambda xq, xv, wq, wk, wv: sm(np.dot(
        xq @ wq, (xv @ wk).swapaxes(-2, -1)) / np.sqrt(wk.shape[1])) @ (xv @ wv),
        H.HINT_NP_DOT),
    "k.transpose(0, 2, 1): no unbatched input": (lambda xq, xv, wq, wk, wv: sm(
        (xq @ wq) @ (xv @ wk).transpose(0, 2, 1) / np.sqrt(wk.shape[1])) @ (xv @ wv),
        H.HINT_TRANSPOSE_021),
    "max without keepdims": (lambda *a: cross(*a, softmax=sm_no_keepdims)[0], H.HINT_KEEPDIMS),
    "values not projected": (lambda xq, xv, wq, wk, wv: sm(
        (xq @ wq) @ (xv @ wk).swapaxes(-2, -1) / np.sqrt(wk.shape[1])) @ xv,
        "the values are xv"),
}


@pytest.mark.parametrize("name", CROSS_WRONG)
def test_cross_attention_rejects(name, capsys):
    fn, hint = CROSS_WRONG[name]
    assert_rejected(check.check_cross_attention, fn, hint, capsys, only=True)


# --- check_multihead_list ----------------------------------------------------------------------

def head(x, W_q, W_k, W_v, mask=None, scale=None, axis=-1):
    q, k, v = x @ W_q, x @ W_k, x @ W_v
    s = q @ k.swapaxes(-2, -1) / (np.sqrt(k.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = sm(s, axis)
    return w @ v, w


def mh(x, W_qs, W_ks, W_vs, W_o, mask=None, *, hs=None, scale=None, axis=-1, combine="concat",
       invert=False, same=False):
    NH, D = len(W_qs), x.shape[-1]
    HS = W_qs[0].shape[1] if hs is None else hs(D, NH)
    outs = []
    for h in range(NH):
        g = 0 if same else h
        m = None if mask is None else (~mask if invert else mask)
        sc = None if scale is None else scale(D, NH, HS)
        outs.append(head(x, W_qs[g], W_ks[g], W_vs[g], m, sc, axis)[0])
    if combine == "sum":
        return sum(o @ W_o[h * HS:(h + 1) * HS] for h, o in enumerate(outs))
    if combine == "average":
        return sum(o @ W_o[:HS] for o in outs) / NH
    if combine == "no_wo":
        return np.concatenate(outs, axis=-1)
    if combine == "tokens":
        return np.concatenate(outs, axis=1) @ W_o
    if combine == "rows_h":
        return sum(o @ W_o[h:h + HS] for h, o in enumerate(outs))
    if combine == "first_rows":
        return sum(o @ W_o[:HS] for o in outs)
    if combine == "columns":
        return sum(o @ W_o[:, h * HS:(h + 1) * HS] for h, o in enumerate(outs))
    if combine == "split_columns":
        return sum(o @ w for o, w in zip(outs, np.split(W_o, NH, axis=1)))
    return np.concatenate(outs, axis=-1) @ W_o


def mh_answer_key(x, W_qs, W_ks, W_vs, W_o, mask=None, *, invert=False):
    """The sum form with the answer key's attention for each head."""
    HS = W_qs[0].shape[1]
    m = None if mask is None else (~mask if invert else mask)
    return sum(ref.scaled_dot_product_attention(x @ wq, x @ wk, x @ wv, m)[0]
               @ W_o[h * HS:(h + 1) * HS]
               for h, (wq, wk, wv) in enumerate(zip(W_qs, W_ks, W_vs)))


def mh_ref_softmax(x, W_qs, W_ks, W_vs, W_o, mask=None):
    """The chapter's attention_head (answer key's softmax) with the mask inverted."""
    outs = []
    for wq, wk, wv in zip(W_qs, W_ks, W_vs):
        q, k, v = x @ wq, x @ wk, x @ wv
        s = q @ k.swapaxes(-2, -1) / np.sqrt(k.shape[-1])
        if mask is not None:
            s = np.where(~mask, s, -np.inf)
        outs.append(ref.softmax(s, axis=-1) @ v)
    return np.concatenate(outs, axis=-1) @ W_o


MULTIHEAD_WRONG = {
    "HS = D // NH when slicing W_o": (lambda *a, **k: mh(*a, **k, combine="sum",
                                                         hs=lambda D, NH: D // NH),
                                      "HS is computed as D // NH"),
    "sqrt(D // NH) as the scale": (lambda *a, **k: mh(*a, **k, scale=lambda D, NH, HS: np.sqrt(
        D // NH)), "HS is computed as D // NH"),
    "sqrt(D) as the scale": (lambda *a, **k: mh(*a, **k, scale=lambda D, NH, HS: np.sqrt(D)),
                             H.HINT_WIDTH_D),
    "no scale": (lambda *a, **k: mh(*a, **k, scale=lambda D, NH, HS: 1.0), H.HINT_NO_SCALE),
    "mask ignored": (lambda x, W_qs, W_ks, W_vs, W_o, mask=None: mh(x, W_qs, W_ks, W_vs, W_o),
                     "the mask is ignored"),
    "mask inverted": (lambda *a, **k: mh(*a, **k, invert=True), H.HINT_POLARITY),
    "softmax over axis -2": (lambda *a, **k: mh(*a, **k, axis=-2), H.HINT_AXIS),
    "heads averaged": (lambda *a, **k: mh(*a, **k, combine="average"), "the heads are averaged"),
    "no W_o": (lambda *a, **k: mh(*a, **k, combine="no_wo"), "W_o is not applied"),
    "the first head's matrices for every head": (lambda *a, **k: mh(*a, **k, same=True),
                                                 "every head uses the first head's"),
    "concatenated along the tokens": (lambda *a, **k: mh(*a, **k, combine="tokens"),
                                      "along the tokens"),
    "W_o[h:h + HS]": (lambda *a, **k: mh(*a, **k, combine="rows_h"), "start at h * HS"),
    "W_o[:HS] for every head": (lambda *a, **k: mh(*a, **k, combine="first_rows"),
                                "the first HS rows of W_o"),
    "W_o sliced by columns": (lambda *a, **k: mh(*a, **k, combine="columns"),
                              "Slicing W_o's columns"),
    "np.split(W_o, NH, axis=1)": (lambda *a, **k: mh(*a, **k, combine="split_columns"),
                                  "Slicing W_o's columns"),
    "mask inverted, answer key per head": (lambda *a, **k: mh_answer_key(*a, **k, invert=True),
                                           "is the mask inverted?"),
    "mask inverted, answer key's softmax": (mh_ref_softmax, "is the mask inverted?"),
}


@pytest.mark.parametrize("name", MULTIHEAD_WRONG)
def test_multihead_list_rejects(name, capsys):
    fn, hint = MULTIHEAD_WRONG[name]
    out = assert_rejected(check.check_multihead_list, fn, hint, capsys, only=True)
    if name.startswith("mask inverted, answer key"):
        # the answer key's error is printed as one paragraph (its own line breaks
        # used to cut it into pieces that read as unfinished sentences)
        raised = out[out.index("    your function raised"):out.index("    hint:")]
        lines = raised.rstrip("\n").split("\n")
        assert all(line.startswith(" " * 8) for line in lines[1:]), raised
    if name == "mask inverted, answer key's softmax":
        assert flat(out).count("masked: check the mask (True = may attend).") == 1, out


def test_multihead_list_has_a_case_where_d_over_nh_is_not_hs():
    for case in check_multihead_part.multihead_list_cases():
        x, W_qs = case.args[0], case.args[1]
        if W_qs[0].shape[1] != x.shape[-1] // len(W_qs):
            break
    else:
        pytest.fail("no case tells HS from D // NH")


# --- check_split_heads / check_merge_heads -----------------------------------------------------

SPLIT_WRONG = {
    "no transpose": (lambda x, nh: x.reshape(x.shape[0], nh, x.shape[1], -1), "without the transpose"),
    "no swap": (lambda x, nh: x.reshape(*x.shape[:2], nh, -1), "still need to be swapped"),
    "interleaved columns": (lambda x, nh: x.reshape(*x.shape[:2], -1, nh).transpose(0, 3, 1, 2),
                            "head h got the columns h, h + NH"),
    "heads on the last axis": (lambda x, nh: x.reshape(*x.shape[:2], nh, -1).transpose(0, 1, 3, 2),
                               None),
    ".T on the 4-D array": (lambda x, nh: x.reshape(*x.shape[:2], nh, -1).T, ".T reverses every axis"),
    "transpose(0, 2, 1) on 4 axes": (lambda x, nh: x.reshape(*x.shape[:2], nh, -1).transpose(0, 2, 1),
                                     "lists 3 axes for a 4-D array"),
}


@pytest.mark.parametrize("name", SPLIT_WRONG)
def test_split_heads_rejects(name, capsys):
    fn, hint = SPLIT_WRONG[name]
    assert_rejected(check.check_split_heads, fn, hint, capsys, only=True)


MERGE_WRONG = {
    "no transpose": (lambda h: h.reshape(h.shape[0], h.shape[2], -1), "without the transpose"),
    "interleaved": (lambda h: h.transpose(0, 2, 3, 1).reshape(h.shape[0], h.shape[2], -1),
                    "columns are interleaved"),
    "only the first head": (lambda h: h[:, 0], None),
    ".T before the reshape": (lambda h: h.T.reshape(h.shape[0], h.shape[2], -1),
                              ".T reverses every axis"),
    "transpose(0, 2, 1) on 4 axes": (lambda h: h.transpose(0, 2, 1).reshape(h.shape[0], h.shape[2], -1),
                                     "lists 3 axes for a 4-D array"),
}


@pytest.mark.parametrize("name", MERGE_WRONG)
def test_merge_heads_rejects(name, capsys):
    fn, hint = MERGE_WRONG[name]
    assert_rejected(check.check_merge_heads, fn, hint, capsys, only=True)


# --- the right answers pass, in both return forms -----------------------------------------------

def right_attention(Q, K, V):
    return attention(Q, K, V)


def right_self(x, W_q, W_k, W_v):
    return self_attention(x, W_q, W_k, W_v)


def right_cross(xq, xv, W_q, W_k, W_v):
    return cross(xq, xv, W_q, W_k, W_v)


def right_mh(x, W_qs, W_ks, W_vs, W_o, mask=None):
    outs, ws = zip(*(head(x, q, k, v, mask) for q, k, v in zip(W_qs, W_ks, W_vs)))
    return np.concatenate(outs, axis=-1) @ W_o, np.stack(ws, axis=-3)


def right_lookup(query, keys, values):
    w = sm(keys @ query)
    return w @ values, w


def right_softmax_t(x, t):
    return softmax_t(x, t)


RIGHT = {  # checker -> a right answer returning (output, weights) or the output
    "check_softmax": lambda x: sm(x),
    "check_scores": lambda q, k: q @ k.T / np.sqrt(k.shape[-1]),
    "check_attention": right_attention,
    "check_soft_lookup": right_lookup,
    "check_temperature_softmax": right_softmax_t,
    "check_self_attention_batched": right_self,
    "check_causal_mask": lambda n: np.tril(np.ones((n, n), dtype=bool)),
    "check_padding_mask": lambda lengths, n: real(lengths, n)[:, None, :],
    "check_cross_attention": right_cross,
    "check_multihead_list": right_mh,
    "check_split_heads": ref.split_heads,
    "check_merge_heads": ref.merge_heads,
}


def _forms(fn):
    """The right answer as output alone, as a tuple (output, weights), and as a list."""
    def output(*a, **k):
        r = fn(*a, **k)
        return r[0] if isinstance(r, tuple) else r

    def pair(*a, **k):
        r = fn(*a, **k)
        return r if isinstance(r, tuple) else (r, None)

    def as_list(*a, **k):
        return list(pair(*a, **k))

    return {"output": output, "tuple": pair, "list": as_list}


@pytest.mark.parametrize("checker", RIGHT)
@pytest.mark.parametrize("form", ["output", "tuple", "list"])
def test_right_answer_passes_in_every_return_form(checker, form, capsys):
    verdict, out = run(getattr(check, checker), _forms(RIGHT[checker])[form], capsys)
    assert verdict, out
    assert "all" in out and "cases passed" in out


@pytest.mark.parametrize("checker, fn", [
    ("check_attention", lambda Q, K, V: (attention(Q, K, V)[0], attention(Q, K, V)[1].T)),
    ("check_self_attention_batched", lambda *a: (self_attention(*a)[0], self_attention(*a)[1] * 2)),
    ("check_cross_attention", lambda *a: (cross(*a)[0], cross(*a)[1][..., ::-1])),
    ("check_multihead_list", lambda *a, **k: (right_mh(*a, **k)[0], right_mh(*a, **k)[1][:, :1])),
    ("check_soft_lookup", lambda q, k, v: (right_lookup(q, k, v)[0], k @ q)),
])
def test_wrong_weights_are_caught_in_the_second_element(checker, fn, capsys):
    verdict, out = run(getattr(check, checker), fn, capsys)
    assert not verdict
    assert "the weights (second element)" in out


# --- no checker crashes on a strange answer ----------------------------------------------------

STRANGE = {
    "None": lambda *a, **k: None,
    "a dict": lambda *a, **k: {"output": 1},
    "a string": lambda *a, **k: "softmax",
    "a mixed-shape tuple of 3": lambda *a, **k: (np.ones(3), np.ones((2, 2)), 1),
    "a mixed-shape list of 2": lambda *a, **k: [np.ones(3), np.ones((2, 2))],
    "a list of 2 strings": lambda *a, **k: ["a", "b"],
    "complex numbers": lambda *a, **k: np.ones(3) * 1j,
    "an object array": lambda *a, **k: np.array([object(), 1], dtype=object),
    "a scalar": lambda *a, **k: 0.5,
    "ints": lambda *a, **k: np.ones((3, 3), dtype=int),
    "bools": lambda *a, **k: np.ones((3, 3), dtype=bool),
    "a generator": lambda *a, **k: (i for i in range(3)),
    "an empty array": lambda *a, **k: np.zeros((0,)),
    "all nan": lambda *a, **k: np.full((3, 2), np.nan),
    "inf": lambda *a, **k: np.full((3, 2), np.inf),
    "raises KeyError": lambda *a, **k: {}["x"],
}


@pytest.mark.parametrize("checker", RIGHT)
@pytest.mark.parametrize("answer", STRANGE)
def test_no_checker_crashes(checker, answer, capsys):
    verdict, out = run(getattr(check, checker), STRANGE[answer], capsys)
    assert not verdict and "FAILED" in out
    if answer == "None":
        assert "is None (is a return statement missing?)" in out
    if answer in ("a dict", "a string", "a generator", "an object array"):
        assert "not an array of numbers" in out
    if answer == "complex numbers":
        assert "complex" in out


def test_a_list_of_rows_is_an_output_not_a_pair(capsys):
    # a two-row output returned as a Python list of rows is the output itself
    verdict, out = run(check.check_softmax, lambda x: [list(r) for r in sm(x)] if np.ndim(x) == 2
                       and len(x) == 2 else sm(x), capsys)
    assert verdict, out


def test_run_cases_reports_a_learner_exception_with_a_hint_when_a_mistake_raises_the_same(capsys):
    def d_over_nh(x, W_qs, W_ks, W_vs, W_o, mask=None):
        return mh(x, W_qs, W_ks, W_vs, W_o, mask, combine="sum", hs=lambda D, NH: D // NH)

    verdict, out = run(check.check_multihead_list, d_over_nh, capsys)
    assert not verdict and "HS is computed as D // NH" in flat(out)


# --- every known mistake in attnbook.check is itself rejected, with its own hint -----------

MISTAKE_LISTS = {
    "check_softmax": check_softmax_part._softmax_mistakes,
    "check_scores": check_softmax_part._scores_mistakes,
    "check_attention": check_softmax_part._attention_mistakes,
    "check_soft_lookup": check_softmax_part._soft_lookup_mistakes,
    "check_temperature_softmax": check_softmax_part._temperature_mistakes,
    "check_self_attention_batched": check_self_attention_part._self_mistakes,
    "check_causal_mask": check_self_attention_part._causal_mistakes,
    "check_padding_mask": check_self_attention_part._padding_mistakes,
    "check_cross_attention": check_self_attention_part._cross_mistakes,
    "check_multihead_list": check_multihead_part._multihead_mistakes,
}


# the checkers of chapters 05-08, whose case sizes keep different mistakes apart
ONE_HINT = {"check_self_attention_batched", "check_causal_mask", "check_padding_mask",
            "check_cross_attention", "check_multihead_list"}


@pytest.mark.parametrize("checker", MISTAKE_LISTS)
def test_every_known_mistake_is_rejected_with_its_hint(checker, capsys):
    for mistake in MISTAKE_LISTS[checker]():
        verdict, out = run(getattr(check, checker), mistake.fn, capsys)
        assert not verdict, mistake.hint
        assert flat(mistake.hint) in flat(out), (mistake.hint, out)
        if checker in ONE_HINT:  # its own hint and no other: no two mistakes coincide
            assert out.count("hint:") == 1, (mistake.hint, out)
