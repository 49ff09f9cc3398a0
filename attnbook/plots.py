"""Plotting helpers: attention heatmaps, bar charts of weights, small multiples.

Every figure has an opaque white background so it reads the same in the
site's light and dark themes. Labels are English; the Chinese pages draw the same
figure in Chinese from an SVG stored beside each PNG (see ``use_book_style``).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["use_book_style", "heatmap", "attention_heatmap", "weight_bars", "small_multiples"]

_STYLE = {
    "figure.facecolor": "white",
    "figure.edgecolor": "white",
    "savefig.facecolor": "white",
    "savefig.edgecolor": "white",
    "axes.facecolor": "white",
    "figure.dpi": 100,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def use_book_style():
    """Apply the book's matplotlib settings (call once at the top of a chapter).

    pyplot is imported first so that the notebook's inline backend has set its
    own defaults (a transparent figure background) before these replace them.
    In a notebook it also makes every figure's PNG output carry the same figure
    as SVG text (:func:`install_svg_formatter`).
    """
    import matplotlib.pyplot as plt

    plt.rcParams.update(_STYLE)
    install_svg_formatter()
    return plt


# --- the SVG twin of every figure (the Chinese pages draw it, translated) ---

SVG_KEY = "attnbook"  # output.metadata["image/png"]["attnbook"]["svg"]
SVG_RC = {
    "svg.fonttype": "none",       # text stays text: the Chinese pages translate it
    "svg.hashsalt": "attnbook",   # ids from a fixed salt: the same SVG on every run
    "svg.image_inline": True,
}


def figure_svg(fig) -> str:
    """The figure as SVG, its text kept as ``<text>``, byte for byte the same on every run
    (fixed ids, no date), cropped as the notebook's PNG is (``bbox_inches="tight"``)."""
    import io

    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context(SVG_RC):
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buf.getvalue()


def install_svg_formatter() -> bool:
    """In IPython, make a Figure's ``image/png`` output also carry its SVG (:func:`figure_svg`)
    in the output's metadata, ``metadata["image/png"]["attnbook"]["svg"]``.

    Metadata, not an ``image/svg+xml`` output: nbval compares every output's data but SVG
    (it would compare path coordinates as text) and skips metadata, as it skips PNG. The PNG
    is the inline backend's own, unchanged. `python -m attnbook.i18n build` draws the
    Chinese page's figure from the SVG, its words translated. Returns False outside IPython.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "display_formatter"):
        return False
    import matplotlib
    from matplotlib.figure import Figure

    if "inline" in matplotlib.get_backend():
        # the inline backend registers its own Figure formatters when its module is first
        # imported (matplotlib loads it at the first figure): load it now, then wrap its PNG
        import matplotlib_inline.backend_inline  # noqa: F401
    png = shell.display_formatter.formatters["image/png"]
    current = png.lookup_by_type(Figure) if Figure in png else None
    if current is None:
        return False
    if getattr(current, "_attnbook_svg", False):
        return True

    def png_and_svg(fig):
        data = current(fig)
        if isinstance(data, tuple):
            data, md = data
        else:
            md = {}
        if data is None:
            return None
        return data, {**(md or {}), SVG_KEY: {"svg": figure_svg(fig)}}

    png_and_svg._attnbook_svg = True
    png.for_type(Figure, png_and_svg)
    return True


__all__ += ["figure_svg", "install_svg_formatter"]


def heatmap(data, row_labels=None, col_labels=None, *, ax=None, title=None, hidden=None,
            annotate=True, fmt="{:.2f}", cmap="viridis", vmin=None, vmax=None, colorbar=True,
            xlabel="key", ylabel="query", cbar_label=None):
    """Draw a matrix as a heatmap: rows down the side, columns along the top.

    ``hidden`` is an optional boolean array of the same shape; True cells are
    drawn grey and hatched (a masked position), whatever their value, and are
    left out of the colour scale. Returns the Axes.
    """
    import matplotlib.pyplot as plt

    data = np.asarray(data, dtype=float)
    if data.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D array, got shape {data.shape}")
    n_rows, n_cols = data.shape
    for name, labels, n in (("row_labels", row_labels, n_rows), ("col_labels", col_labels, n_cols)):
        if labels is not None and len(labels) != n:
            raise ValueError(f"{name} has {len(labels)} labels for {n} {name[:3]}s (data shape {data.shape})")
    if ax is None:
        width = max(3.2, 0.55 * n_cols + 1.8)
        height = max(2.6, 0.45 * n_rows + 1.2)
        _, ax = plt.subplots(figsize=(width, height), layout="constrained")
    hidden_arr = np.zeros(data.shape, bool) if hidden is None else np.broadcast_to(np.asarray(hidden, bool), data.shape)
    shown = np.ma.masked_array(data, mask=hidden_arr | ~np.isfinite(data))
    cm = plt.get_cmap(cmap).with_extremes(bad="#d9d9d9")
    im = ax.imshow(shown, cmap=cm, vmin=vmin, vmax=vmax, aspect="auto")
    for i, j in zip(*np.nonzero(hidden_arr | ~np.isfinite(data))):
        ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="///",
                                   edgecolor="#7f7f7f", linewidth=0))
    ax.set_xticks(range(n_cols), col_labels if col_labels is not None else range(n_cols))
    ax.set_yticks(range(n_rows), row_labels if row_labels is not None else range(n_rows))
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.tick_params(axis="x", rotation=0 if n_cols <= 6 else 45, length=0)
    ax.tick_params(axis="y", length=0)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    if xlabel:
        ax.set_xlabel(xlabel)
    if ylabel:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, pad=8)
    if annotate:
        lo, hi = im.get_clim()
        for i in range(n_rows):
            for j in range(n_cols):
                value = data[i, j]
                if hidden_arr[i, j] or not np.isfinite(value):
                    text = "-inf" if np.isneginf(value) else "hidden"
                    ax.text(j, i, text, ha="center", va="center", fontsize=8, color="#404040")
                    continue
                frac = 0.5 if hi == lo else (value - lo) / (hi - lo)
                colour = "black" if frac > 0.6 else "white"
                ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=9, color=colour)
    if colorbar:
        cb = ax.figure.colorbar(im, ax=ax, shrink=0.85)
        if cbar_label:
            cb.set_label(cbar_label)
    return ax


def attention_heatmap(weights, queries, keys, *, title="attention weights", ax=None, **kwargs):
    """Heatmap of an attention-weight matrix, colour scale fixed to [0, 1]."""
    kwargs.setdefault("vmin", 0.0)
    kwargs.setdefault("vmax", 1.0)
    kwargs.setdefault("cbar_label", "weight")
    return heatmap(weights, queries, keys, ax=ax, title=title, **kwargs)


def weight_bars(weights, labels=None, *, ax=None, title=None, fmt="{:.3f}", color="#3b75af", ylim=(0, 1.05)):
    """Bar chart of one weight vector, each bar labelled with its value."""
    import matplotlib.pyplot as plt

    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 1:
        raise ValueError(f"weight_bars needs a 1-D array, got shape {weights.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.5 * len(weights) + 1.5), 2.6), layout="constrained")
    x = np.arange(len(weights))
    bars = ax.bar(x, weights, color=color)
    for bar, w in zip(bars, weights):
        ax.text(bar.get_x() + bar.get_width() / 2, w + 0.01 * (ylim[1] - ylim[0]), fmt.format(w),
                ha="center", va="bottom", fontsize=9)
    ax.set_xticks(x, labels if labels is not None else [str(i) for i in x])
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    return ax


def small_multiples(draw: Callable, values: Sequence, *, ncols=None, panel_size=(3.0, 2.6),
                    title_fmt="{}", suptitle=None, sharey=False):
    """Call ``draw(ax, value)`` once per value, in a grid of panels. Returns the Figure.

    This is the static stand-in for a slider: the same picture at a few
    fixed settings, side by side.
    """
    import matplotlib.pyplot as plt

    values = list(values)
    if not values:
        raise ValueError("small_multiples needs at least one value")
    ncols = ncols or len(values)
    nrows = -(-len(values) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows),
                             squeeze=False, sharey=sharey, layout="constrained")
    for ax, value in zip(axes.flat, values):
        draw(ax, value)
        if title_fmt:
            ax.set_title(title_fmt.format(value))
    for ax in list(axes.flat)[len(values):]:
        ax.set_visible(False)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


# --- Part I: soft lookup ---

def lookup_figure(key_labels, scores, weights, values, *, query_label="query", value_fmt="{:g}",
                  value_name="value", panel_size=(2.9, 2.4)):
    """The soft lookup for one query in three panels that share the keys down the side:
    the query's score against each key, the softmax weights, and each key's contribution
    weight * value, whose sum (the result) is written in the last panel's title.

    ``values`` is 1-D (one number per key). Returns the Figure.
    """
    import matplotlib.pyplot as plt

    scores, weights, values = (np.asarray(a, dtype=float) for a in (scores, weights, values))
    n = len(key_labels)
    for name, a in (("scores", scores), ("weights", weights), ("values", values)):
        if a.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), one per key, got {a.shape}")
    contrib = weights * values
    fig, axes = plt.subplots(1, 3, figsize=(3 * panel_size[0], panel_size[1] + 0.25 * n),
                             sharey=True, layout="constrained")
    y = np.arange(n)
    panels = [
        (scores, "score  q . k", "{:.2f}", "#8c8c8c"),
        (weights, "weight = softmax(score)", "{:.3f}", "#3b75af"),
        (contrib, f"weight x {value_name}", "{:.2f}", "#e08a2c"),
    ]
    for ax, (data, title, fmt, colour) in zip(axes, panels):
        ax.barh(y, data, color=colour)
        span = max(np.abs(data).max(), 1e-12)
        for yi, d in zip(y, data):
            ax.text(d + 0.02 * span, yi, fmt.format(d), va="center", ha="left", fontsize=9)
        ax.set_xlim(min(0.0, data.min() * 1.1), span * 1.35)
        ax.set_title(title, fontsize=10)
        ax.tick_params(axis="y", length=0)
    labels = [f"{k} ({value_fmt.format(v)})" for k, v in zip(key_labels, values)]
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    axes[0].set_ylabel(f"key ({value_name})")
    axes[2].set_title(f"weight x {value_name}\nsum = {value_fmt.format(contrib.sum())}", fontsize=10)
    fig.suptitle(f"soft lookup for the query '{query_label}'")
    return fig


__all__ += ["lookup_figure"]


def kv_sharing_diagram(layer_types, sources, *, ax=None, title=None):
    """Chapter 19b: one box per layer (blue: sliding, orange: full; hatched:
    computes no keys or values of its own), and an arrow from each sharing
    layer down to the layer whose keys and values it reads. Returns the Axes."""
    import matplotlib.pyplot as plt

    n = len(layer_types)
    if len(sources) != n:
        raise ValueError(f"need one source per layer, got {len(sources)} for {n}")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.0, 0.5 * n + 1), 2.6), layout="constrained")
    colours = {"sliding_attention": "#0072b2", "full_attention": "#e69f00"}
    for i, (kind, src) in enumerate(zip(layer_types, sources)):
        shared = src != i
        ax.add_patch(plt.Rectangle((i - 0.4, 0), 0.8, 1, facecolor=colours[kind],
                                   alpha=0.35 if shared else 1.0, hatch="///" if shared else None,
                                   edgecolor="#333333"))
        ax.text(i, -0.25, str(i), ha="center", va="top", fontsize=8)
        if shared:
            ax.annotate("", xy=(src, 1.0), xytext=(i, 1.0),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=1,
                                        connectionstyle="arc3,rad=0.35"))
    for kind, label in (("sliding_attention", "sliding"), ("full_attention", "full")):
        ax.add_patch(plt.Rectangle((0, 0), 0, 0, facecolor=colours[kind], label=label))
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_ylim(-0.7, 2.6)
    ax.axis("off")
    ax.legend(loc="upper left", frameon=False, ncols=2, fontsize=9)
    ax.text(n / 2 - 0.5, -0.6, "layer (hatched: reads the layer its arrow points to)",
            ha="center", va="top", fontsize=9)
    if title:
        ax.set_title(title)
    return ax


__all__ += ["kv_sharing_diagram"]
