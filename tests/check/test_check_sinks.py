"""The checkers of chapter 19: the answer key passes; every listed wrong
answer fails with its own hint; no two mistakes give the same numbers on
every case."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check import sinks as check_sinks

from checker_hints import assert_its_hint, run


def test_answer_keys_pass():
    assert run(check.check_attention_with_sinks, ref.attention_with_sinks)[0]
    assert run(check.check_reach_after_layers, ref.reach_after_layers)[0]


# The wrong answers of attention_with_sinks, by the words of their hints.
SINK_MISTAKES = {
    "sink left out (rows sum to 1)": "the sink is missing",
    "sink added to the values": "the sink has no value",
    "one sink logit for all heads (not per head)": "the same sink logit",
    "one sink for all heads, sinks.mean()": "sinks.mean()",
    "sinks of the wrong heads": "reversed along",
    "scores not scaled": "not scaled",
    "sink column kept in the weights": "still have the sink's column",
    "row maximum over the keys only (nan on a fully masked row)": "maximum was taken over",
    "mask applied after the softmax": "after the softmax",
    "no row maximum (exp overflows)": "exp overflowed",
    "mask multiplied into the scores (0, not -inf)": "multiplied by the mask",
}


@pytest.mark.parametrize("index", range(len(SINK_MISTAKES)), ids=list(SINK_MISTAKES))
def test_attention_with_sinks_rejects_each_mistake_with_its_hint(index):
    assert_its_hint(check.check_attention_with_sinks, check_sinks.attention_with_sinks_mistakes(), SINK_MISTAKES, index)


REACH_MISTAKES = {
    "window off by one (W back per layer, not W - 1)": "one too far back",
    "no clamp at position 0": "below 0",
    "a full layer counted as sliding": "a full layer was counted",
    "reach does not grow with the layers": "does not grow",
    "distance instead of position": "how far back",
    "off by one once (the first layer only), not per layer": "in all, not one per layer",
    "only the last layer checked for full (full layer first)": "only the last layer",
    "an empty stack returns 0": "an empty stack returned 0",
    "the full layer skipped (sliding layers counted only)": "the full layer was skipped",
}


@pytest.mark.parametrize("index", range(len(REACH_MISTAKES)), ids=list(REACH_MISTAKES))
def test_reach_rejects_each_mistake_with_its_hint(index):
    report = assert_its_hint(check.check_reach_after_layers, check_sinks.reach_mistakes(),
                             REACH_MISTAKES, index, only=False)
    # a wrong hint is worse than none: the empty stack and the first-layer
    # off-by-one were told "distance returned" before (issue 33)
    if index != list(REACH_MISTAKES).index("distance instead of position"):
        assert "how far back" not in " ".join(report.split()), report


def test_reach_checker_has_a_stack_with_the_full_layer_first():
    """A rule that looks only at the last layer for a full one passed every
    case before (issue 33): a full layer first, sliding layers after it."""
    def last_only(p, t, w):
        return 0 if t and t[-1] == "full" else max(0, p - len(t) * (w - 1))
    assert not run(check.check_reach_after_layers, last_only)[0]


def _results(fn, cases):
    out = []
    for case in cases:
        try:
            with np.errstate(all="ignore"):
                got = fn(*case.args, **case.kwargs)
        except Exception as exc:  # noqa: BLE001
            got = repr(exc)
        out.append(got)
    return out


def _same(a, b):
    try:
        return all(np.allclose(np.asarray(x[0] if isinstance(x, tuple) else x, float),
                               np.asarray(y[0] if isinstance(y, tuple) else y, float),
                               equal_nan=True) for x, y in zip(a, b))
    except (ValueError, TypeError):
        return False


@pytest.mark.parametrize("cases, mistakes", [
    (check_sinks.attention_with_sinks_cases, check_sinks.attention_with_sinks_mistakes),
    (check_sinks.reach_cases, check_sinks.reach_mistakes),
], ids=["attention_with_sinks", "reach_after_layers"])
def test_no_two_mistakes_agree_on_every_case(cases, mistakes):
    cs = cases()
    results = [_results(m.fn, cs) for m in mistakes()]
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            if {i, j} == {0, 6}:
                continue  # same outputs, told apart by the weights' shape
            assert not _same(results[i], results[j]), (i, j)


def test_a_checker_survives_a_function_that_raises():
    def broken(*args, **kwargs):
        raise RuntimeError("boom")
    passed, report = run(check.check_attention_with_sinks, broken)
    assert not passed and "boom" in report
