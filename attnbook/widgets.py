"""Widget plumbing: a live slider in the notebook.

A slider needs a running kernel, so on the static site the book shows the
same effect for a few fixed settings (:func:`attnbook.plots.small_multiples`).
Cells that build a slider carry the ``nbval-ignore-output`` tag (their output
is a widget, not text to compare) and the ``remove-output`` tag (the site has
no kernel to drive it); the values a slider shows are asserted in a plain
cell beside it.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["float_slider"]


def float_slider(draw: Callable[[float], None], name: str, *, min: float, max: float, step: float,
                 value: float, description: str | None = None, readout_format: str = ".2f"):
    """Show a slider for one float parameter; moving it calls ``draw(value)`` again.

    ``draw`` should draw one figure (and may print). The redraw happens when
    the slider is released, so a slow figure does not lag behind the mouse.
    Returns the ``ipywidgets.interactive`` object; end a cell with it to show it.
    """
    if not (min <= value <= max):
        raise ValueError(f"value {value} lies outside the slider's range [{min}, {max}]")
    if step <= 0:
        raise ValueError(f"step must be > 0, got {step}")
    import ipywidgets as widgets

    slider = widgets.FloatSlider(value=value, min=min, max=max, step=step,
                                 description=description or name, continuous_update=False,
                                 readout_format=readout_format,
                                 style={"description_width": "initial"},
                                 layout=widgets.Layout(width="420px"))
    return widgets.interactive(lambda **kw: draw(kw[name]), **{name: slider})
