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
# (no circular import). Both need NumPy only.
from . import check as _check  # noqa: E402,F401
from . import reference as _reference  # noqa: E402,F401
