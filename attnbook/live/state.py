"""What `make outputs` keeps of a notebook's widget state: the live figures' models only,
with ids numbered in order of appearance (attnbook.nbtools tidy calls tidy_widget_state)."""

from __future__ import annotations

import hashlib
import json

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _model_of(output):
    data = output.get("data", {})
    view = data.get(WIDGET_VIEW)
    return view.get("model_id") if isinstance(view, dict) else None


def _refs(value):
    """Model ids a widget's state refers to ("IPY_MODEL_<id>")."""
    if isinstance(value, str) and value.startswith("IPY_MODEL_"):
        yield value[len("IPY_MODEL_"):]
    elif isinstance(value, list):
        for v in value:
            yield from _refs(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _refs(v)


def _rename(value, ids):
    if isinstance(value, str) and value.startswith("IPY_MODEL_"):
        return "IPY_MODEL_" + ids.get(value[len("IPY_MODEL_"):], value[10:])
    if isinstance(value, list):
        return [_rename(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, ids) for k, v in value.items()}
    return value


def is_live_figure(model: dict) -> bool:
    """A stored model of one of this package's live figures."""
    state = model.get("state", {})
    return (model.get("model_module") == "anywidget"
            and "attnbook-live" in str(state.get("_css", "")))


def tidy_widget_state(nb: dict, name: str = "") -> bool:
    """Keep only the widget state of the live figures shown in ``nb``.

    Widget outputs of anything else (an ``interact`` slider, which needs a
    kernel) are removed with their state. The kept models (the figures and
    the models they refer to, e.g. their layout) get ids numbered in order
    of appearance (a hash of ``name`` and the number, so two notebooks never
    share an id), so executing twice gives the same file. Returns True if it
    changed anything.
    """
    before = json.dumps(nb, sort_keys=True)
    meta = nb.setdefault("metadata", {})
    old = meta.get("widgets")
    state = ((old or {}).get(WIDGET_STATE) or {}).get("state", {})
    ids, order = {}, []

    def keep(mid):
        if mid in ids or mid not in state:
            return
        ids[mid] = hashlib.sha1(f"{name}:{len(order)}".encode()).hexdigest()[:32]
        order.append(mid)
        for ref_id in _refs(state[mid].get("state", {})):
            keep(ref_id)

    for cell in nb.get("cells", []):
        outputs = cell.get("outputs", [])
        kept = []
        for out in outputs:
            mid = _model_of(out)
            if mid is None:
                kept.append(out)
            elif mid in state and is_live_figure(state[mid]):
                keep(mid)
                kept.append(_rename_output(out, ids[mid]))
        if kept != outputs:
            cell["outputs"] = kept
    if order:
        new = {WIDGET_STATE: {"state": {ids[m]: _rename(state[m], ids)
                                        for m in order},
                              "version_major": 2, "version_minor": 0}}
        meta["widgets"] = new
    else:
        meta.pop("widgets", None)
    return json.dumps(nb, sort_keys=True) != before


def _rename_output(out, new_id):
    out = json.loads(json.dumps(out))
    out["data"][WIDGET_VIEW]["model_id"] = new_id
    return out
