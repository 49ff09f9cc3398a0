"""A student kit's sealed answers: present only in a kit written by `make student`.

In the book itself this module does nothing. In a student kit
(:mod:`attnbook.nbtools.kit`) the answer-key functions that are the kit's own
exercises are not there as code: each is a table of the calls the kit's
chapters make (recorded when the kit was made), and the checkers of those
exercises carry their cases and the wrong answers they recognise as data
instead of the code that computes them. Imports nothing of attnbook but the
checking machinery.
"""

from __future__ import annotations

import hashlib
import pickle
import textwrap
from functools import lru_cache
from pathlib import Path

import numpy as np

DATA = Path(__file__).with_name("_kit_data")


class Sealed(NotImplementedError):
    """A sealed answer-key function was called with arguments no chapter of the kit uses."""


def _canon(x):
    if isinstance(x, np.ndarray):
        return ("nd", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return ("np", x.dtype.str, x.tobytes())
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_canon(i) for i in x))
    if isinstance(x, dict):
        return ("dict", tuple(sorted((str(k), _canon(v)) for k, v in x.items())))
    return ("py", type(x).__name__, repr(x))


def call_key(args, kwargs) -> str:
    """The key of one call: its arguments' types, shapes and exact values."""
    return hashlib.sha256(pickle.dumps(_canon((tuple(args), dict(kwargs))))).hexdigest()


@lru_cache(maxsize=None)
def _load(name):
    path = DATA / name
    if not path.exists():
        return None
    with open(path, "rb") as f:
        return pickle.load(f)


def sealed_function(name: str):
    """The kit's stand-in for answer-key function ``name``: the recorded calls only."""

    def sealed(*args, **kwargs):
        calls = (_load("calls.pkl") or {}).get(name, {})
        key = call_key(args, kwargs)
        if key not in calls:
            raise Sealed(
                f"reference.{name} is an exercise of this student kit:\n"
                "the kit carries only the calls its chapters make, and this\n"
                "is not one of them. Write it yourself (the exercise shows\n"
                "how), or ask your teacher for the kit with the answer key.")
        outcome, *value = pickle.loads(calls[key])
        if outcome == "raise":
            kind, message = value
            raise kind(message)
        return value[0]

    sealed.__name__ = sealed.__qualname__ = name
    sealed.__doc__ = f"Sealed in this student kit: {name} is one of its exercises."
    return sealed


def carried_checker(name: str):
    """In a kit, checker ``name`` running on the cases and mistakes it carries as data (read
    when it is first called: the data refers to the checker modules being imported)."""
    from .checking import run_cases

    def checker(fn):
        spec = _load("checkers.pkl")[name]
        by_label = spec["mistakes"]
        return run_cases(fn, spec["cases"], spec["name"],
                         mistakes=lambda case: by_label.get(case.label, []), **spec["options"])

    checker.__name__ = checker.__qualname__ = name
    checker.__doc__ = f"The checker {name}, on the cases this student kit carries as data."
    return checker


def sealed_code(name: str, elsewhere: bool = False):
    """The kit's stand-in for a checker's helper that computed an exercise's answer (or, with
    ``elsewhere``, for a checker of a chapter the kit does not have)."""

    def sealed(*args, **kwargs):
        if elsewhere:
            text = (f"attnbook.check's {name} checks an exercise of a chapter this "
                    "student kit does not have.")
        else:
            text = (f"attnbook.check's {name} computed the answers of an exercise of "
                    "this student kit, which carries them as data instead. Write the "
                    "exercise yourself, or ask your teacher for the kit with the "
                    "answer key.")
        raise Sealed(textwrap.fill(text, 79))

    sealed.__name__ = sealed.__qualname__ = name.rsplit(".", 1)[-1]
    sealed.__doc__ = f"Sealed in this student kit: {name}."
    return sealed


def seal_checkers(namespace: dict) -> None:
    """In a kit, the checkers of its exercises run on the cases they carry (no-op otherwise)."""
    data = _load("checkers.pkl")
    if not data:
        return
    for name, spec in data.items():
        namespace[name] = carried_checker(name)
        namespace[name].__doc__ = spec["doc"]
