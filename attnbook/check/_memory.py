"""What a learner's function allocates: the checkers of Part VI that ask for
code "without copying" (chapter 15's GQA, chapter 16's absorbed MLA) measure
the memory it holds at once, since equal numbers cannot tell a copy apart."""

from __future__ import annotations

import functools
import tracemalloc
from dataclasses import dataclass

import numpy as np

from ..checking import BadResult, Case


@dataclass
class MemoryCase(Case):
    """A case whose values are checked as usual, and whose call must not hold
    ``limit`` bytes or more at once. ``report(peak)`` is the message (a
    :class:`~attnbook.checking.BadResult`) when it does."""

    limit: int = 0
    report: object = None


def peak_bytes(fn, *args):
    """(result, the most bytes NumPy and Python held at once while ``fn(*args)``
    ran, above what they held before), measured with tracemalloc (NumPy
    reports its arrays to it)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        with np.errstate(all="ignore"):
            result = fn(*args)
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()


def _measured(call, fn, case):
    if not isinstance(case, MemoryCase):
        return call(fn, case)
    parts, peak = peak_bytes(call, fn, case)
    if peak >= case.limit:
        raise BadResult(case.report(peak))
    return parts


def within_memory(call):
    """A call adapter that also measures a :class:`MemoryCase`: it runs
    ``call(fn, case)`` and raises BadResult when the case's limit is reached
    (a partial, so a student kit can carry it as data)."""
    return functools.partial(_measured, call)
