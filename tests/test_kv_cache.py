"""The KV cache chapter (14): the answer key's sliding_window_mask, a rolling
buffer equal to the full masked computation, and the two exercise checkers
(right answers pass; the wrong answers a learner plausibly writes fail, with
the mistake named where it is recognisable; odd return values never crash a
checker)."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref

RNG = np.random.default_rng(1414)


def loop_mask(n_q, n_k, w):
    m = np.zeros((n_q, n_k), dtype=bool)
    for i in range(n_q):
        p = n_k - n_q + i
        for j in range(n_k):
            m[i, j] = p - w < j <= p
    return m


# --- the answer key: sliding_window_mask --------------------------------------

@pytest.mark.parametrize("n_q,n_k,w", [(6, 6, 3), (1, 8, 3), (3, 8, 4), (5, 5, 1),
                                       (2, 4, 10), (0, 5, 2), (4, 0, 2), (5, 3, 2)])
def test_sliding_window_mask_equals_the_loop(n_q, n_k, w):
    m = ref.sliding_window_mask(n_q, n_k, w)
    assert m.dtype == bool and m.shape == (n_q, n_k)
    assert np.array_equal(m, loop_mask(n_q, n_k, w))


def test_sliding_window_mask_is_the_last_rows_of_the_square_mask():
    full = ref.sliding_window_mask(9, 9, 3)
    for n_q in range(10):
        assert np.array_equal(ref.sliding_window_mask(n_q, 9, 3), full[9 - n_q:])


def test_a_window_as_long_as_the_keys_is_the_causal_mask():
    for n_q, n_k in [(4, 4), (2, 6), (1, 5)]:
        for w in (n_k, n_k + 1, 100):
            assert np.array_equal(ref.sliding_window_mask(n_q, n_k, w), ref.causal_mask(n_q, n_k))
    # ... and a shorter one is not
    assert not np.array_equal(ref.sliding_window_mask(6, 6, 5), ref.causal_mask(6))


def test_every_query_sees_at_most_window_keys_ending_at_itself():
    m = ref.sliding_window_mask(12, 12, 4)
    assert (m.sum(axis=1) == np.minimum(np.arange(12) + 1, 4)).all()
    assert m.diagonal().all()  # each query sees its own key


def test_more_queries_than_keys_gives_fully_masked_first_rows():
    m = ref.sliding_window_mask(5, 3, 2)
    assert not m[:2].any() and m[2:].any(axis=1).all()


@pytest.mark.parametrize("args,error,match", [
    ((3, 3, 0), ValueError, "window must be >= 1"),
    ((3, 3, -2), ValueError, "window=-2"),
    ((-1, 3, 2), ValueError, "n_q=-1"),
    ((2, -3, 2), ValueError, "n_k=-3"),
    ((3, 3, 2.5), TypeError, "window must be an integer"),
    ((3, 3, True), TypeError, "window must be an integer"),
    ((3.0, 3, 2), TypeError, "n_q must be an integer"),
])
def test_sliding_window_mask_rejects_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        ref.sliding_window_mask(*args)


def test_sliding_window_mask_accepts_numpy_integers():
    assert np.array_equal(ref.sliding_window_mask(np.int64(4), np.int32(4), np.int8(2)),
                          ref.sliding_window_mask(4, 4, 2))


# --- a rolling buffer equals the full computation under the mask ------------

def rolling(q, k, v, w):
    kb, vb = np.zeros((w, k.shape[-1])), np.zeros((w, v.shape[-1]))
    out = []
    for p in range(len(q)):
        kb[p % w], vb[p % w] = k[p], v[p]
        n = min(p + 1, w)
        o, _ = ref.scaled_dot_product_attention(q[p:p + 1], kb[:n], vb[:n])
        out.append(o[0])
    return np.array(out)


@pytest.mark.parametrize("n,w", [(10, 3), (4, 4), (5, 1), (3, 8)])
def test_rolling_buffer_equals_sliding_window_attention(n, w):
    q, k, v = RNG.normal(size=(n, 4)), RNG.normal(size=(n, 4)), RNG.normal(size=(n, 3))
    full, _ = ref.scaled_dot_product_attention(q, k, v, ref.sliding_window_mask(n, n, w))
    np.testing.assert_allclose(rolling(q, k, v, w), full, rtol=1e-12, atol=1e-12)
    if n > w:  # the window matters: plain causal attention differs
        causal, _ = ref.scaled_dot_product_attention(q, k, v, ref.causal_mask(n))
        assert not np.allclose(full, causal)


# --- check_sliding_window_mask --------------------------------------------------

def stub(*args):
    raise NotImplementedError


def band(n_q, n_k, lo, hi, top_left=False):
    pos = (0 if top_left else n_k - n_q) + np.arange(n_q)[:, None]
    off = pos - np.arange(n_k)[None, :]
    return (off >= lo) & (off <= hi)


def test_sliding_window_mask_checker_passes_right_answers(capsys):
    assert check.check_sliding_window_mask(ref.sliding_window_mask)
    assert check.check_sliding_window_mask(loop_mask)
    assert "all 6 cases passed" in capsys.readouterr().out


def test_sliding_window_mask_checker_stub(capsys):
    assert not check.check_sliding_window_mask(stub)
    assert "not done yet" in capsys.readouterr().out


@pytest.mark.parametrize("bad,hint", [
    (lambda n_q, n_k, w: band(n_q, n_k, 0, w - 1, top_left=True), "aligned top-left"),
    (lambda n_q, n_k, w: band(n_q, n_k, 0, w), "window + 1 keys"),
    (lambda n_q, n_k, w: band(n_q, n_k, 0, w - 2), "window - 1 keys"),
    (lambda n_q, n_k, w: band(n_q, n_k, -(w - 1), w - 1), "into the future"),
    (lambda n_q, n_k, w: ~ref.sliding_window_mask(n_q, n_k, w), "True and False are swapped"),
    (lambda n_q, n_k, w: ref.causal_mask(n_q, n_k), "the window is missing"),
    (lambda n_q, n_k, w: band(n_q, n_k, 1, w), "does not see its own key"),
    (lambda n_q, n_k, w: band(n_q, n_k, -(w - 1), 0), "looks forward"),
])
def test_sliding_window_mask_checker_names_the_mistake(capsys, bad, hint):
    assert not check.check_sliding_window_mask(bad)
    out = capsys.readouterr().out
    assert "FAILED" in out and "hint:" in out and hint in " ".join(out.split())


@pytest.mark.parametrize("bad,report", [
    (lambda n_q, n_k, w: ref.sliding_window_mask(n_q, n_k, w).astype(float), "boolean"),
    (lambda n_q, n_k, w: ref.sliding_window_mask(n_q, n_k, w).T, "FAILED"),
    (lambda n_q, n_k, w: ref.sliding_window_mask(n_k, n_q, w), "wrong shape"),
    (lambda n_q, n_k, w: None, "None"),
    (lambda n_q, n_k, w: [[True]], "wrong shape"),
    (lambda n_q, n_k, w: 1 / 0, "ZeroDivisionError"),
])
def test_sliding_window_mask_checker_survives_odd_answers(capsys, bad, report):
    assert not check.check_sliding_window_mask(bad)
    assert report in capsys.readouterr().out


# --- check_rolling_attention ---------------------------------------------------

def softmax(s):
    e = np.exp(s - s.max())
    return e / e.sum()


def good_rolling(q, k, v, window):
    kb, vb = np.zeros((window, k.shape[1])), np.zeros((window, v.shape[1]))
    out = np.zeros((len(q), v.shape[1]))
    for p in range(len(q)):
        kb[p % window], vb[p % window] = k[p], v[p]
        n = min(p + 1, window)
        out[p] = softmax(kb[:n] @ q[p] / np.sqrt(q.shape[1])) @ vb[:n]
    return out


def list_buffer(q, k, v, window):
    """A list that drops its oldest entry: also right."""
    keys, values, out = [], [], []
    for p in range(len(q)):
        keys.append(k[p])
        values.append(v[p])
        if len(keys) > window:
            keys.pop(0)
            values.pop(0)
        w = softmax(np.array(keys) @ q[p] / np.sqrt(q.shape[1]))
        out.append(w @ np.array(values))
    return out  # a list of N rows


def no_modulo(q, k, v, window):
    kb, vb = np.zeros((window, k.shape[1])), np.zeros((window, v.shape[1]))
    out = np.zeros((len(q), v.shape[1]))
    for p in range(len(q)):
        kb[p], vb[p] = k[p], v[p]  # slot p, not p % window
        n = min(p + 1, window)
        out[p] = softmax(kb[:n] @ q[p] / np.sqrt(q.shape[1])) @ vb[:n]
    return out


def attend_before_store(q, k, v, window):
    kb, vb = np.zeros((window, k.shape[1])), np.zeros((window, v.shape[1]))
    out = np.zeros((len(q), v.shape[1]))
    for p in range(len(q)):
        n = min(p, window)
        out[p] = softmax(kb[:n] @ q[p] / np.sqrt(q.shape[1])) @ vb[:n]
        kb[p % window], vb[p % window] = k[p], v[p]
    return out


def attend_before_store_zero_first(q, k, v, window):
    keys, values, out = [], [], np.zeros((len(q), v.shape[1]))
    for p in range(len(q)):
        if keys:
            out[p] = softmax(np.array(keys) @ q[p] / np.sqrt(q.shape[1])) @ np.array(values)
        keys, values = (keys + [k[p]])[-window:], (values + [v[p]])[-window:]
    return out


def empty_slots_count(q, k, v, window):
    kb, vb = np.zeros((window, k.shape[1])), np.zeros((window, v.shape[1]))
    out = np.zeros((len(q), v.shape[1]))
    for p in range(len(q)):
        kb[p % window], vb[p % window] = k[p], v[p]
        out[p] = softmax(kb @ q[p] / np.sqrt(q.shape[1])) @ vb  # all W slots
    return out


def no_window(q, k, v, window):
    out = np.zeros((len(q), v.shape[1]))
    for p in range(len(q)):
        out[p] = softmax(k[:p + 1] @ q[p] / np.sqrt(q.shape[1])) @ v[:p + 1]
    return out


def window_plus_one(q, k, v, window):
    return good_rolling(q, k, v, window + 1)


def unscaled(q, k, v, window):
    return good_rolling(q * np.sqrt(q.shape[1]), k, v, window)


def window_minus_one(q, k, v, window):
    return good_rolling(q, k, v, max(window - 1, 1))


def test_rolling_checker_passes_right_answers(capsys):
    assert check.check_rolling_attention(good_rolling)
    assert check.check_rolling_attention(list_buffer)
    assert check.check_rolling_attention(lambda q, k, v, w: (good_rolling(q, k, v, w), None))
    assert check.check_rolling_attention(lambda q, k, v, w: [good_rolling(q, k, v, w), "weights"])
    assert "all 5 cases passed" in capsys.readouterr().out


def test_rolling_checker_stub(capsys):
    assert not check.check_rolling_attention(stub)
    assert "not done yet" in capsys.readouterr().out


@pytest.mark.parametrize("bad,hint", [
    (no_modulo, "slot p % window"),
    (attend_before_store, "store k[p] and v[p] BEFORE attending"),
    (attend_before_store_zero_first, "does not see its own key"),
    (empty_slots_count, "the empty slots take part"),
    (no_window, "the window is not"),
    (window_plus_one, "window + 1 keys"),
    (unscaled, "not scaled"),
    (window_minus_one, "window - 1 keys"),
])
def test_rolling_checker_names_the_mistake(capsys, bad, hint):
    assert not check.check_rolling_attention(bad)
    out = capsys.readouterr().out
    assert "FAILED" in out and hint in " ".join(out.split())
    assert "hint" in out


@pytest.mark.parametrize("bad,report", [
    (lambda q, k, v, w: None, "is None"),
    (lambda q, k, v, w: "outputs", "not an array of numbers"),
    (lambda q, k, v, w: good_rolling(q, k, v, w).T, "wrong shape"),
    (lambda q, k, v, w: (1, 2, 3), "wrong shape"),
    (lambda q, k, v, w: good_rolling(q, k, v, w)[None], "wrong shape"),
    (lambda q, k, v, w: np.full((len(q), v.shape[1]), np.nan), "nan"),
    (lambda q, k, v, w: q.missing, "AttributeError"),
])
def test_rolling_checker_survives_odd_answers(capsys, bad, report):
    assert not check.check_rolling_attention(bad)
    assert report in capsys.readouterr().out
