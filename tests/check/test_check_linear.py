"""The checker of chapter 22: the answer key passes; every listed wrong
answer fails with its own hint; no two mistakes give the same result on
every case; an update in place is caught."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check import linear as check_linear

from checker_hints import assert_its_hint, run


def test_answer_key_passes():
    assert run(check.check_delta_rule_step, ref.delta_rule_step)[0]


# The wrong answers of delta_rule_step, by the words of their hints.
STEP_MISTAKES = {
    "no gate": "was not decayed",
    "gate after the update": "decayed AFTER the update",
    "g instead of exp(g)": "multiplied by g itself",
    "beta on the value only": "beta multiplied the value only",
    "no correction (plain linear attention)": "nothing was subtracted",
    "output from the old state": "BEFORE this token's update",
    "output from the decayed, not yet updated state": "read from the decayed state",
    "query not scaled": "the query was not scaled",
    "output divided by sqrt(d_v)": "divided by sqrt(d_v)",
}


@pytest.mark.parametrize("index", range(len(STEP_MISTAKES)), ids=list(STEP_MISTAKES))
def test_delta_rule_step_rejects_each_mistake_with_its_hint(index):
    assert_its_hint(check.check_delta_rule_step, check_linear.delta_step_mistakes(), STEP_MISTAKES, index)


def test_no_two_mistakes_agree_on_every_case():
    cases = check_linear.delta_step_cases()
    results = [[m.fn(*c.args) for c in cases] for m in check_linear.delta_step_mistakes()]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            same = all(np.allclose(a[0], b[0]) and np.allclose(a[1], b[1])
                       for a, b in zip(results[i], results[j]))
            assert not same, (i, j)


def test_an_update_in_place_is_named():
    def in_place(state, q, k, v, g, beta):
        state *= np.exp(g)[..., None, None]
        return ref.delta_rule_step(state, q, k, v, np.zeros_like(g), beta)
    passed, report = run(check.check_delta_rule_step, in_place)
    assert not passed and "in place" in report


def test_the_whole_recurrence_is_the_step_repeated():
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, 2, 7, 3))
    v, g, beta = rng.normal(size=(2, 7, 4)), -rng.uniform(size=(2, 7)), rng.uniform(size=(2, 7))
    out, state = ref.gated_delta_rule(q, k, v, g, beta)
    s = np.zeros((2, 3, 4))
    for t in range(7):
        o, s = ref.delta_rule_step(s, q[:, t], k[:, t], v[:, t], g[:, t], beta[:, t])
        np.testing.assert_allclose(o, out[:, t], atol=1e-14)
    np.testing.assert_allclose(s, state, atol=1e-14)


def test_a_checker_survives_a_function_that_raises():
    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    passed, report = run(check.check_delta_rule_step, broken)
    assert not passed and "boom" in report


HYBRID_MISTAKES = {
    "state grows with the context": "multiplied by the context",
    "states left out": "states are missing",
    "a cache in every layer": "every layer got a KV cache",
    "every layer full (dense)": "counted as a full layer",
    "full and linear swapped": "were swapped",
}


def test_hybrid_answer_passes():
    def hybrid_bytes(n, layer_types, kv_per_token, state_bytes):
        full = layer_types.count("full")
        return full * kv_per_token * n + (len(layer_types) - full) * state_bytes
    assert run(check.check_hybrid_bytes, hybrid_bytes)[0]


@pytest.mark.parametrize("index", range(len(HYBRID_MISTAKES)), ids=list(HYBRID_MISTAKES))
def test_hybrid_bytes_rejects_each_mistake_with_its_hint(index):
    assert_its_hint(check.check_hybrid_bytes, check_linear.hybrid_mistakes(), HYBRID_MISTAKES, index)


def test_no_two_hybrid_mistakes_agree_on_every_case():
    cases = check_linear.hybrid_cases()
    results = [[m.fn(*c.args) for c in cases] for m in check_linear.hybrid_mistakes()]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            assert results[i] != results[j], (i, j)


@pytest.mark.parametrize("answer", [None, "x", np.zeros(3), (np.zeros(2), np.zeros(2)), np.nan],
                         ids=["None", "str", "wrong shape", "pair", "nan"])
@pytest.mark.parametrize("checker", ["check_delta_rule_step", "check_hybrid_bytes",
                                     "check_topk_mask"])
def test_no_checker_of_part8_crashes_on_a_strange_answer(checker, answer):
    passed, report = run(getattr(check, checker), lambda *a, **k: answer)
    assert not passed and "FAILED" in report
