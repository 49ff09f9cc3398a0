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
    assert "all 6 cases passed" in _out(capsys)


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


def test_check_gqa_passes_right_answers(capsys):
    assert check.check_gqa(gqa_reshape)                     # a tuple
    assert check.check_gqa(lambda q, k, v: gqa_reshape(q, k, v)[0])
    assert check.check_gqa(ref.grouped_query_attention)
    assert check.check_gqa(lambda q, k, v: _gqa_variant(q, k, v))
    assert "all 6 cases passed" in _out(capsys)


@pytest.mark.parametrize("wrong,hint", [
    (lambda q, k, v: _gqa_variant(q, k, v, mapping="tile"), "h % H_kv"),
    (lambda q, k, v: _gqa_variant(q, k, v, scale_by="v"), "sqrt(d_v)"),
    (lambda q, k, v: _gqa_variant(q, k, v, scale_by="none"), "not scaled"),
    (lambda q, k, v: _gqa_variant(q, k, v, axis=-2), "over the queries"),
])
def test_check_gqa_rejects_and_names_the_mistake(capsys, wrong, hint):
    assert not check.check_gqa(wrong)
    out = _out(capsys, every_line=True)
    assert "FAILED" in out and hint in out


def test_check_gqa_rejects_other_wrong_answers(capsys):
    def groups_strided(q, k, v):  # (group, H_kv) instead of (H_kv, group)
        b, h_q, n, d = q.shape
        q5 = q.reshape(b, h_q // k.shape[1], k.shape[1], n, d)
        s = q5 @ np.swapaxes(k, -1, -2)[:, None] / np.sqrt(d)
        return (ref.softmax(s) @ v[:, None]).reshape(b, h_q, n, -1)

    def first_kv_head_only(q, k, v):
        return _gqa_variant(q, k[:, :1], v[:, :1])

    def first_batch_only(q, k, v):
        return _gqa_variant(q[:1], k[:1], v[:1])

    for fn in (groups_strided, first_kv_head_only, first_batch_only):
        assert not check.check_gqa(fn)
    assert "FAILED" in _out(capsys)


def test_check_gqa_tile_is_caught_on_the_first_grouped_case(capsys):
    check.check_gqa(lambda q, k, v: _gqa_variant(q, k, v, mapping="tile"))
    assert "case 1/6 FAILED" in _out(capsys)


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


@pytest.mark.parametrize("wrong,hint", [
    (lambda L, h, hd, n, b: L * h * hd * n * b, "keys AND values"),
    (lambda L, h, hd, n, b: 2 * L * h * hd * n, "in numbers, not bytes"),
    (lambda L, h, hd, n, b: 16 * L * h * hd * n * b, "in bits"),
    (lambda L, h, hd, n, b: 2 * L * h * hd * b, "does not grow with n_tokens"),
    (lambda L, h, hd, n, b: 2 * L * h * hd * n * b / 1024, "in KiB"),
    (lambda L, h, hd, n, b: 2 * L * h * hd * n * b / 2 ** 30, "in GiB"),
])
def test_check_kv_cache_bytes_names_the_mistake(capsys, wrong, hint):
    assert not check.check_kv_cache_bytes(wrong)
    out = _out(capsys, every_line=True)
    assert "FAILED" in out and hint in out


def test_check_kv_cache_bytes_other_wrong_answers(capsys):
    for fn in (lambda L, h, hd, n, b: 2 * L * h * hd * (n + 1) * b,
               lambda L, h, hd, n, b: 2 * L * 4 * h * hd * n * b,
               lambda L, h, hd, n, b: None,
               lambda L, h, hd, n, b: "1 GB"):
        assert not check.check_kv_cache_bytes(fn)
    assert "FAILED" in _out(capsys)


def test_the_checkers_are_exported_by_check():
    for name in ("check_rope", "check_gqa", "check_kv_cache_bytes"):
        assert name in check.__all__ and callable(getattr(check, name))
