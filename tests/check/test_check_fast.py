"""The checker of "Making attention fast": check_merge_states accepts right
merges and rejects, with a hint, the wrong merges a learner plausibly writes;
it never crashes on odd return values."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref


def right(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def right_as_list(a, b):
    return [np.asarray(t).tolist() for t in right(a, b)]


def no_rescale(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    return np.maximum(m_a, m_b), l_a + l_b, o_a + o_b


def old_sum_not_rescaled(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    be = np.exp(m_b - np.where(np.isinf(m), 0.0, m))
    return m, l_a + be * l_b, o_a + be[..., None] * o_b


def flipped_exponent(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(safe - m_a), np.exp(safe - m_b)
    return m, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def max_not_updated(a, b):
    m, l, o = right(a, b)
    return a[0], l, o


def rescaled_to_old_max(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    f = np.exp(m_b - np.where(np.isinf(m_a), 0.0, m_a))
    return m_a, l_a + f * l_b, o_a + f[..., None] * o_b


def divided_too_early(a, b):
    m, l, o = right(a, b)
    return m, l, o / l[..., None]


def nan_on_empty(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    al, be = np.exp(m_a - m), np.exp(m_b - m)  # nan where both are -inf
    return m, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def minimum(a, b):
    m, l, o = right(a, b)
    return np.minimum(a[0], b[0]), l, o


def no_batch(a, b):  # works on one sequence only: transposes o
    m, l, o = right(a, b)
    return m, l, np.swapaxes(o, -1, -2) if o.ndim == 3 else o


def one_max_for_all_rows(a, b):  # max() of the arrays: a single number
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    g = max(np.max(m_a), np.max(m_b))
    al, be = np.exp(m_a - g), np.exp(m_b - g)
    return g, al * l_a + be * l_b, al[..., None] * o_a + be[..., None] * o_b


def rescaled_to_global_max(a, b):  # m per row, but the factors use one max
    m, l, o = one_max_for_all_rows(a, b)
    return np.maximum(a[0], b[0]), l, o


def no_new_axis(a, b):  # alpha * o_a without [..., None]
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, al * l_a + be * l_b, al * o_a + be * o_b


def new_axis_second(a, b):  # [:, None]: right without a batch axis only
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    safe = np.where(np.isinf(m), 0.0, m)
    al, be = np.exp(m_a - safe), np.exp(m_b - safe)
    return m, al * l_a + be * l_b, al[:, None] * o_a + be[:, None] * o_b


def test_right_answers_pass(capsys):
    assert check.check_merge_states(right)
    assert check.check_merge_states(right_as_list)
    out = capsys.readouterr().out
    assert out.count("all 6 cases passed") == 2


def test_the_reference_passes():
    assert check.check_merge_states(ref.merge_attention_states)


@pytest.mark.parametrize("fn,hint", [
    (no_rescale, "nothing is rescaled"),
    (old_sum_not_rescaled, "only block b is rescaled"),
    (flipped_exponent, "the exponent is flipped"),
    (max_not_updated, "not m_a"),
    (rescaled_to_old_max, "rescaled to m_a"),
    (divided_too_early, "divided by l already"),
    (nan_on_empty, "exp(-inf - (-inf)) is nan"),
    (minimum, "the minimum was taken"),
    (no_batch, "wrong shape"),
    (one_max_for_all_rows, "each query (row) has its own maximum"),
    (rescaled_to_global_max, "rescaled to one maximum for all the rows"),
    (no_new_axis, "give a factor a last axis"),
    (new_axis_second, "[:, None] the new axis lands in the wrong place"),
])
def test_wrong_merges_are_rejected_with_a_hint(fn, hint, capsys):
    assert not check.check_merge_states(fn)
    out = capsys.readouterr().out
    assert "FAILED" in out
    assert hint in " ".join(out.split())  # hints are wrapped over lines
    assert max(len(line) for line in out.splitlines()) <= 79


@pytest.mark.parametrize("fn,words", [
    (lambda a, b: None, "return a tuple (m, l, o)"),
    (lambda a, b: (1.0, 2.0), "of length 2"),
    (lambda a, b: ("x", "y", "z"), "not an array of numbers"),
    (lambda a, b: (a[0], a[1], [[1, 2], [3]]), "not an array of numbers"),
    (lambda a, b: right(a, b)[0], "return a tuple"),
    (lambda a, b: 1 / 0, "ZeroDivisionError"),
])
def test_odd_returns_do_not_crash_the_checker(fn, words, capsys):
    assert not check.check_merge_states(fn)
    assert words in capsys.readouterr().out


def test_stub_is_not_done_yet(capsys):
    def stub(a, b):
        raise NotImplementedError

    assert not check.check_merge_states(stub)
    assert "not done yet" in capsys.readouterr().out


def test_the_checker_does_not_let_the_learner_change_its_cases():
    def vandal(a, b):
        a[1][...] = 0
        return right(a, b)

    check.check_merge_states(vandal)
    assert check.check_merge_states(right)


# --- check_attention_flops -------------------------------------------------

def flops_right(B, H, N, d, causal=False):
    return 4 * B * H * d * (N * (N + 1) // 2 if causal else N * N)


@pytest.mark.parametrize("fn,hint", [
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, d, causal) // 2, "half the answer"),
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, d, causal) // 4,
     "a quarter of the answer"),
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, d, causal) * 2,
     "twice the answer"),
    (lambda B, H, N, d, causal=False: flops_right(B, H, N, 1, causal),
     "the width d is missing"),
    (lambda B, H, N, d, causal=False: flops_right(1, H, N, d, causal), "the batch B is missing"),
    (lambda B, H, N, d, causal=False: flops_right(B, 1, N, d, causal), "the heads H are missing"),
    (lambda B, H, N, d, causal=False: 4 * B * H * N * N * d, "query i sees i + 1 keys"),
    (lambda B, H, N, d, causal=False: 4 * B * H * N * N * d / (2 if causal else 1), "not N^2 / 2"),
    (lambda B, H, N, d, causal=False: 4 * B * H * d * (N * (N - 1) // 2 if causal else N * N),
     "not N(N-1)/2"),
])
def test_wrong_flop_counts_are_rejected_with_a_hint(fn, hint, capsys):
    assert not check.check_attention_flops(fn)
    out = capsys.readouterr().out
    assert hint in " ".join(out.split())
    assert max(len(line) for line in out.splitlines()) <= 79


@pytest.mark.parametrize("fn,words", [
    (lambda B, H, N, d, causal=False: None, "return one number"),
    (lambda B, H, N, d, causal=False: [1, 2], "return one number"),
    (lambda B, H, N, d: 4 * B * H * N * N * d, "TypeError"),
    (lambda B, H, N, d, is_causal=False: 4 * B * H * N * N * d,
     "name the last parameter causal"),
    (lambda B, H, N, d, causal=False: str(flops_right(B, H, N, d, causal)),
     "return one number"),
])
def test_flop_checker_survives_odd_answers(fn, words, capsys):
    assert not check.check_attention_flops(fn)
    assert words in " ".join(capsys.readouterr().out.split())


def test_right_flop_counts_pass(capsys):
    assert check.check_attention_flops(flops_right)
    assert check.check_attention_flops(
        lambda B, H, N, d, causal=False: float(flops_right(B, H, N, d, causal)))
    assert "all 6 cases passed" in capsys.readouterr().out


def test_causal_pairs_without_the_half_get_the_causal_hint(capsys):
    # N(N+1) pairs is twice the answer on the causal cases only: the hint names the
    # pairs, not a product counted twice (issue 21)
    assert not check.check_attention_flops(
        lambda B, H, N, d, causal=False: 4 * B * H * d * (N * (N + 1) if causal else N * N))
    out = " ".join(capsys.readouterr().out.split())
    assert "not N(N+1)" in out and "each of the two products costs" not in out
    assert out.count("hint:") == 1


# --- check_causal_tiles (page 17b) -------------------------------------------

from attnbook.check import fast as fast_checks  # noqa: E402


def tiles_right(n_q, n_k, block_q, block_k):
    total = 0
    for i0 in range(0, n_q, block_q):
        last = n_k - n_q + min(i0 + block_q, n_q) - 1
        total += sum(1 for j0 in range(0, n_k, block_k) if j0 <= last)
    return total


def _tiles(last_of, stop=lambda j0, last: j0 > last, floor=False):
    def count(n_q, n_k, block_q, block_k):
        n_blocks = n_q // block_q if floor else -(-n_q // block_q)
        total = 0
        for b in range(n_blocks):
            last = last_of(b * block_q, n_q, n_k, block_q)
            total += sum(1 for j0 in range(0, n_k, block_k) if not stop(j0, last))
        return total
    return count


def _bottom_right(i0, n_q, n_k, block_q):
    return n_k - n_q + min(i0 + block_q, n_q) - 1


def _no_guard(n_q, n_k, block_q, block_k):
    return sum(_bottom_right(i0, n_q, n_k, block_q) // block_k + 1
               for i0 in range(0, n_q, block_q))


WRONG_TILE_COUNTS = [
    (lambda n_q, n_k, bq, bk: (-(-n_q // bq)) * (-(-n_q // bq) + 1) // 2, "T(T+1)/2 holds only"),
    (lambda n_q, n_k, bq, bk: (-(-n_q // bq)) * (-(-n_k // bk)), "that is every tile"),
    (lambda n_q, n_k, bq, bk: (-(-n_q // bq)) * (-(-n_k // bk)) - tiles_right(n_q, n_k, bq, bk),
     "the number of tiles skipped"),
    (_tiles(lambda i0, n_q, n_k, bq: min(i0 + bq, n_q) - 1), "the causal mask is bottom-right"),
    (_tiles(_bottom_right, stop=lambda j0, last: j0 >= last), "j0 > last, not j0 >= last"),
    (_tiles(lambda i0, n_q, n_k, bq: n_k - n_q + i0), "the block's last query, not its first"),
    (_tiles(_bottom_right, floor=True), "the number of blocks rounds up"),
    (_no_guard, "computes no tile"),
]


@pytest.mark.parametrize("fn,hint", WRONG_TILE_COUNTS)
def test_wrong_tile_counts_are_rejected_with_their_own_hint(fn, hint, capsys):
    assert not check.check_causal_tiles(fn)
    out = capsys.readouterr().out
    assert hint in " ".join(out.split())
    assert out.count("hint:") == 1  # the sizes keep two mistakes from coinciding
    assert max(len(line) for line in out.splitlines()) <= 79


def test_tile_counts_right_pass_and_odd_answers_do_not_crash(capsys):
    assert check.check_causal_tiles(tiles_right)
    assert check.check_causal_tiles(fast_checks.causal_tiles_reference)
    assert "all 6 cases passed" in capsys.readouterr().out
    assert not check.check_causal_tiles(lambda *a: [3])
    assert "return one whole number" in " ".join(capsys.readouterr().out.split())
    assert not check.check_causal_tiles(lambda *a: True)
    assert "return one whole number" in " ".join(capsys.readouterr().out.split())


def test_the_tile_count_agrees_with_the_answer_keys_own_skip():
    # flash_attention computes the key blocks j0 <= last of each query block: count its tiles
    for args in fast_checks._TILE_CASES:
        assert fast_checks.causal_tiles_reference(*args) == tiles_right(*args)


# --- check_flash_backward (page 17c) -----------------------------------------

def backward_right(q, k, v, o, lse, d_out, block_q, block_k, causal=False):
    n_q, d = q.shape
    n_k = len(k)
    D = (d_out * o).sum(axis=1)
    lse = np.where(lse == -np.inf, 0.0, lse)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    for i in range(0, n_q, block_q):
        i1 = min(i + block_q, n_q)
        pos = n_k - n_q + np.arange(i, i1)
        for j in range(0, n_k, block_k):
            if causal and j > pos[-1]:
                break
            j1 = min(j + block_k, n_k)
            s = q[i:i1] @ k[j:j1].T / np.sqrt(d)
            if causal:
                s = np.where(np.arange(j, j1) <= pos[:, None], s, -np.inf)
            p = np.exp(s - lse[i:i1, None])
            dv[j:j1] += p.T @ d_out[i:i1]
            ds = p * (d_out[i:i1] @ v[j:j1].T - D[i:i1, None])
            dq[i:i1] += ds @ k[j:j1] / np.sqrt(d)
            dk[j:j1] += ds.T @ q[i:i1] / np.sqrt(d)
    return dq, dk, dv


def _with(**switch):
    def wrong(q, k, v, o, lse, d_out, block_q, block_k, causal=False):
        return fast_checks.flash_backward_rows(q, k, v, o, lse, d_out, block_q, block_k,
                                               causal, **switch)
    return wrong


def _dense_no_d(q, k, v, o, lse, d_out, block_q, block_k, causal=False):
    # written independently of flash_backward_rows: the whole matrix, dS = P * dP
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        s = np.where(ref.causal_mask(len(q), len(k)), s, -np.inf)
    p = np.exp(s - np.where(np.isneginf(lse), 0.0, lse)[:, None])
    ds = p * (d_out @ v.T)
    return ds @ k / np.sqrt(q.shape[1]), ds.T @ q / np.sqrt(q.shape[1]), p.T @ d_out


WRONG_BACKWARDS = [
    (_dense_no_d, "D is missing"),
    (_with(no_d=True), "D is missing"),
    (_with(weights="raw"), "the weights are not normalised"),
    (_with(weights="tile"), "the tile's own maximum"),
    (_with(scale=1.0), "the scale is missing in dq and dk"),
    (_with(scale=0.25), "dq and dk are divided by d"),
    (_with(stop="first"), "the causal stop is one block early"),
    (_with(stop="whole"), "a key block that crosses the diagonal is still needed"),
    (_with(stop="top-left"), "the causal mask is bottom-right"),
    (_with(guard=False), "exp(-inf - (-inf)) is nan"),
    (lambda *a, **kw: backward_right(*a, **kw)[::-1], "in another order"),
]


@pytest.mark.parametrize("fn,hint", WRONG_BACKWARDS)
def test_wrong_backward_passes_are_rejected_with_their_own_hint(fn, hint, capsys):
    with np.errstate(all="ignore"):
        assert not check.check_flash_backward(fn)
    out = capsys.readouterr().out
    assert hint in " ".join(out.split()), out
    assert out.count("hint:") == 1
    assert max(len(line) for line in out.splitlines()) <= 79


def test_right_backward_passes(capsys):
    assert check.check_flash_backward(backward_right)
    assert check.check_flash_backward(
        lambda *a, **kw: fast_checks.flash_backward_rows(*a, **kw))
    assert "right in all 6 cases" in capsys.readouterr().out


@pytest.mark.parametrize("fn,words", [
    (lambda *a, **kw: None, "return a tuple (dq, dk, dv)"),
    (lambda *a, **kw: backward_right(*a, **kw)[:2], "of length 2"),
    (lambda q, k, v, o, lse, d_out, block_q, block_k: None, "TypeError"),
])
def test_backward_checker_survives_odd_answers(fn, words, capsys):
    assert not check.check_flash_backward(fn)
    assert words in " ".join(capsys.readouterr().out.split())


def test_backward_stub_is_not_done_yet(capsys):
    def stub(*a, **kw):
        raise NotImplementedError
    assert not check.check_flash_backward(stub)
    assert "not done yet" in capsys.readouterr().out
