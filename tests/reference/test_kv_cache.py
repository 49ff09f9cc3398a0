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


def scaled_by_dv(q, k, v, window):
    return good_rolling(q * np.sqrt(q.shape[1] / v.shape[1]), k, v, window)


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
    (scaled_by_dv, "sqrt(d_v)"),
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


# --- check_cached_attention (page 1's exercise: one head's decode step) ----------

def good_cached(q, k, v, k_cache, v_cache):
    start, n = len(k_cache), len(q)
    pos = np.arange(start, start + n)
    q, k = ref.rope(q, pos), ref.rope(k, pos)
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    out, _ = ref.scaled_dot_product_attention(q, k_cache, v_cache, ref.causal_mask(n, start + n))
    return out, k_cache, v_cache


def cached_loop(q, k, v, k_cache, v_cache):
    """Right, one new row at a time, returning lists."""
    kc, vc, outs = list(k_cache), list(v_cache), []
    for i in range(len(q)):
        p = len(kc)
        kc.append(ref.rope(k[i:i + 1], [p])[0])
        vc.append(v[i])
        s = np.array(kc) @ ref.rope(q[i:i + 1], [p])[0] / np.sqrt(q.shape[1])
        outs.append(softmax(s) @ np.array(vc))
    return outs, kc, vc


def _step(**kw):
    from attnbook.check.kv_cache import _cached_step
    return lambda *a: _cached_step(*a, **kw)


def attend_then_append(q, k, v, k_cache, v_cache):
    start, n = len(k_cache), len(q)
    pos = np.arange(start, start + n)
    q, k = ref.rope(q, pos), ref.rope(k, pos)
    out, _ = ref.scaled_dot_product_attention(q, k_cache, v_cache, ref.causal_mask(n, start))
    return out, np.concatenate([k_cache, k]), np.concatenate([v_cache, v])


def attend_then_append_numpy(q, k, v, k_cache, v_cache):
    start, n = len(k_cache), len(q)
    pos = np.arange(start, start + n)
    q, k = ref.rope(q, pos), ref.rope(k, pos)
    s = q @ k_cache.T / np.sqrt(q.shape[1])       # (n, T): empty at first
    w = np.exp(s - s.max(axis=-1, keepdims=True))  # raises on the empty cache
    out = (w / w.sum(axis=-1, keepdims=True)) @ v_cache
    return out, np.concatenate([k_cache, k]), np.concatenate([v_cache, v])


def is_causal_mask(q, k, v, k_cache, v_cache):
    start, n = len(k_cache), len(q)
    pos = np.arange(start, start + n)
    q, k = ref.rope(q, pos), ref.rope(k, pos)
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    top_left = np.tril(np.ones((n, start + n), dtype=bool))
    return ref.scaled_dot_product_attention(q, k_cache, v_cache, top_left)[0], k_cache, v_cache


def positions_from_zero(q, k, v, k_cache, v_cache):
    """The bug of page 1's second exercise, in one head."""
    start, n = len(k_cache), len(q)
    q, k = ref.rope(q, np.arange(n)), ref.rope(k, np.arange(n))
    k_cache, v_cache = np.concatenate([k_cache, k]), np.concatenate([v_cache, v])
    out, _ = ref.scaled_dot_product_attention(q, k_cache, v_cache, ref.causal_mask(n, start + n))
    return out, k_cache, v_cache


# The wrong answers a learner plausibly writes, and the words of the hint that
# must name each.
CACHED_WRONG = {
    "positions from 0 in every step": (positions_from_zero, "positions 0, 1"),
    "positions from 0 (the knob)": (_step(offset=False), "positions 0, 1"),
    "top-left mask (is_causal)": (is_causal_mask, "aligned top-left"),
    "no mask": (_step(mask="none"), "no causal mask"),
    "queries not rotated": (_step(rotate_q=False), "queries are not rotated"),
    "values rotated": (_step(rotate_v=True), "values are rotated"),
    "unscaled": (_step(scale="none"), "not scaled"),
    "scaled by sqrt(d_v)": (_step(scale="v"), "sqrt(d_v)"),
    "attends before appending (raises on the empty cache)": (attend_then_append,
                                                            "BEFORE attending"),
    "attends before appending, in NumPy (raises: zero-size)": (attend_then_append_numpy,
                                                              "BEFORE attending"),
    "attends before appending (zeros for an empty cache)": (_step(append_first=False),
                                                           "before their keys are appended"),
    "new rows put in front of the cache": (_step(prepend=True), "in front of the cache"),
    "cached keys rotated again": (_step(rerotate=True), "rotated again"),
    "cache of unrotated keys, all rotated every step": (_step(cache_rotated=False),
                                                       "keys before RoPE"),
    "only the output returned": (lambda *a: good_cached(*a)[0], "return the tuple"),
    "caches not grown": (lambda q, k, v, kc, vc: (good_cached(q, k, v, kc, vc)[0], kc, vc),
                         "append the new keys"),
    "k and v caches swapped": (lambda *a: (lambda o, kc, vc: (o, vc, kc))(*good_cached(*a)),
                               None),
}


def test_cached_attention_checker_passes_right_answers(capsys):
    assert check.check_cached_attention(good_cached)
    assert check.check_cached_attention(cached_loop)
    assert check.check_cached_attention(lambda *a: list(good_cached(*a)))
    assert "all 4 cases passed" in capsys.readouterr().out


def test_cached_attention_checker_stub(capsys):
    assert not check.check_cached_attention(stub)
    assert "not done yet" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(CACHED_WRONG))
def test_cached_attention_checker_names_the_mistake(capsys, name):
    bad, hint = CACHED_WRONG[name]
    assert not check.check_cached_attention(bad)
    out = capsys.readouterr().out
    assert all(len(line) <= 79 for line in out.splitlines()), out
    assert "FAILED" in out
    assert hint is None or hint in " ".join(out.split())


@pytest.mark.parametrize("bad", [lambda *a: None, lambda *a: (1, 2, 3), lambda *a: ("a", "b", "c"),
                                 lambda q, k: q, lambda *a: 1 / 0])
def test_cached_attention_checker_survives_odd_answers(capsys, bad):
    assert not check.check_cached_attention(bad)
    assert "FAILED" in capsys.readouterr().out


# --- the decoder page 2 imports ------------------------------------------------

def test_the_packaged_decoder_caches_exactly():
    from attnbook import kv_decoder as dec
    prompt = np.array([0, 1, 3, 4, 0])
    ids, rows = dec.generate(prompt, 6)
    ids_c, rows_c = dec.generate_cached(prompt, 6)
    assert ids == ids_c and np.allclose(rows, rows_c, rtol=0, atol=1e-12)
    dec.FLOPS[0] = 0
    dec.forward_cached(prompt[:1], dec.new_cache())
    assert dec.FLOPS[0] > 0  # the counter counts
