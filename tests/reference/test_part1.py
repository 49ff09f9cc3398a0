"""Part I helpers: the soft-lookup and temperature-softmax checkers, and the lookup figure."""

import numpy as np
import pytest

from attnbook import check, plots
from attnbook.check import softmax as check_softmax_part
from attnbook import reference as ref

# matplotlib is imported by the fixture below, not at collection: every xdist worker collects
# every module.
plt = None


@pytest.fixture(autouse=True, scope="module")
def _import_matplotlib():
    global plt
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


def stable(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- check_soft_lookup ---

def failed(cases, prefix):
    """The report line of the case whose label starts with prefix: 'case i/n FAILED: prefix'."""
    i = next(i for i, c in enumerate(cases, 1) if c.label.startswith(prefix))
    return f"case {i}/{len(cases)} FAILED: {prefix}"


def right_lookup(query, keys, values):
    return stable(keys @ query) @ values


def test_soft_lookup_passes_a_right_answer(capsys):
    assert check.check_soft_lookup(right_lookup)
    assert f"all {len(check_softmax_part.soft_lookup_cases())} cases passed" in capsys.readouterr().out


def test_soft_lookup_passes_the_reference():
    assert check.check_soft_lookup(lambda q, k, v: ref.softmax(k @ q) @ v)


def test_soft_lookup_fails_without_normalising(capsys):
    assert not check.check_soft_lookup(lambda q, k, v: np.exp(k @ q) @ v)
    out = capsys.readouterr().out
    assert failed(check_softmax_part.soft_lookup_cases(), "the query [3, 2, 0]") in out
    assert "expected:" in out and "your function returned:" in out


def test_soft_lookup_fails_with_naive_exp_on_large_scores(capsys):
    def naive(q, k, v):
        e = np.exp(k @ q)
        return (e / e.sum()) @ v

    assert not check.check_soft_lookup(naive)
    assert failed(check_softmax_part.soft_lookup_cases(), "large scores") in capsys.readouterr().out


def test_soft_lookup_fails_with_raw_scores_as_weights(capsys):
    assert not check.check_soft_lookup(lambda q, k, v: (k @ q) @ v)
    assert "FAILED" in capsys.readouterr().out


def test_soft_lookup_stub_not_done(capsys):
    def stub(q, k, v):
        raise NotImplementedError

    assert not check.check_soft_lookup(stub)
    assert "not done yet" in capsys.readouterr().out


# --- check_temperature_softmax ---

def right_softmax_t(x, t):
    if t == 0:
        hot = (x == x.max(axis=-1, keepdims=True)).astype(float)
        return hot / hot.sum(axis=-1, keepdims=True)
    return stable(x / t)


def test_temperature_softmax_passes_a_right_answer(capsys):
    assert check.check_temperature_softmax(right_softmax_t)
    assert f"all {len(check_softmax_part.temperature_softmax_cases())} cases passed" in capsys.readouterr().out


def test_temperature_softmax_passes_the_reference():
    assert check.check_temperature_softmax(lambda x, t: ref.softmax(x, temperature=t))


def test_temperature_softmax_multiplying_instead_of_dividing_fails(capsys):
    assert not check.check_temperature_softmax(lambda x, t: stable(x * t))
    assert f"case 2/{len(check_softmax_part.temperature_softmax_cases())} FAILED" in capsys.readouterr().out


def test_temperature_softmax_naive_overflows_at_small_t(capsys):
    def naive(x, t):
        if t == 0:
            return right_softmax_t(x, 0)
        e = np.exp(x / t)
        return e / e.sum(axis=-1, keepdims=True)

    assert not check.check_temperature_softmax(naive)
    # the first case where x / t overflows exp: the scores [100, 99, 90] at t = 1/8
    assert failed(check_softmax_part.temperature_softmax_cases(), "the scores [100, 99, 90] at t = 1/8") \
        in " ".join(capsys.readouterr().out.split())


def test_temperature_softmax_zero_division_is_reported(capsys):
    assert not check.check_temperature_softmax(lambda x, t: stable(x / t))
    out = capsys.readouterr().out
    assert failed(check_softmax_part.temperature_softmax_cases(), "t = 0, the limit") in out


def test_temperature_softmax_argmax_without_ties_fails_on_ties(capsys):
    def no_ties(x, t):
        if t == 0:
            return np.eye(x.shape[-1])[np.argmax(x, axis=-1)]
        return stable(x / t)

    assert not check.check_temperature_softmax(no_ties)
    assert failed(check_softmax_part.temperature_softmax_cases(), "t = 0 with a tie") in capsys.readouterr().out


def test_temperature_softmax_stub_not_done(capsys):
    def stub(x, t):
        raise NotImplementedError

    assert not check.check_temperature_softmax(stub)
    assert "not done yet" in capsys.readouterr().out


# --- lookup_figure ---

def test_lookup_figure_draws_three_panels_and_the_sum():
    w = np.array([0.0, 0.0, 0.5, 0.5])
    fig = plots.lookup_figure(["a", "b", "c", "d"], [0, 0, 10, 10], w, [175, 180, 166, 170],
                              query_label="girls", value_fmt="{:.1f}", value_name="height")
    axes = fig.axes
    assert len(axes) == 3
    assert "sum = 168.0" in axes[2].get_title()
    assert [t.get_text() for t in axes[0].get_yticklabels()][0] == "a (175.0)"
    assert "girls" in fig._suptitle.get_text()
    plt.close(fig)


def test_lookup_figure_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="one per key"):
        plots.lookup_figure(["a", "b"], [1, 2, 3], [0.5, 0.5], [1, 2])
