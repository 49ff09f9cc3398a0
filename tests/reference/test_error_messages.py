"""Every error the answer key raises fits in 79 columns per line, with its
"ValueError: " (or "TypeError: ") prefix: the book shows them in its outputs.
Each case triggers one raise in attnbook/reference.py and checks that the message
names what it should (the caller's shapes)."""

import numpy as np
import pytest

from attnbook import reference as ref

ONES = np.ones


def three():
    return ONES((3, 4)), ONES((5, 4)), ONES((5, 2))


def fully_masked():
    q, k, v = three()
    mask = ONES((3, 5), bool)
    mask[1] = False
    ref.scaled_dot_product_attention(q, k, v, mask)


def fully_masked_batched():
    q, k, v = ONES((2, 3, 4, 4)), ONES((2, 3, 5, 4)), ONES((2, 3, 5, 2))
    mask = ONES((2, 3, 4, 5), bool)
    mask[1, 2, 3] = False
    ref.scaled_dot_product_attention(q, k, v, mask)


W = np.ones((4, 12)), np.ones((4, 4))

CASES = [  # (name, call, exception type, text the message must contain)
    ("x of strings", lambda: ref.softmax(np.array(["a"])), TypeError, "numeric"),
    ("boolean x", lambda: ref.softmax(np.array([True])), TypeError, "numeric"),
    ("complex x", lambda: ref.softmax(np.array([1j])), TypeError, "real"),
    ("negative temperature", lambda: ref.softmax(ONES(3), temperature=-1), ValueError,
     "temperature"),
    ("scalar", lambda: ref.softmax(1.0), ValueError, "scalar"),
    ("nan", lambda: ref.softmax(np.array([np.nan, 1.0])), ValueError, "nan or +inf"),
    ("all -inf", lambda: ref.softmax(np.array([-np.inf, -np.inf])), ValueError, "entirely -inf"),
    ("mask does not broadcast", lambda: ref.scaled_dot_product_attention(
        *three(), ONES((4, 5), bool)), ValueError, "(4, 5)"),
    ("mask would enlarge", lambda: ref.scaled_dot_product_attention(
        *three(), ONES((2, 3, 5), bool)), ValueError, "(2, 3, 5)"),
    ("float mask", lambda: ref.scaled_dot_product_attention(*three(), ONES((3, 5))), TypeError,
     "True = may attend"),
    ("fully_masked choice", lambda: ref.scaled_dot_product_attention(
        *three(), fully_masked="nan"), ValueError, "fully_masked"),
    ("q is 1-D", lambda: ref.scaled_dot_product_attention(ONES(4), ONES((5, 4)), ONES((5, 2))),
     ValueError, "(4,)"),
    ("dk differs", lambda: ref.scaled_dot_product_attention(ONES((3, 4)), ONES((5, 3)),
                                                             ONES((5, 2))), ValueError, "(5, 3)"),
    ("Nk differs", lambda: ref.scaled_dot_product_attention(ONES((3, 4)), ONES((5, 4)),
                                                             ONES((6, 2))), ValueError, "(6, 2)"),
    ("batch does not broadcast", lambda: ref.scaled_dot_product_attention(
        ONES((2, 3, 4)), ONES((3, 5, 4)), ONES((3, 5, 2))), ValueError, "(2, 3, 4)"),
    ("dk is 0", lambda: ref.scaled_dot_product_attention(ONES((3, 0)), ONES((5, 0)),
                                                          ONES((5, 2))), ValueError, "dk is 0"),
    ("fully masked row", fully_masked, ValueError, "query (1,)"),
    ("fully masked row, batched", fully_masked_batched, ValueError, "query (1, 2, 3)"),
    ("negative length", lambda: ref.causal_mask(-1), ValueError, ">= 0"),
    ("lengths 2-D", lambda: ref.padding_mask(ONES((2, 2), int), 3), ValueError, "(2, 2)"),
    ("length too long", lambda: ref.padding_mask([5, 2], 4), ValueError, "[5, 2]"),
    ("split 1-D", lambda: ref.split_heads(ONES(4), 2), ValueError, "(4,)"),
    ("split not divisible", lambda: ref.split_heads(ONES((2, 3, 5)), 2), ValueError,
     "(2, 3, 5)"),
    ("merge 2-D", lambda: ref.merge_heads(ONES((3, 4))), ValueError, "(3, 4)"),
    ("weight shape", lambda: ref.multihead_attention(ONES((2, 3, 4)), ONES((4, 8)), W[1], 2),
     ValueError, "(4, 8)"),
    ("x 1-D", lambda: ref.multihead_attention(ONES(4), *W, 2), ValueError, "(4,)"),
    ("mask with too many axes", lambda: ref.multihead_attention(
        ONES((2, 3, 4)), *W, 2, ONES((2, 1, 1, 1, 3), bool)), ValueError, "(2, 1, 1, 1, 3)"),
    ("mask does not fit", lambda: ref.multihead_attention(
        ONES((2, 3, 4)), *W, 2, ONES((3, 1, 3), bool)), ValueError, "(3, 1, 3)"),
    ("cross x 1-D", lambda: ref.multihead_cross_attention(
        ONES(4), ONES((5, 4)), ONES((4, 4)), ONES((4, 8)), ONES((4, 4)), 2), ValueError, "(4,)"),
    ("cross widths", lambda: ref.multihead_cross_attention(
        ONES((3, 4)), ONES((5, 6)), ONES((4, 4)), ONES((4, 8)), ONES((4, 4)), 2), ValueError,
     "(5, 6)"),
    ("cross batches", lambda: ref.multihead_cross_attention(
        ONES((2, 3, 4)), ONES((3, 5, 4)), ONES((4, 4)), ONES((4, 8)), ONES((4, 4)), 2),
     ValueError, "(3, 5, 4)"),
]


@pytest.mark.parametrize("name, call, exc, text", CASES, ids=[c[0] for c in CASES])
def test_error_fits_79_columns_and_names_the_shapes(name, call, exc, text):
    with pytest.raises(exc) as info:
        call()
    message = f"{exc.__name__}: {info.value}"
    for line in message.splitlines():
        assert len(line) <= 79, f"{len(line)} characters: {line!r}"
    assert text in message, message


def test_error_in_an_indented_print_still_fits():
    # chapters print some errors as "  ValueError: ..." or after a short label; the
    # first line of the fully masked error leaves room for that
    with pytest.raises(ValueError) as info:
        fully_masked_batched()
    first = str(info.value).splitlines()[0]
    assert len("  ValueError: " + first) <= 79
