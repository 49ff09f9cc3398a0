"""Checkers of chapter 19 (Part VIII): attention with a sink per head
(gpt-oss), and the keys a query reaches through sliding-window and full
layers."""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import reference as ref
from ..checking import Case, Mistake, Verdict, run_cases

__all__ = ["attention_with_sinks_cases", "attention_with_sinks_mistakes",
           "check_attention_with_sinks", "reach_cases", "reach_mistakes",
           "check_reach_after_layers"]


# --- attention with sinks -------------------------------------------------------

def attention_with_sinks_cases() -> list[Case]:
    """Sizes differ on every axis (H, N_q, N_k, d_k, d_v), the sinks differ
    per head, and one case has a fully masked row and one scores large enough
    to overflow exp without the row maximum."""
    rng = np.random.default_rng(19)
    hidden_row = np.ones((4, 5), dtype=bool)
    hidden_row[1] = False  # query 1 may attend to nothing
    out = []
    for label, shape, mask, scale in [
        ("1 head, 2 queries, 3 keys, d = 2, no mask", (1, 2, 3, 2, 2), None, 1),
        ("a batch of 2, 3 heads, 4 queries, 5 keys, d_k = 2, d_v = 3",
         (3, 4, 5, 2, 3), None, 1),
        ("2 heads, 4 tokens, causal mask", (2, 4, 4, 3, 3), ref.causal_mask(4), 1),
        ("3 heads, 5 tokens, sliding window of 2 keys",
         (3, 5, 5, 2, 2), ref.sliding_window_mask(5, 5, 2), 1),
        ("2 heads, 4 queries, 5 keys, query 1 may attend to no key (its row "
         "of the mask is all False)", (2, 4, 5, 2, 3), hidden_row, 1),
        ("large scores (hundreds): exp overflows unless you subtract the row "
         "maximum, sink included", (2, 3, 4, 2, 2), None, 25),
    ]:
        h, n_q, n_k, d_k, d_v = shape
        lead = (2,) if "batch" in label else ()
        q = rng.normal(size=lead + (h, n_q, d_k)) * scale
        k = rng.normal(size=lead + (h, n_k, d_k)) * scale
        v = rng.normal(size=lead + (h, n_k, d_v))
        sinks = np.round(rng.normal(size=h) * 2, 2) + np.arange(h)  # distinct per head
        kwargs = {} if mask is None else {"mask": mask}
        o, w = ref.attention_with_sinks(q, k, v, sinks, **kwargs)
        out.append(Case(label, (q, k, v, sinks), o, kwargs=kwargs, weights=w))
    return out


def _scores(q, k, mask, scale=True):
    s = q @ np.swapaxes(k, -1, -2)
    s = s / np.sqrt(q.shape[-1]) if scale else s
    return s if mask is None else np.where(mask, s, -np.inf)


def _sink_softmax(s, sinks, max_over="both"):
    sink = np.broadcast_to(sinks[:, None, None], s.shape[:-1] + (1,))
    both = np.concatenate([s, sink], axis=-1)
    if max_over == "none":
        return np.exp(both) / np.exp(both).sum(axis=-1, keepdims=True)
    top = (both if max_over == "both" else s).max(axis=-1, keepdims=True)
    e = np.exp(both - top)
    return (e / e.sum(axis=-1, keepdims=True))  # (..., N_k + 1)


def attention_with_sinks_mistakes() -> list[Mistake]:
    """The wrong answers a learner plausibly writes, with the hint that names each."""
    def left_out(q, k, v, sinks, mask=None):
        s = _scores(q, k, mask)
        top = np.max(s, axis=-1, keepdims=True)
        e = np.exp(s - np.where(np.isfinite(top), top, 0))
        w = e / e.sum(axis=-1, keepdims=True)
        return w @ v, w

    def added_to_values(q, k, v, sinks, mask=None):
        o, w = ref.attention_with_sinks(q, k, v, sinks, mask=mask)
        return o + (1 - w.sum(axis=-1, keepdims=True)) * sinks[:, None, None], w

    def one_sink(q, k, v, sinks, mask=None):
        return ref.attention_with_sinks(q, k, v, np.full_like(sinks, sinks[0]), mask=mask)

    def mean_sink(q, k, v, sinks, mask=None):
        return ref.attention_with_sinks(q, k, v, np.full_like(sinks, sinks.mean()),
                                        mask=mask)

    def sinks_reversed(q, k, v, sinks, mask=None):
        return ref.attention_with_sinks(q, k, v, sinks[::-1].copy(), mask=mask)

    def unscaled(q, k, v, sinks, mask=None):
        w = _sink_softmax(_scores(q, k, mask, scale=False), sinks)[..., :-1]
        return w @ v, w

    def kept_column(q, k, v, sinks, mask=None):
        p = _sink_softmax(_scores(q, k, mask), sinks)
        return p[..., :-1] @ v, p

    def max_over_keys(q, k, v, sinks, mask=None):
        w = _sink_softmax(_scores(q, k, mask), sinks, max_over="keys")[..., :-1]
        return w @ v, w

    def no_max(q, k, v, sinks, mask=None):
        w = _sink_softmax(_scores(q, k, mask), sinks, max_over="none")[..., :-1]
        return w @ v, w

    def mask_times(q, k, v, sinks, mask=None):
        s = _scores(q, k, None)
        w = _sink_softmax(s if mask is None else s * mask, sinks)[..., :-1]
        return w @ v, w

    def mask_after(q, k, v, sinks, mask=None):
        w = _sink_softmax(_scores(q, k, None), sinks)[..., :-1]
        w = w if mask is None else w * mask
        return w @ v, w

    return [
        Mistake("the weights of each row sum to 1: the sink is missing. Append "
                "sinks[h] as one more column of head h's scores, softmax over "
                "the N_k + 1 columns, then drop that column WITHOUT "
                "renormalising (adding the sink to every score, or "
                "renormalising after the drop, also gives rows summing to 1).",
                left_out),
        Mistake("the output has the sink's share times its logit added to it: "
                "the sink has no value. Its weight is dropped; the output is "
                "weights @ v over the real keys only.", added_to_values),
        Mistake("every head used the same sink logit (sinks[0]): the sink is "
                "per head, sinks[h] for head h, the axis -3 of q.", one_sink),
        Mistake("every head used one sink logit, the mean of the heads' "
                "(sinks.mean()): each head has its own, sinks[h] for head h; "
                "broadcast sinks[:, None, None] against the (..., H, N_q, 1) "
                "column instead of averaging it away.", mean_sink),
        Mistake("head h got the sink of another head (the sinks are reversed "
                "along the heads): broadcast sinks as sinks[:, None, None] "
                "against the (..., H, N_q, 1) column.", sinks_reversed),
        Mistake("the scores are not scaled: divide q k^T by sqrt(d_k) before "
                "appending the sink (the sink logit itself is not scaled).",
                unscaled),
        Mistake("the weights still have the sink's column (N_k + 1 columns): "
                "drop it, p[..., :-1], so the weights are (..., H, N_q, N_k).",
                kept_column),
        Mistake("the row maximum was taken over the keys only: on a fully "
                "masked row it is -inf and -inf - (-inf) is nan. Take the "
                "maximum over the keys AND the sink, which is never masked.",
                max_over_keys),
        Mistake("the mask was applied after the softmax (weights zeroed): the "
                "hidden keys still took their share of the denominator. Set "
                "their scores to -inf before the softmax.", mask_after),
        Mistake("exp overflowed (inf / inf is nan): subtract the row maximum, "
                "over the keys and the sink, before np.exp. The weights do "
                "not change; only the numbers stay finite.", no_max),
        Mistake("the hidden keys' scores were multiplied by the mask, so they "
                "became 0, not -inf: a score of 0 still takes weight (e^0 = "
                "1). Use np.where(mask, scores, -np.inf).", mask_times),
    ]


def check_attention_with_sinks(fn: Callable) -> Verdict:
    """Check ``attention_with_sinks(q, k, v, sinks, mask=None)``: q
    (..., H, N_q, d_k), k (..., H, N_k, d_k), v (..., H, N_k, d_v), sinks
    (H,), mask boolean (True = may attend). Returns the output
    (..., H, N_q, d_v), or ``(output, weights)`` whose weights
    (..., H, N_q, N_k) are checked too."""
    return run_cases(fn, attention_with_sinks_cases(), "check_attention_with_sinks",
                     mistakes=attention_with_sinks_mistakes())


# --- reach through sliding-window and full layers -------------------------------

def reach_cases() -> list[Case]:
    """No two mistakes below give the same numbers on every case."""
    out = []
    for label, args in [
        ("position 20, three sliding layers, window 4", (20, ["sliding"] * 3, 4)),
        ("position 10, one sliding layer, window 4", (10, ["sliding"], 4)),
        ("position 1000, five sliding layers, window 128 (gpt-oss's)",
         (1000, ["sliding"] * 5, 128)),
        ("position 5, two sliding layers, window 4: the start is nearer than "
         "the reach", (5, ["sliding"] * 2, 4)),
        ("position 6, three sliding layers, window 1 (each sees itself only)",
         (6, ["sliding"] * 3, 1)),
        ("position 1000, a sliding then a full layer, window 128 (gpt-oss's "
         "pattern)", (1000, ["sliding", "full"], 128)),
        ("position 1000, a full layer then two sliding layers, window 128: "
         "the sliding layers read outputs that already saw every key",
         (1000, ["full", "sliding", "sliding"], 128)),
        ("position 9, no layers at all: the query reaches only itself",
         (9, [], 4)),
    ]:
        out.append(Case(label, args, np.int64(ref.reach_after_layers(*args))))
    return out


def reach_mistakes() -> list[Mistake]:
    """The first case has several layers, so that a window off by one on
    every layer and off by one once (on the first layer only) differ; the
    full-first case catches a rule that looks at the last layer only."""
    def n_sliding(types):
        return sum(t == "sliding" for t in types)

    def sliding_only(p, t, w):
        return max(0, p - len(t) * (w - 1))

    def distance(p, t, w):
        # an empty stack gives 0 here as it does for "empty stack -> 0";
        # the distance mistake fails the first case already, so it is not
        # offered where the two cannot be told apart
        if not t:
            return -1
        return p - (0 if "full" in t else sliding_only(p, t, w))

    return [
        Mistake("one too far back per layer: a window of W keys includes the "
                "query's own, so one sliding layer reaches W - 1 positions "
                "back, not W.",
                lambda p, t, w: 0 if "full" in t else max(0, p - len(t) * w)),
        Mistake("the result is below 0 on a short sequence: no key comes "
                "before position 0 (clamp with max(0, ...)).",
                lambda p, t, w: 0 if "full" in t else p - len(t) * (w - 1)),
        Mistake("a full layer was counted like a sliding one: one full "
                "(causal) layer anywhere in the stack reaches position 0.",
                lambda p, t, w: max(0, p - len(t) * (w - 1))),
        Mistake("the reach does not grow with the number of layers: each "
                "sliding layer reaches W - 1 further back from where the "
                "previous one reached.",
                lambda p, t, w: 0 if "full" in t else
                max(0, p - min(n_sliding(t), 1) * (w - 1))),
        Mistake("the result is how far back the query reaches, not the "
                "earliest position: return the position of the earliest key.",
                distance),
        Mistake("one position too far back in all, not one per layer: the "
                "first layer reaches W positions back and the others W - 1? "
                "Every sliding layer, the first included, reaches W - 1 "
                "back, because each window counts the query's own key.",
                lambda p, t, w: 0 if "full" in t else
                (max(0, sliding_only(p, t, w) - 1) if t else p)),
        Mistake("only the last layer was checked for being full: a full layer "
                "ANYWHERE in the stack reaches position 0. Sliding layers "
                "after it read outputs that have already seen every key, so "
                "test 'full' in layer_types.",
                lambda p, t, w: 0 if t and t[-1] == "full" else sliding_only(p, t, w)),
        Mistake("an empty stack returned 0: with no layers nothing is mixed, "
                "so the query reaches only its own key, position itself. "
                "Return 0 only when a full layer is in the stack.",
                lambda p, t, w: 0 if "full" in t or not t else sliding_only(p, t, w)),
        Mistake("the full layer was skipped: only the sliding layers were "
                "counted. A full (causal) layer is not a step of no reach: it "
                "sees every earlier key, so with one in the stack the answer "
                "is 0.", lambda p, t, w: max(0, p - n_sliding(t) * (w - 1))),
    ]


def check_reach_after_layers(fn: Callable) -> Verdict:
    """Check ``reach_after_layers(position, layer_types, window)``: the
    earliest key position a query at ``position`` reaches through layers of
    type "sliding" (window keys, its own included) or "full"."""
    return run_cases(fn, reach_cases(), "check_reach_after_layers", rtol=0, atol=0,
                     mistakes=reach_mistakes())
