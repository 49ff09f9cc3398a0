"""check_absorbed_scores (the MLA chapter) passes the right answer, in both return
forms, and rejects each wrong answer a learner plausibly writes, naming it."""

import numpy as np
import pytest

from attnbook import check


def right(q_nope, q_rope, c_kv, k_rope, w_uk):
    q_lat = q_nope @ np.swapaxes(w_uk, -1, -2)
    return (q_lat @ c_kv.T + q_rope @ k_rope.T) / np.sqrt(q_nope.shape[-1] + q_rope.shape[-1])


def einsum_absorbed(q_nope, q_rope, c_kv, k_rope, w_uk):
    """Right, in one einsum (absorbed when optimized: no per-head keys)."""
    s = np.einsum("...nd,...rd,tr->...nt", q_nope, w_uk, c_kv, optimize=True)
    return (s + q_rope @ k_rope.T) / np.sqrt(q_nope.shape[-1] + q_rope.shape[-1])


def naive(q_nope, q_rope, c_kv, k_rope, w_uk):
    """The naive form: the keys rebuilt from the latents. Same numbers."""
    k_nope = c_kv @ w_uk  # (..., T, d_nope)
    s = q_nope @ np.swapaxes(k_nope, -1, -2) + q_rope @ k_rope.T
    return s / np.sqrt(q_nope.shape[-1] + q_rope.shape[-1])


def naive_per_head(q_nope, q_rope, c_kv, k_rope, w_uk):
    if w_uk.ndim == 2:
        return naive(q_nope, q_rope, c_kv, k_rope, w_uk)
    return np.stack([naive(q_nope[h], q_rope[h], c_kv, k_rope, w_uk[h]) for h in range(len(w_uk))])


def test_right_answer_passes_alone_and_in_a_tuple(capsys):
    assert check.check_absorbed_scores(right)
    assert check.check_absorbed_scores(lambda *a: (right(*a), None))
    assert check.check_absorbed_scores(einsum_absorbed)
    assert "all 5 cases passed" in capsys.readouterr().out


def _scale(a):
    return np.sqrt(a[0].shape[-1] + a[1].shape[-1])


WRONG = {
    "no RoPE part": (lambda qn, qr, c, kr, w: (qn @ np.swapaxes(w, -1, -2)) @ c.T / _scale((qn, qr)),
                     "RoPE part"),
    "only the RoPE part": (lambda qn, qr, c, kr, w: qr @ kr.T / _scale((qn, qr)), "only the RoPE part"),
    "no scale": (lambda qn, qr, c, kr, w: (qn @ np.swapaxes(w, -1, -2)) @ c.T + qr @ kr.T, "not scaled"),
    "sqrt(d_nope)": (lambda qn, qr, c, kr, w: ((qn @ np.swapaxes(w, -1, -2)) @ c.T + qr @ kr.T)
                     / np.sqrt(qn.shape[-1]), "sqrt(d_nope) only"),
    "sqrt(r_kv + d_rope)": (lambda qn, qr, c, kr, w: ((qn @ np.swapaxes(w, -1, -2)) @ c.T + qr @ kr.T)
                            / np.sqrt(c.shape[-1] + qr.shape[-1]), "width of the latent"),
    "no square root": (lambda qn, qr, c, kr, w: ((qn @ np.swapaxes(w, -1, -2)) @ c.T + qr @ kr.T)
                       / (qn.shape[-1] + qr.shape[-1]), "square root"),
    "sqrt(d_rope)": (lambda qn, qr, c, kr, w: ((qn @ np.swapaxes(w, -1, -2)) @ c.T + qr @ kr.T)
                     / np.sqrt(qr.shape[-1]), "sqrt(d_rope) only"),
    "sqrt(r_kv)": (lambda qn, qr, c, kr, w: ((qn @ np.swapaxes(w, -1, -2)) @ c.T + qr @ kr.T)
                   / np.sqrt(c.shape[-1]), "sqrt(r_kv), the width"),
    "each part scaled by its own width": (
        lambda qn, qr, c, kr, w: (qn @ np.swapaxes(w, -1, -2)) @ c.T / np.sqrt(qn.shape[-1])
        + qr @ kr.T / np.sqrt(qr.shape[-1]), "its own width"),
    "RoPE part not scaled": (
        lambda qn, qr, c, kr, w: (qn @ np.swapaxes(w, -1, -2)) @ c.T / _scale((qn, qr)) + qr @ kr.T,
        "only the latent part is scaled"),
    "softmax weights, not scores": (
        lambda *a: (lambda s: np.exp(s) / np.exp(s).sum(-1, keepdims=True))(right(*a)),
        "softmax weights"),
    "w_uk.T on a head axis (reverses all axes)": (
        lambda qn, qr, c, kr, w: ((qn @ w.T) @ c.T + qr @ kr.T) / _scale((qn, qr)),
        "np.swapaxes(w_uk, -1, -2)"),
    "W_uk not transposed": (lambda qn, qr, c, kr, w: ((qn @ w) @ c.T + qr @ kr.T) / _scale((qn, qr)),
                            "transposed"),
    "one head only (ignores the head axis)": (
        lambda qn, qr, c, kr, w: right(qn.reshape(-1, qn.shape[-1])[: qn.shape[-2]],
                                       qr.reshape(-1, qr.shape[-1])[: qr.shape[-2]], c, kr,
                                       w.reshape(-1, *w.shape[-2:])[0]),
        None),
    "keys as rows of the scores (transposed result)": (lambda *a: np.swapaxes(right(*a), -1, -2), None),
    "the naive form: all heads' keys rebuilt (right numbers)": (naive, "this is the naive form"),
    "the naive form, one head at a time (right numbers)": (naive_per_head, "this is the naive form"),
}


def test_the_naive_form_fails_on_the_memory_case_only(capsys):
    assert not check.check_absorbed_scores(naive)
    out = capsys.readouterr().out
    assert "case 5/5 FAILED" in out and "4.0 MiB" in out


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_answers_are_rejected_and_named(name, capsys):
    fn, hint = WRONG[name]
    assert not check.check_absorbed_scores(fn)
    out = capsys.readouterr().out
    assert "FAILED" in out
    if hint:
        assert "hint" in out and hint in " ".join(out.split())


@pytest.mark.parametrize("bad", [None, "scores", 3.0, {"a": 1}, [np.ones(2), np.ones((3, 3))]])
def test_odd_return_values_are_reported_not_raised(bad, capsys):
    assert not check.check_absorbed_scores(lambda *a: bad)
    assert "FAILED" in capsys.readouterr().out


def test_a_stub_is_not_done_yet(capsys):
    def stub(*a):
        raise NotImplementedError
    assert not check.check_absorbed_scores(stub)
    assert "not done yet" in capsys.readouterr().out
