"""Running a checker and reading its report, for the tests of the Part VIII checkers
(chapters 19-22): each listed wrong answer must fail with the words of its own hint."""

from __future__ import annotations

import io
from contextlib import redirect_stdout


def run(checker, fn) -> tuple[bool, str]:
    """(the checker's verdict, what it printed) for the learner's function ``fn``."""
    buf = io.StringIO()
    with redirect_stdout(buf):
        verdict = checker(fn)
    return bool(verdict), buf.getvalue()


def assert_its_hint(checker, mistakes, hints: dict, index: int, *, only: bool = True) -> str:
    """``mistakes[index]`` fails, and its report names ``hints``' index-th words; with
    ``only``, no other mistake's words (the cases keep two mistakes apart)."""
    assert len(mistakes) == len(hints)
    passed, report = run(checker, mistakes[index].fn)
    assert not passed
    flat = " ".join(report.split())
    words = list(hints.values())
    assert words[index] in flat, report
    if only:
        others = [w for i, w in enumerate(words) if i != index]
        assert not any(w in flat for w in others), report
    return report
