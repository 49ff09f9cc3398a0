"""Tidying executed notebooks (`make outputs`): joined stream outputs, widget
state removed except the live figures', renumbered."""

from __future__ import annotations

from pathlib import Path

from ._io import _load, _save

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _text(output):
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def _merge_streams(outputs):
    """Join consecutive stream outputs of the same stream into one.

    How a kernel's prints are cut into messages depends on timing, so the
    same cell can be stored as one stream output on one run and two on the
    next; joining them makes re-execution give the same file.
    """
    merged = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None
                and prev.get("output_type") == "stream" and prev.get("name") == out.get("name")):
            # stored as a list of lines, the form nbformat writes, so a joined output and one
            # that arrived whole are stored alike
            merged[-1] = {**prev, "text": (_text(prev) + _text(out)).splitlines(keepends=True)}
        else:
            merged.append(out)
    return merged


def tidy(path) -> bool:
    """Tidy one notebook in place: widget state and outputs, split streams.

    Widget outputs and state are removed, except those of the live figures
    (``attnbook.live``), which are kept with model ids numbered in order
    (:func:`attnbook.live.tidy_widget_state`). Returns True if it changed
    anything.
    """
    from attnbook.live import tidy_widget_state

    nb = _load(path)
    changed = tidy_widget_state(nb, Path(path).stem)
    for cell in nb.get("cells", []):
        outputs = cell.get("outputs", [])
        kept = _merge_streams(outputs)
        if kept != outputs:
            cell["outputs"] = kept
            changed = True
    if changed:
        _save(path, nb)
    return changed


