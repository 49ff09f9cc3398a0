"""Plot helpers draw what they claim and refuse bad input; the widget helper builds a slider."""

import numpy as np
import pytest

from attnbook import plots, widgets

# matplotlib is imported by the fixture below, not at collection: every xdist worker collects
# every module.
plt = None


@pytest.fixture(autouse=True, scope="module")
def _import_matplotlib():
    global plt
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_book_style_gives_opaque_white_figures():
    plots.use_book_style()
    fig = plt.figure()
    assert fig.get_facecolor() == (1.0, 1.0, 1.0, 1.0)


def test_heatmap_labels_and_hidden_cells():
    w = np.array([[1.0, 0.0], [0.4, 0.6]])
    hidden = np.array([[False, True], [False, False]])
    ax = plots.attention_heatmap(w, ["a", "b"], ["x", "y"], hidden=hidden, title="weights")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    texts = [t.get_text() for t in ax.texts]
    assert "hidden" in texts and "0.40" in texts and "1.00" in texts
    assert any(p.get_hatch() == "///" for p in ax.patches)
    assert ax.get_title() == "weights"


def test_heatmap_marks_neg_inf():
    ax = plots.heatmap(np.array([[1.0, -np.inf]]), ["q"], ["k1", "k2"])
    assert "-inf" in [t.get_text() for t in ax.texts]


def test_heatmap_rejects_wrong_label_count_and_rank():
    with pytest.raises(ValueError, match="2 labels for 3 rows"):
        plots.heatmap(np.zeros((3, 3)), ["a", "b"], ["x", "y", "z"])
    with pytest.raises(ValueError, match="2-D"):
        plots.heatmap(np.zeros(3))


def test_weight_bars_and_small_multiples():
    ax = plots.weight_bars([0.2, 0.8], ["a", "b"], title="t")
    assert len(ax.patches) == 2 and "0.800" in [t.get_text() for t in ax.texts]
    seen = []
    fig = plots.small_multiples(lambda ax, v: seen.append(v), [1, 2, 3], ncols=2)
    assert seen == [1, 2, 3]
    assert sum(ax.get_visible() for ax in fig.axes) == 3
    with pytest.raises(ValueError, match="at least one"):
        plots.small_multiples(lambda ax, v: None, [])


def test_float_slider_calls_draw_with_the_value():
    calls = []
    ui = widgets.float_slider(calls.append, "s", min=0.0, max=1.0, step=0.1, value=0.5)
    slider = ui.children[0]
    slider.value = 0.7
    assert calls[-1] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="outside"):
        widgets.float_slider(calls.append, "s", min=0.0, max=1.0, step=0.1, value=2.0)
