"""Hygiene of the committed notebooks (nbval checks their outputs; this checks the rest)."""

import json
import re
from pathlib import Path

import pytest

from attnbook.nbtools import WIDGET_MIME

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks in chapters/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_executed_in_order_without_errors(path):
    nb = load(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    counts = [c["execution_count"] for c in code]
    assert None not in counts, f"{path.name}: some code cells were never executed: run `make outputs`"
    assert counts == list(range(1, len(code) + 1)), f"{path.name}: cells were not run top to bottom once"
    for c in code:
        for o in c["outputs"]:
            assert o["output_type"] != "error" or "raises-exception" in c["metadata"].get("tags", []), \
                f"{path.name}: an error output"
            assert o.get("name") != "stderr", f"{path.name}: output on stderr (a warning?): {o.get('text')}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_widget_state_and_widget_cells_tagged(path):
    """Only the live figures (attnbook.live) keep widget state: they run without a kernel."""
    nb = load(path)
    state = nb["metadata"].get("widgets", {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state", {})
    assert "widgets" not in nb["metadata"] or state, f"{path.name}: empty widget state: run `make outputs`"
    shown = set()
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        tags = c["metadata"].get("tags", [])
        for o in c["outputs"]:
            if WIDGET_MIME in o.get("data", {}):
                model = state.get(o["data"][WIDGET_MIME]["model_id"], {})
                assert model.get("model_module") == "anywidget" and "live-figure" in tags, \
                    f"{path.name}: a stored widget output that is not a live figure: run `make outputs`"
                assert "nbval-ignore-output" in tags, f"{path.name}: a live figure needs nbval-ignore-output"
                shown.add(o["data"][WIDGET_MIME]["model_id"])
        if re.search(r"\b(float_slider|interact|interactive)\(", "".join(c["source"])):
            assert "nbval-ignore-output" in tags and "remove-output" in tags, \
                f"{path.name}: a widget cell needs the nbval-ignore-output and remove-output tags"
    anywidgets = {mid for mid, m in state.items() if m.get("model_module") == "anywidget"}
    assert anywidgets == shown, f"{path.name}: widget state of figures not shown: run `make outputs`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_has_source_note_summary_and_exercises(path):
    text = "\n".join("".join(c["source"]) for c in load(path)["cells"] if c["cell_type"] == "markdown")
    assert "Source" in text, f"{path.name}: no Source note"
    assert "## Summary" in text, f"{path.name}: no Summary section"
    assert "{exercise}" in text and "{solution-start}" in text, f"{path.name}: no exercises with solutions"
    assert ":class: dropdown" in text, f"{path.name}: solutions should be collapsed"
