"""attnbook: the helper package of the attention book.

What is not the lesson lives here: the answer key (:mod:`attnbook.reference`),
exercise checkers (:mod:`attnbook.check`), plotting (:mod:`attnbook.plots`),
widget plumbing (:mod:`attnbook.widgets`) and the diagrams in ``figures/``
(:mod:`attnbook.diagrams`).
"""

__version__ = "0.1.0"

# The answer key and the checkers of each later part live in modules of their
# own (reference_llm, check_llm, ...) that import helpers from reference and
# check, which re-export their names. Loading reference and check first makes
# `import attnbook.reference_llm` or `attnbook.check_llm` work on its own too
# (no circular import). Without NumPy (a chapter's set-up cell checking that
# the package is found) there is nothing to load.
try:
    import numpy as _numpy  # noqa: F401
except ModuleNotFoundError:  # pragma: no cover
    pass
else:
    from . import check as _check  # noqa: F401
    from . import reference as _reference  # noqa: F401
