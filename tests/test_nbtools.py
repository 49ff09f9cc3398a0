"""`make outputs` tidying: widget state and widget outputs are removed, nothing else."""

import json

from attnbook import nbtools


def test_tidy_removes_widget_state_and_outputs(tmp_path):
    nb = {
        "metadata": {"widgets": {"state": {}}, "kernelspec": {"name": "python3"}},
        "cells": [
            {"cell_type": "code", "outputs": [
                {"output_type": "execute_result", "data": {nbtools.WIDGET_MIME: {"model_id": "abc"}, "text/plain": "w"}},
                {"output_type": "stream", "name": "stdout", "text": "kept"},
            ]},
            {"cell_type": "markdown", "source": "x"},
        ],
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert nbtools.tidy(path)
    out = json.loads(path.read_text())
    assert "widgets" not in out["metadata"] and out["metadata"]["kernelspec"] == {"name": "python3"}
    assert out["cells"][0]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "kept"}]
    assert not nbtools.tidy(path), "a second tidy changes nothing"


def test_tidy_joins_split_streams(tmp_path):
    nb = {"metadata": {}, "cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["a\n", "b"]},
        {"output_type": "stream", "name": "stdout", "text": "c\n"},
        {"output_type": "stream", "name": "stderr", "text": "e\n"},
        {"output_type": "stream", "name": "stdout", "text": "d\n"},
    ]}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert nbtools.tidy(path)
    outs = json.loads(path.read_text())["cells"][0]["outputs"]
    assert [(o["name"], o["text"]) for o in outs] == [("stdout", ["a\n", "bc\n"]), ("stderr", "e\n"),
                                                      ("stdout", "d\n")]
