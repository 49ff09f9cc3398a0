"""Live figures: widgets whose computation and drawing live in JavaScript.

A live figure is an `anywidget <https://anywidget.dev>`_ widget. Its Python
class holds the data and the control's initial value; its JavaScript (an ES
module) computes what the figure shows and draws it as SVG. Because nothing
needs a kernel once the widget is drawn, the same figure is live

- in JupyterLab and Colab (moving the control also updates the Python
  object's trait, e.g. ``fig.value``);
- on the static site, offline, over http and ``file://``: executing a
  notebook (``make outputs``) stores each widget's state, its ES module
  included, in the notebook; the site's small loader
  (``_static/live-figures.js``) reads that state from the page and runs the
  module. No kernel, no CDN.

Each figure's module is ``core.js`` (shared: softmax like the answer key,
numbers formatted like Python's ``f"{x:.2f}"``, an SVG heatmap, an SVG bar
chart, a slider) followed by the figure's own file, e.g.
``temperature_bars.js``. Every number a figure shows carries the attribute
``data-live-number``; :meth:`LiveFigure.numbers` gives the same numbers,
computed in Python with the answer key and formatted by Python, and
``tests/site/test_live_figures.py`` checks the two agree over the control's whole
range.

Adding a figure: write ``attnbook/live/<name>.js`` (a ``render({model, el})``
that uses the core's helpers and marks its numbers with
``data-live-number``; ``export default { render }``), and a small class
here that sets ``js_file``, declares the data as synced traits and
implements ``numbers``. Then add it to :data:`FIGURES`. The base classes
(:class:`LiveFigure`, :class:`SliderFigure`) and the helpers every figure uses
are in :mod:`attnbook.live.base`.

:func:`tidy_widget_state` is what ``make outputs`` keeps of the widget
state: the state of the live figures shown in the notebook, with model ids
numbered in order, and nothing else.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from .. import reference as ref

HERE = Path(__file__).resolve().parent
from .state import WIDGET_STATE, WIDGET_VIEW, is_live_figure, tidy_widget_state  # noqa: F401,E402
from .base import _fixed, anywidget, css_source, esm_source, notebook_language  # noqa: F401,E402
TAG = "live-figure"

__all__ = ["LiveFigure", "SliderFigure", "TemperatureBars", "InputScale",
           "QueryLookup", "MaskEditor", "KVCacheSizes", "FlashBlocks", "SinkDrain", "SoftCapBars",
           "TopKKeep", "CompressRate", "KimiChannelDecay", "RingSteps",
           "FIGURES", "esm_source", "css_source", "tidy_widget_state",
           "is_live_figure", "TAG", "figure_class", "figures_in"]


if anywidget is not None:
    import traitlets

    from .base import LiveFigure, SliderFigure

    class TemperatureBars(SliderFigure):
        """Chapter 04: softmax(z / t) as bars and its entropy, t on a slider."""

        js_file = "temperature_bars.js"
        description = "softmax(z / t) and its entropy, t on a slider"
        z = traitlets.List(traitlets.Float()).tag(sync=True)
        labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

        def __init__(self, z, *, t=1.0, t_max=32.0, step=0.25, labels=None):
            z = [float(x) for x in np.asarray(z, dtype=float)]
            labels = labels or [str(i) for i in range(len(z))]  # from 0
            super().__init__(z=z, labels=labels, value=t, min=0.0, max=t_max,
                             step=step)

        def weights(self, t=None):
            t = self.value if t is None else t
            return ref.softmax(np.array(self.z), temperature=t)

        def numbers(self, control=None):
            p = self.weights(control)
            h = np.where(p > 0, -p * np.log(np.where(p > 0, p, 1.0)), 0.0)
            return [_fixed(x, 2) for x in p] + [_fixed(h.sum(), 3)]

    class SoftCapBars(SliderFigure):
        """Chapter 20: softmax(c tanh(z / c)) as bars and the capped scores,
        c on a slider."""

        js_file = "soft_cap_bars.js"
        description = "softmax of soft-capped scores, the cap c on a slider"
        readout_digits = 0        # the slider shows c as a whole number
        z = traitlets.List(traitlets.Float()).tag(sync=True)
        labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

        def __init__(self, z, *, c=50.0, c_min=1.0, c_max=60.0, step=1.0,
                     labels=None):
            z = [float(x) for x in np.asarray(z, dtype=float)]
            labels = labels or [str(i) for i in range(len(z))]  # from 0
            super().__init__(z=z, labels=labels, value=c, min=c_min,
                             max=c_max, step=step)

        def capped(self, c=None):
            c = self.value if c is None else c
            return ref.soft_cap(np.array(self.z), c)

        def numbers(self, control=None):
            capped = self.capped(control)
            return ([_fixed(x, 2) for x in ref.softmax(capped)]
                    + [_fixed(x, 2) for x in capped])

    class InputScale(SliderFigure):
        """Chapter 01: weights of softmax((sX W_q)(sX W_k)^T / sqrt(dk)), s."""

        js_file = "input_scale.js"
        description = "attention weights as the input is scaled by s"
        X = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        W_q = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        W_k = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)

        def __init__(self, X, W_q, W_k, tokens, *, s=0.1, s_min=0.02,
                     s_max=1.0, step=0.02):
            super().__init__(X=np.asarray(X, float).tolist(),
                             W_q=np.asarray(W_q, float).tolist(),
                             W_k=np.asarray(W_k, float).tolist(),
                             tokens=list(tokens), value=s, min=s_min,
                             max=s_max, step=step)

        def weights(self, s=None):
            s = self.value if s is None else s
            Xs = s * np.array(self.X)
            q, k = Xs @ np.array(self.W_q), Xs @ np.array(self.W_k)
            return ref.scaled_dot_product_attention(q, k, k)[1]

        def numbers(self, control=None):
            return [_fixed(x, 2) for x in self.weights(control).ravel()]

    class QueryLookup(SliderFigure):
        """Chapter 02: a soft lookup whose query slides from one to another."""

        js_file = "query_lookup.js"
        description = "a soft lookup with a query you move between two"
        K = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        q_from = traitlets.List(traitlets.Float()).tag(sync=True)
        q_to = traitlets.List(traitlets.Float()).tag(sync=True)
        values = traitlets.List(traitlets.Float()).tag(sync=True)
        names = traitlets.List(traitlets.Unicode()).tag(sync=True)
        unit = traitlets.Unicode().tag(sync=True)
        from_label = traitlets.Unicode().tag(sync=True)
        to_label = traitlets.Unicode().tag(sync=True)
        # the names and labels on a Chinese page, when they are words (empty: as above)
        names_zh = traitlets.List(traitlets.Unicode()).tag(sync=True)
        from_label_zh = traitlets.Unicode().tag(sync=True)
        to_label_zh = traitlets.Unicode().tag(sync=True)

        def __init__(self, K, values, names, q_from, q_to, *, labels=("from",
                     "to"), unit="", a=0.0, step=0.05, names_zh=(), labels_zh=("", "")):
            if names_zh and len(names_zh) != len(names):
                raise ValueError(f"names_zh has {len(names_zh)} names for {len(names)} keys")
            super().__init__(K=np.asarray(K, float).tolist(),
                             values=np.asarray(values, float).tolist(),
                             names=list(names), names_zh=list(names_zh),
                             from_label_zh=labels_zh[0], to_label_zh=labels_zh[1],
                             q_from=np.asarray(q_from, float).tolist(),
                             q_to=np.asarray(q_to, float).tolist(),
                             from_label=labels[0], to_label=labels[1],
                             unit=unit, value=a, min=0.0, max=1.0, step=step)

        def lookup(self, a=None):
            """(query, weights, answer) at position a."""
            a = self.value if a is None else a
            q = (1 - a) * np.array(self.q_from) + a * np.array(self.q_to)
            w = ref.softmax(np.array(self.K) @ q)
            return q, w, float(w @ np.array(self.values))

        def numbers(self, control=None):
            q, w, answer = self.lookup(control)
            return ([_fixed(x, 3) for x in w] + [_fixed(x, 1) for x in q]
                    + [_fixed(answer, 2)])

    class MaskEditor(LiveFigure):
        """Chapter 06: a mask edited by clicking; fully masked rows: zeros."""

        js_file = "mask_editor.js"
        description = "attention weights under a mask you edit by clicking"
        q = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        k = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)
        mask = traitlets.List(traitlets.List(traitlets.Bool())).tag(sync=True)
        causal = traitlets.List(traitlets.List(traitlets.Bool())).tag(sync=True)

        def __init__(self, q, k, tokens, *, mask=None):
            q, k = np.asarray(q, float), np.asarray(k, float)
            causal = ref.causal_mask(len(tokens))
            mask = causal if mask is None else np.asarray(mask, bool)
            if q.shape != k.shape or q.ndim != 2 or mask.shape != causal.shape:
                raise ValueError(f"need q and k of shape (N, dk) and a mask "
                                 f"(N, N) for N = {len(tokens)} tokens; got q "
                                 f"{q.shape}, k {k.shape}, mask {mask.shape}")
            super().__init__(q=q.tolist(), k=k.tolist(), tokens=list(tokens),
                             mask=mask.tolist(), causal=causal.tolist())

        def weights(self, mask=None):
            """Weights under ``mask``, fully masked rows all zero (answer key)."""
            mask = np.array(self.mask if mask is None else mask, dtype=bool)
            q, k = np.array(self.q), np.array(self.k)
            return ref.scaled_dot_product_attention(
                q, k, np.zeros((len(k), 1)), mask=mask, fully_masked="zeros")[1]

        def numbers(self, control=None):
            mask = np.array(self.mask if control is None else control, bool)
            w, out = self.weights(mask), []
            for i, row in enumerate(w):
                if mask[i].any():
                    out += [_fixed(x, 2) for x, m in zip(row, mask[i]) if m]
                    out.append(_fixed(row.sum(), 2))
            return out

        def __repr__(self):
            hidden = int((~np.array(self.mask, bool)).sum())
            return f"MaskEditor: {self.description} ({hidden} hidden)"

    class KVCacheSizes(SliderFigure):
        """Chapter 15: KV cache in GiB per model, GQA / MHA / window, k tokens.

        ``models`` maps a name to ``dict(layers, q_heads, kv_heads, head_dim,
        window)`` (window None or 0: no sliding window). The slider is the
        context length in units of 1,024 tokens.
        """

        js_file = "kv_cache_sizes.js"
        description = "KV cache per model, the context length on a slider"
        readout_digits = 0
        names = traitlets.List(traitlets.Unicode()).tag(sync=True)
        layers = traitlets.List(traitlets.Int()).tag(sync=True)
        q_heads = traitlets.List(traitlets.Int()).tag(sync=True)
        kv_heads = traitlets.List(traitlets.Int()).tag(sync=True)
        head_dim = traitlets.List(traitlets.Int()).tag(sync=True)
        windows = traitlets.List(traitlets.Int()).tag(sync=True)
        bytes_per_number = traitlets.Int().tag(sync=True)

        def __init__(self, models, *, k_tokens=8, k_max=128,
                     bytes_per_number=2):
            keys = ("layers", "q_heads", "kv_heads", "head_dim")
            for name, m in models.items():
                if any(not isinstance(m.get(k), int) or m[k] <= 0
                       for k in keys) or m["q_heads"] % m["kv_heads"]:
                    raise ValueError(
                        f"{name}: need positive whole {', '.join(keys)} "
                        f"with q_heads a multiple of kv_heads, got {m}")
            super().__init__(
                names=list(models),
                **{k: [m[k] for m in models.values()] for k in keys},
                windows=[int(m.get("window") or 0) for m in models.values()],
                bytes_per_number=bytes_per_number, value=k_tokens, min=1,
                max=k_max, step=1)

        def gib(self, control=None):
            """[(name, [GQA, MHA(, GQA + window)]), ...] in GiB."""
            n = 1024 * round(self.value if control is None else control)

            def size(i, heads, tokens):  # 2 (K and V) x L x H x d x bytes
                return (2 * self.layers[i] * heads * self.head_dim[i]
                        * self.bytes_per_number * tokens / 2 ** 30)

            out = []
            for i, name in enumerate(self.names):
                bars = [size(i, self.kv_heads[i], n),
                        size(i, self.q_heads[i], n)]
                if self.windows[i] > 0:
                    bars.append(size(i, self.kv_heads[i],
                                     min(n, self.windows[i])))
                out.append((name, bars))
            return out

        def numbers(self, control=None):
            n = 1024 * round(self.value if control is None else control)
            return ([_fixed(x, 2) for _, bars in self.gib(control)
                     for x in bars] + [f"{n:,}"])

    class FlashBlocks(SliderFigure):
        """Chapter 17: one query row of tiled attention, block by block."""

        js_file = "flash_blocks.js"
        description = "the running (m, l, o) of one query, key block by block"
        readout_digits = 0  # the slider counts blocks
        q = traitlets.List(traitlets.Float()).tag(sync=True)
        K = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        V = traitlets.List(traitlets.List(traitlets.Float())).tag(sync=True)
        block = traitlets.Int().tag(sync=True)

        def __init__(self, q, K, V, *, block, blocks_done=1):
            q, K, V = (np.asarray(a, float) for a in (q, K, V))
            if (q.ndim != 1 or K.ndim != 2 or V.ndim != 2 or len(K) == 0
                    or K.shape != (len(V), len(q)) or block < 1):
                raise ValueError(f"need q (d,), K (N, d), V (N, dv) with "
                                 f"N >= 1 and block >= 1; got q {q.shape}, "
                                 f"K {K.shape}, V {V.shape}, block {block}")
            n_blocks = -(-len(K) // int(block))
            super().__init__(q=q.tolist(), K=K.tolist(), V=V.tolist(),
                             block=int(block), value=blocks_done, min=0,
                             max=n_blocks, step=1)

        def state(self, blocks_done=None):
            """(m, l, o) after merging the first ``blocks_done`` key blocks."""
            t = int(round(self.value if blocks_done is None else blocks_done))
            q, K, V = (np.array(a) for a in (self.q, self.K, self.V))
            st = (np.full(1, -np.inf), np.zeros(1), np.zeros((1, V.shape[1])))
            for j in range(0, min(t * self.block, len(K)), self.block):
                blk = slice(j, j + self.block)
                st = ref.merge_attention_states(
                    st, ref.attention_state(q[None], K[blk], V[blk]))
            return st[0][0], st[1][0], st[2][0]

        def numbers(self, control=None):
            q, K, V = (np.array(a) for a in (self.q, self.K, self.V))
            scores = q[None] @ K.T / np.sqrt(len(q))   # (1, N), as the key
            m, l, o = self.state(control)
            _, l_all, o_all = ref.attention_state(q[None], K, V)  # exact
            out = [_fixed(x, 2) for x in scores[0]]
            out += [_fixed(x, 3) for x in o / l] if l > 0 else []
            out += [_fixed(x, 3) for x in o_all[0] / l_all[0]]
            return out + [_fixed(m, 3), _fixed(l, 3)]

    class SinkDrain(SliderFigure):
        """Chapter 19: one row of attention with a sink, the sink logit b
        on a slider (gpt-oss): the keys' weights, the sink's share, the
        output."""
        js_file = "sink_drain.js"
        description = "one row with a sink, the sink logit b on a slider"
        z = traitlets.List(traitlets.Float()).tag(sync=True)
        values = traitlets.List(traitlets.Float()).tag(sync=True)
        labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

        def __init__(self, z, values, *, b=0.0, b_min=-4.0, b_max=6.0,
                     step=0.25):
            z = [float(x) for x in np.asarray(z, dtype=float)]
            values = [float(x) for x in np.asarray(values, dtype=float)]
            if len(z) != len(values) or not z:
                raise ValueError(f"need one value per score, got {len(z)} "
                                 f"scores and {len(values)} values")
            super().__init__(z=z, values=values,
                             labels=[str(i) for i in range(len(z))],
                             value=b, min=b_min, max=b_max, step=step)

        def row(self, b=None):
            """(weights of the keys, output) from the answer key at ``b``."""
            b = self.value if b is None else b
            # one head, one query whose scores are z: q = z, k = identity
            # times sqrt(d) so that q k^T / sqrt(d) = z
            d = len(self.z)
            q = np.array(self.z)[None, None, :]              # (1, 1, d)
            k = np.eye(d)[None] * np.sqrt(d)                 # (1, d, d)
            v = np.array(self.values)[None, :, None]         # (1, d, 1)
            out, w = ref.attention_with_sinks(q, k, v, np.array([b]))
            return w[0, 0], float(out[0, 0, 0])

        def numbers(self, control=None):
            w, out = self.row(control)
            share = 1.0 - w.sum()
            return ([_fixed(x, 2) for x in w] + [_fixed(share, 2)]
                    + [_fixed(share, 3), _fixed(out, 3)])

    class TopKKeep(SliderFigure):
        """Chapter 21: one query keeps its top k keys by index score (k on
        a slider): its attention weights over them, its output."""
        js_file = "topk_keep.js"
        description = "one query keeping its top k keys, k on a slider"
        readout_digits = 0
        index = traitlets.List(traitlets.Float()).tag(sync=True)
        z = traitlets.List(traitlets.Float()).tag(sync=True)
        values = traitlets.List(traitlets.Float()).tag(sync=True)
        labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

        def __init__(self, index, z, values, *, k=None):
            index, z, values = ([float(x) for x in np.asarray(a, dtype=float)]
                                for a in (index, z, values))
            if not (len(index) == len(z) == len(values)) or not z:
                raise ValueError(f"need one index score, one score and one "
                                 f"value per key, got {len(index)}, {len(z)} "
                                 f"and {len(values)}")
            n = len(z)
            super().__init__(index=index, z=z, values=values, min=1.0,
                             labels=[str(i) for i in range(n)], step=1.0,
                             value=float(n if k is None else k), max=float(n))

        def row(self, k=None):
            """(weights, output) from the answer key keeping the top k."""
            k = int(round(self.value if k is None else k))
            d = len(self.z)
            # one query whose scores are z: q = z, k = identity * sqrt(d)
            q = np.array(self.z)[None, :]                    # (1, d)
            keys = np.eye(d) * np.sqrt(d)                    # (d, d)
            v = np.array(self.values)[:, None]               # (d, 1)
            out, w = ref.topk_sparse_attention(
                q, keys, v, np.array(self.index)[None, :], k)
            return w[0], float(out[0, 0])

        def numbers(self, control=None):
            w, out = self.row(control)
            return [_fixed(x, 2) for x in w] + [_fixed(out, 3)]

    class CompressRate(SliderFigure):
        """Chapter 21b: DeepSeek-V4's compressor on one channel, the rate on a
        slider: the entries (``ref.compress_kv`` with a zero position bias),
        the tokens left waiting, one layer's compressed cache at ``context``
        tokens in MiB (``head_dim`` numbers per entry, 2 bytes each)."""
        js_file = "compress_rate.js"
        description = "one channel compressed, the rate on a slider"
        readout_digits = 0
        values = traitlets.List(traitlets.Float()).tag(sync=True)
        gates = traitlets.List(traitlets.Float()).tag(sync=True)
        head_dim = traitlets.Int().tag(sync=True)
        context = traitlets.Int().tag(sync=True)

        def __init__(self, values, gates, *, rate=4, max_rate=8, head_dim=512,
                     context=1_048_576):
            values, gates = ([float(x) for x in np.asarray(a, dtype=float)]
                             for a in (values, gates))
            if len(values) != len(gates) or len(values) < max_rate:
                raise ValueError(f"need one gate per value and at least max_rate "
                                 f"tokens, got {len(values)} and {len(gates)}")
            if any(not 0.0 <= v <= 1.0 for v in values):
                raise ValueError("the values must lie in [0, 1] (drawn as bars)")
            super().__init__(values=values, gates=gates, head_dim=int(head_dim),
                             context=int(context), value=float(rate), min=1.0,
                             max=float(max_rate), step=1.0)

        def entries(self, rate=None):
            """The compressed entries at ``rate``, from the answer key."""
            rate = int(round(self.value if rate is None else rate))
            kv = np.array(self.values)[:, None]                  # (N, 1)
            z = np.array(self.gates)[:, None]                    # (N, 1)
            return ref.compress_kv(kv, z, np.zeros((rate, 1)), rate)[:, 0]

        def cache_mib(self, rate=None):
            rate = int(round(self.value if rate is None else rate))
            return self.context // rate * self.head_dim * 2 / 2 ** 20

        def numbers(self, control=None):
            rate = int(round(self.value if control is None else control))
            e = self.entries(rate)
            return ([_fixed(x, 2) for x in e] + [str(len(e)),
                    str(len(self.values) % rate), _fixed(self.cache_mib(rate), 1)])

    class KimiChannelDecay(SliderFigure):
        """Chapter 22c: what each key channel of a Kimi Delta Attention
        state still holds of a write, t tokens later (t on a slider),
        beside one decay per token (Gated DeltaNet, the mean g)."""
        js_file = "kimi_channel_decay.js"
        description = "the share each key channel keeps, t on a slider"
        readout_digits = 0
        g = traitlets.List(traitlets.Float()).tag(sync=True)
        labels = traitlets.List(traitlets.Unicode()).tag(sync=True)

        def __init__(self, g, *, t=0, t_max=40):
            g = [float(x) for x in np.asarray(g, dtype=float)]
            if not g or max(g) > 0:
                raise ValueError(f"need log-decays g <= 0, one per channel, got {g}")
            super().__init__(g=g, labels=[f"{x:g}" for x in g],
                             value=float(t), min=0.0, max=float(t_max), step=1.0)

        def kept(self, t=None):
            """(share kept per channel, share kept with one decay per token),
            from the answer key: a state of ones, t tokens that write nothing."""
            t = int(round(self.value if t is None else t))
            d = len(self.g)
            g = np.tile(np.array(self.g), (t, 1))                # (t, d_k)
            zeros = np.zeros((t, d))                             # no key: no write
            _, s = ref.kimi_delta_rule(zeros, zeros, np.zeros((t, 1)), g, np.zeros(t),
                                       initial_state=np.ones((d, 1)))
            mean = np.full(t, np.mean(self.g))
            _, s1 = ref.gated_delta_rule(zeros, zeros, np.zeros((t, 1)), mean, np.zeros(t),
                                         initial_state=np.ones((d, 1)))
            return s[:, 0], float(s1[0, 0])

        def numbers(self, control=None):
            kept, one = self.kept(control)
            return ([_fixed(x, 2) for x in kept]
                    + [_fixed(kept.max(), 3), _fixed(kept.min(), 3), _fixed(one, 3)])

    class RingSteps(SliderFigure):
        """Chapter 25: ring attention's steps under a causal mask, for the
        contiguous and the zigzag split: which key/value shard each rank
        holds at step s, the pairs each tile keeps, each rank's work so far."""
        js_file = "ring_steps.js"
        description = "ring attention step by step, the step s on a slider"
        readout_digits = 0
        pairs = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
        pairs_zigzag = traitlets.List(
            traitlets.List(traitlets.Int())).tag(sync=True)

        def __init__(self, n, n_shards, *, step=0):
            contiguous = ref.causal_pairs(n, n_shards)
            zigzag = ref.causal_pairs(n, n_shards, zigzag=True)
            super().__init__(pairs=contiguous.tolist(),
                             pairs_zigzag=zigzag.tolist(), value=step, min=0,
                             max=n_shards - 1, step=1)

        def work(self, step=None, zigzag=False):
            """(P,) pairs each rank has computed after ``step``."""
            s = int(round(self.value if step is None else step))
            pairs = np.array(self.pairs_zigzag if zigzag else self.pairs)
            p = len(pairs)
            done = np.zeros(p, dtype=int)
            for t in range(s + 1):
                held = ref.ring_schedule(p, t)
                done += pairs[np.arange(p), held]
            return done

        def numbers(self, control=None):
            s = int(round(self.value if control is None else control))
            p = len(self.pairs)
            out = [str(j) for j in ref.ring_schedule(p, s)]
            for zigzag in (False, True):
                pairs = self.pairs_zigzag if zigzag else self.pairs
                work = self.work(s, zigzag)
                for r in range(p):
                    out += [str(n) for n in pairs[r] if n > 0]
                    out.append(str(work[r]))
            return out

    FIGURES = [TemperatureBars, InputScale, QueryLookup, MaskEditor,
               KVCacheSizes, FlashBlocks, SinkDrain, SoftCapBars,
               TopKKeep, CompressRate, KimiChannelDecay, RingSteps]


# --- the live figures stored in a notebook (their state: state.py) ---

def figure_class(state: dict):
    """The live-figure class whose JavaScript a stored state carries, or None."""
    if anywidget is None:  # pragma: no cover
        return None
    pending = [LiveFigure]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "js_file" in cls.__dict__ and cls.js_file and state.get("_esm") == cls._esm:
            return cls
    return None


def figures_in(nb: dict) -> list:
    """``(class, state)`` of every live figure stored in a notebook, in order."""
    models = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    return [(figure_class(m["state"]), m["state"]) for m in models.values() if is_live_figure(m)]
