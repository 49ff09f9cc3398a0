"""The checkers of "Attention in today's LLMs" pass right answers, reject the
wrong answers a learner plausibly writes (naming the mistake where it is
recognisable), and never crash on odd input."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check.gqa import _gqa_variant
from attnbook.check.kv_cache import _kv_bytes
from attnbook.check.rope import _rope_variant


def _out(capsys, every_line=False):
    """The printed report, with its line breaks (hints are wrapped) undone.
    Hints fit in 79 columns; with every_line, the whole report does (the
    side-by-side arrays of a wrong answer of the right shape too)."""
    out = capsys.readouterr().out
    assert all(len(line) <= 79 for line in out.splitlines()
               if every_line or "hint" in line), out
    return " ".join(out.split())


# --- check_rope ---------------------------------------------------------------

def rope_loop(x, positions, base=10000.0):
    """A right answer written the slow way: one pair at a time."""
    x = np.asarray(x, dtype=float)
    d = x.shape[-1]
    out = x.copy()
    for i in range(d // 2):
        ang = np.asarray(positions, dtype=float) * base ** (-2 * i / d)
        a, b = x[..., i], x[..., i + d // 2]
        out[..., i] = a * np.cos(ang) - b * np.sin(ang)
        out[..., i + d // 2] = a * np.sin(ang) + b * np.cos(ang)
    return out


def test_check_rope_passes_right_answers(capsys):
    assert check.check_rope(rope_loop)
    assert check.check_rope(ref.rope)
    assert "all 8 cases passed" in _out(capsys)


@pytest.mark.parametrize("wrong,hint", [
    (lambda x, p, base=10000.0: _rope_variant(x, p, base, interleaved=True),
     "paired neighbours"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, base, exponent=1),
     "base ** (-i / d)"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, base, exponent=-2),
     "must shrink"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, base, offset=1),
     "off by one"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, base, sign=-1.0),
     "wrong sign"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, 10000.0),
     "base is ignored"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, base, arange=True),
     "positions argument is ignored"),
    (lambda x, p, base=10000.0: _rope_variant(x, p, base,
                                              repeat_angles=True),
     "(t0, t0, t1, t1, ...)"),
])
def test_check_rope_rejects_and_names_the_mistake(capsys, wrong, hint):
    assert not check.check_rope(wrong)
    out = _out(capsys, every_line=True)
    assert "FAILED" in out and hint in out


def test_check_rope_rejects_wrong_answers_without_a_hint(capsys):
    def only_2d(x, p, base=10000.0):  # forgets leading axes
        return ref.rope(np.asarray(x).reshape(-1, x.shape[-1])[: len(p)], p,
                        base=base)

    def degrees(x, p, base=10000.0):  # angles in degrees
        return ref.rope(x, np.degrees(np.asarray(p, dtype=float)), base=base)

    def no_rotation(x, p, base=10000.0):
        return x

    for fn in (only_2d, degrees, no_rotation):
        assert not check.check_rope(fn)
    assert "FAILED" in _out(capsys)


@pytest.mark.parametrize("weird", [
    lambda x, p, base=10000.0: None,
    lambda x, p, base=10000.0: (x, x),
    lambda x, p, base=10000.0: [[1, 2]],
    lambda x, p, base=10000.0: "rope",
    lambda x, p: x,  # no base argument: a TypeError, reported
])
def test_check_rope_never_crashes(capsys, weird):
    assert not check.check_rope(weird)
    assert "FAILED" in _out(capsys)


def test_check_rope_stub_is_not_done_yet(capsys):
    def stub(x, positions, base=10000.0):
        raise NotImplementedError

    assert not check.check_rope(stub)
    assert "not done yet" in _out(capsys)


# --- check_gqa ----------------------------------------------------------------

def gqa_reshape(q, k, v):
    b, h_q, n, d = q.shape
    h_kv = k.shape[1]
    q5 = q.reshape(b, h_kv, h_q // h_kv, n, d)
    s = q5 @ np.swapaxes(k, -1, -2)[:, :, None] / np.sqrt(d)
    w = ref.softmax(s, axis=-1)
    out = w @ v[:, :, None]
    return out.reshape(b, h_q, n, v.shape[-1]), w.reshape(b, h_q, n, -1)


def gqa_broadcast_view(q, k, v):
    """Right, and no copy: broadcast_to gives a view with stride 0."""
    g = q.shape[1] // k.shape[1]
    shape = (k.shape[0], k.shape[1], g) + k.shape[2:]
    kk = np.broadcast_to(k[:, :, None], shape).reshape(q.shape[0], q.shape[1], *k.shape[2:])
    vv = np.broadcast_to(v[:, :, None], (*shape[:3], *v.shape[2:])).reshape(
        q.shape[0], q.shape[1], *v.shape[2:])
    return ref.scaled_dot_product_attention(q, kk, vv)


def gqa_head_loop(q, k, v):
    """Right, and no copy: one query head at a time."""
    g = q.shape[1] // k.shape[1]
    out = np.zeros(q.shape[:3] + v.shape[-1:])
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            out[b, h] = ref.scaled_dot_product_attention(q[b, h], k[b, h // g], v[b, h // g])[0]
    return out


def test_check_gqa_passes_right_answers(capsys):
    assert check.check_gqa(gqa_reshape)                     # a tuple
    assert check.check_gqa(lambda q, k, v: gqa_reshape(q, k, v)[0])
    assert check.check_gqa(ref.grouped_query_attention)
    assert check.check_gqa(gqa_broadcast_view)
    assert check.check_gqa(gqa_head_loop)
    assert "all 7 cases passed" in _out(capsys)


def _repeat(t, g):
    return np.repeat(t, g, axis=1)


def _concatenated(t, g):
    return np.concatenate([t[:, [i]] for i in range(t.shape[1]) for _ in range(g)], axis=1)


def _broadcast_copy(t, g):
    shape = (t.shape[0], t.shape[1], g) + t.shape[2:]
    return np.broadcast_to(t[:, :, None], shape).copy().reshape(t.shape[0], -1, *t.shape[2:])


def _by_copy(copy, weights=False):
    def fn(q, k, v):
        g = q.shape[1] // k.shape[1]
        out, w = ref.scaled_dot_product_attention(q, copy(k, g), copy(v, g))
        return (out, w) if weights else out
    return fn


def _with_second(second):
    def fn(q, k, v):
        out = gqa_reshape(q, k, v)[0]
        g = q.shape[1] // k.shape[1]
        s = q @ np.swapaxes(np.repeat(k, g, axis=1), -1, -2)
        return out, second(s, q)
    return fn


def _groups_strided(q, k, v):
    b, h_q, n, d = q.shape
    q5 = q.reshape(b, h_q // k.shape[1], k.shape[1], n, d)
    s = q5 @ np.swapaxes(k, -1, -2)[:, None] / np.sqrt(d)
    return (ref.softmax(s) @ v[:, None]).reshape(b, h_q, n, -1)


# The wrong answers a learner plausibly writes, and the words of the hint that
# must name each (None: rejected, but no hint recognises it).
GQA_WRONG = {
    "np.tile (torch's .repeat): head h reads KV head h % H_kv":
        (lambda q, k, v: _gqa_variant(q, k, v, mapping="tile"), "h % H_kv"),
    "scaled by sqrt(d_v)": (lambda q, k, v: _gqa_variant(q, k, v, scale_by="v"), "sqrt(d_v)"),
    "not scaled": (lambda q, k, v: _gqa_variant(q, k, v, scale_by="none"), "not scaled"),
    "softmax over the queries": (lambda q, k, v: _gqa_variant(q, k, v, axis=-2),
                                 "over the queries"),
    "KV heads copied with np.repeat (right values)": (_by_copy(_repeat), "heads are copied"),
    "np.repeat, returning (output, weights)": (_by_copy(_repeat, True), "heads are copied"),
    "KV heads copied by a concatenation": (_by_copy(_concatenated), "heads are copied"),
    "broadcast_to(...).copy()": (_by_copy(_broadcast_copy), "heads are copied"),
    "the raw scores as the second element": (_with_second(lambda s, q: s / np.sqrt(q.shape[-1])),
                                             "scores, before the softmax"),
    "the unscaled scores as the second element": (_with_second(lambda s, q: s),
                                                  "unscaled scores"),
    "the weights left in groups (B, H_kv, group, N_q, N_k)":
        (lambda q, k, v: (gqa_reshape(q, k, v)[0],
                          gqa_reshape(q, k, v)[1].reshape(k.shape[0], k.shape[1], -1,
                                                          q.shape[2], k.shape[2])),
         "still grouped"),
    "query heads grouped (group, H_kv) instead of (H_kv, group)": (_groups_strided, None),
    "only the first KV head": (lambda q, k, v: _gqa_variant(q, k[:, :1], v[:, :1]), None),
    "only the first sequence of the batch": (lambda q, k, v: _gqa_variant(q[:1], k[:1], v[:1]),
                                             None),
}



@pytest.mark.parametrize("name", sorted(GQA_WRONG))
def test_check_gqa_rejects_and_names_the_mistake(capsys, name):
    wrong, hint = GQA_WRONG[name]
    assert not check.check_gqa(wrong)
    out = _out(capsys, every_line=True)
    assert "FAILED" in out
    if hint:
        assert hint in out


def test_check_gqa_measures_the_copy_on_its_last_case(capsys):
    assert not check.check_gqa(_by_copy(_repeat))
    out = _out(capsys, every_line=True)
    assert "case 7/7 FAILED" in out and "16.0 MiB" in out


def test_check_gqa_tile_is_caught_on_the_first_grouped_case(capsys):
    check.check_gqa(lambda q, k, v: _gqa_variant(q, k, v, mapping="tile"))
    assert "case 1/7 FAILED" in _out(capsys)


@pytest.mark.parametrize("weird", [
    lambda q, k, v: None, lambda q, k, v: (None, None), lambda q, k, v: q,
    lambda q, k, v: [1.0], lambda q, k: q,
])
def test_check_gqa_never_crashes(capsys, weird):
    assert not check.check_gqa(weird)
    assert "FAILED" in _out(capsys)


# --- check_kv_cache_bytes ---------------------------------------------------------

def test_check_kv_cache_bytes(capsys):
    assert check.check_kv_cache_bytes(
        lambda L, h, hd, n, b: 2 * L * h * hd * n * b)
    assert check.check_kv_cache_bytes(_kv_bytes)
    assert "all 5 cases passed" in _out(capsys)


# The wrong answers a learner plausibly writes, and the words of the hint that
# must name each.
KV_BYTES_WRONG = {
    "no factor 2 for keys and values": (lambda L, h, hd, n, b: L * h * hd * n * b,
                                        "keys AND values"),
    "bytes_per_number ignored (numbers, not bytes)": (lambda L, h, hd, n, b: 2 * L * h * hd * n,
                                                      "counts numbers, not bytes"),
    "2 bytes hard-coded": (lambda L, h, hd, n, b: 2 * L * h * hd * n * 2, "2 (bf16) used"),
    "4 bytes hard-coded": (lambda L, h, hd, n, b: 2 * L * h * hd * n * 4, "4 (float32) used"),
    "layers left out": (lambda L, h, hd, n, b: 2 * h * hd * n * b, "one layer's cache"),
    "kv_heads left out": (lambda L, h, hd, n, b: 2 * L * hd * n * b, "one KV head's cache"),
    "head_dim left out": (lambda L, h, hd, n, b: 2 * L * h * n * b, "head_dim numbers"),
    "n_tokens left out": (lambda L, h, hd, n, b: 2 * L * h * hd * b, "does not grow with n_tokens"),
    "in bits": (lambda L, h, hd, n, b: 16 * L * h * hd * n * b, "in bits"),
    "keys and values counted twice": (lambda L, h, hd, n, b: 4 * L * h * hd * n * b,
                                      "counted twice"),
    "in KiB": (lambda L, h, hd, n, b: 2 * L * h * hd * n * b / 1024, "in KiB"),
    "in MiB": (lambda L, h, hd, n, b: 2 * L * h * hd * n * b / 2 ** 20, "in MiB"),
    "in GiB": (lambda L, h, hd, n, b: 2 * L * h * hd * n * b / 2 ** 30, "in GiB"),
    "one token too many": (lambda L, h, hd, n, b: 2 * L * h * hd * (n + 1) * b, None),
    "4 KV heads per head": (lambda L, h, hd, n, b: 2 * L * 4 * h * hd * n * b, None),
}


@pytest.mark.parametrize("name", sorted(KV_BYTES_WRONG))
def test_check_kv_cache_bytes_names_the_mistake(capsys, name):
    wrong, hint = KV_BYTES_WRONG[name]
    assert not check.check_kv_cache_bytes(wrong)
    out = _out(capsys, every_line=True)
    assert "FAILED" in out
    if hint:
        assert hint in out
        assert out.count("hint:") == 1  # one mistake named, not two
    else:
        assert "hint:" not in out


def test_no_two_kv_bytes_mistakes_give_the_same_numbers_on_every_case():
    from attnbook.check.kv_cache import kv_cache_bytes_cases, kv_cache_bytes_mistakes
    cases = kv_cache_bytes_cases()
    rows = [[wrong(*c.args) for c in cases] for _, wrong in kv_cache_bytes_mistakes()]
    rows.append([c.expected for c in cases])
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            assert not np.allclose(a, b, rtol=1e-9, atol=0.5)


def test_check_kv_cache_bytes_never_crashes(capsys):
    for fn in (lambda L, h, hd, n, b: None,
               lambda L, h, hd, n, b: "1 GB",
               lambda L, h, hd, n: 0):
        assert not check.check_kv_cache_bytes(fn)
    assert "FAILED" in _out(capsys)


def test_the_checkers_are_exported_by_check():
    for name in ("check_rope", "check_gqa", "check_kv_cache_bytes", "check_cached_attention"):
        assert name in check.__all__ and callable(getattr(check, name))


def test_rope_mistakes_never_coincide_where_named():
    # on the first case where a mistake is wrong, no other gives its numbers
    from attnbook.check.rope import _rope_mistakes, rope_cases
    first = {}
    for case in rope_cases():
        forms = {m.hint: m.value for m in _rope_mistakes(case)}
        for hint, wrong in forms.items():
            if hint not in first and not np.allclose(wrong, case.expected):
                first[hint] = forms
    assert len(first) == len(_rope_mistakes(rope_cases()[0]))
    for hint, forms in first.items():
        for other, wrong in forms.items():
            assert other == hint or not np.allclose(wrong, forms[hint]), (hint, other)
