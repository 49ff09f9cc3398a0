"""The checkers of chapters 19b and 21b: the answer key passes; every listed
wrong answer fails with its own hint; no two mistakes give the same result on
every case."""

import numpy as np
import pytest

from attnbook import check
from attnbook import reference as ref
from attnbook.check import compressed as check_compressed
from attnbook.check import kv_sharing as check_kv

from checker_hints import assert_its_hint, run


def _k_eq_v(raw, scale, pos):
    v = raw / np.sqrt(np.mean(raw * raw, axis=-1, keepdims=True) + 1e-6)
    return ref.proportional_rope(v * scale, pos), v


@pytest.mark.parametrize("checker, fn", [
    (check.check_compress_kv, ref.compress_kv),
    (check.check_compressed_causal_mask, ref.compressed_causal_mask),
    (check.check_kv_source_layers, ref.kv_source_layers),
    (check.check_k_eq_v_key_value, _k_eq_v),
])
def test_answer_key_passes(checker, fn):
    assert run(checker, fn)[0]


# The wrong answers of each checker, by the words of their hints.
COMPRESS = {
    "softmax over the channels": "over the channels",
    "last incomplete window kept": "incomplete window was kept",
    "position bias left out": "position bias was left out",
    "window averaged": "window was averaged",
    "one weight per token for all channels": "one weight per token",
    "overlapping windows (stride 1)": "windows overlap",
    "bias added after the softmax": "added to the weights after",
    "strided windows (reshape (rate, N // rate, d))": "the windows are strided",
    "last window zero-padded and kept": "padded with zeros",
    "sigmoid gate": "the gate was a sigmoid",
    "weights times the gate logits": "multiplied the gate logits",
}
MASK = {
    "one window too early (w <= (t + 1) // rate)": "one window too early",
    "one token too late (w < t // rate)": "one token too late",
    "window's first token compared with t": "FIRST token",
    "the last incomplete window kept as a column": "one column too many",
    "transposed": "transposed",
    "the token-level causal mask": "token-level causal mask",
    "window's start compared strictly, w*rate < t": "start was compared with t",
    "inverted (True = blocked)": "the mask is inverted",
    "nothing masked": "nothing is masked",
}
SOURCES = {
    "last non-shared layer of any type": "whatever its type",
    "first layer of the type": "FIRST layer of the type",
    "the layer just before": "layer just before it",
    "another shared layer": "another SHARED layer",
    "one layer too few shared": "one layer too few",
    "one layer too many shared": "one layer too many",
    "-1 for a shared layer": "not -1",
    "indices counted from 1": "counted from 1",
    "-1 for a layer that is not shared": "reads its OWN keys",
    "only the shared layers listed": "only the shared layers are listed",
}
K_EQ_V = {
    "value scaled like the key": "scaled like the key",
    "value rotated": "value was rotated",
    "value is the key itself": "value is the key itself",
    "value not normed": "value was not normed",
    "key rotated before norm and scale": "rotated before it was normed",
    "key's scale left out": "learned scale was left out",
    "k and v swapped": "are swapped",
    "RoPE on every pair": "turned every pair",
    "RMSNorm's epsilon left out": "epsilon (1e-6) was left out",
    "key scaled by 1 + k_scale (Gemma 2/3 norm)": "(1 + k_scale)",
    "RMSNorm over the tokens (axis -2)": "ran over the tokens",
    "LayerNorm instead of RMSNorm": "subtracted the mean",
    "epsilon outside the square root": "outside the square root",
}

CHECKERS = [
    (check.check_compress_kv, check_compressed.compress_mistakes, COMPRESS,
     check_compressed.compress_cases),
    (check.check_compressed_causal_mask, check_compressed.compressed_mask_mistakes, MASK,
     check_compressed.compressed_mask_cases),
    (check.check_kv_source_layers, check_kv.kv_source_mistakes, SOURCES,
     check_kv.kv_source_cases),
    (check.check_k_eq_v_key_value, check_kv.k_eq_v_mistakes, K_EQ_V,
     check_kv.k_eq_v_cases),
]
PARAMS = [(c, m, h, i) for c, m, h, _ in CHECKERS for i in range(len(h))]
IDS = [list(h)[i] for _, _, h, i in PARAMS]


@pytest.mark.parametrize("checker, mistakes, hints, index", PARAMS, ids=IDS)
def test_each_mistake_gets_its_own_hint(checker, mistakes, hints, index):
    # k and v swapped: the returned value IS the key, so the hint "the value is
    # the key itself" rightly shows beside the swap's own
    both = list(hints)[index] == "k and v swapped"
    report = assert_its_hint(checker, mistakes(), hints, index, only=not both)
    if both:
        assert "value is the key itself" in " ".join(report.split())


def _as_arrays(result):
    if isinstance(result, tuple):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


@pytest.mark.parametrize("mistakes, cases", [(m, c) for _, m, _, c in CHECKERS])
def test_no_two_mistakes_agree_on_every_case(mistakes, cases):
    cs = cases()
    results = [[_as_arrays(m.fn(*c.args, **c.kwargs)) for c in cs] for m in mistakes()]

    def same(a, b):
        return all(len(x) == len(y) and all(
            u.shape == w.shape and np.allclose(u, w) for u, w in zip(x, y))
            for x, y in zip(a, b))
    for i in range(len(results)):
        for j in range(i + 1, len(results)):
            assert not same(results[i], results[j]), (i, j)


def test_errors_are_clear():
    with pytest.raises(ValueError, match="position_bias must be"):
        ref.compress_kv(np.zeros((8, 3)), np.zeros((8, 3)), np.zeros((3, 3)), 4)
    with pytest.raises(ValueError, match="gate_logits"):
        ref.compress_kv(np.zeros((8, 3)), np.zeros((8, 2)), np.zeros((4, 3)), 4)
    with pytest.raises(ValueError, match="rate must be >= 1"):
        ref.compressed_causal_mask(8, 0)
    with pytest.raises(TypeError, match="rate must be an integer"):
        ref.compressed_causal_mask(8, 2.5)
    with pytest.raises(ValueError, match="num_kv_shared_layers"):
        ref.kv_source_layers(["full_attention"] * 3, 3)
    with pytest.raises(ValueError, match="no"):
        ref.kv_source_layers(["sliding_attention", "full_attention"], 1)


def test_compress_kv_properties():
    """Equal gates average the window; a huge gate picks its token; the mask
    row of a query opens one entry each time a window closes."""
    rng = np.random.default_rng(0)
    kv = rng.normal(size=(12, 3))
    out = ref.compress_kv(kv, np.zeros((12, 3)), np.zeros((4, 3)), 4)
    assert np.allclose(out, kv.reshape(3, 4, 3).mean(axis=1))
    z = np.zeros((12, 3))
    z[5] = 50.0                                    # token 5: slot 1 of window 1
    assert np.allclose(ref.compress_kv(kv, z, np.zeros((4, 3)), 4)[1], kv[5])
    mask = ref.compressed_causal_mask(12, 4)
    assert mask.sum(axis=1).tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3]
