"""attnbook: the helper package of the attention book.

What is not the lesson lives here: the answer key (:mod:`attnbook.reference`),
exercise checkers (:mod:`attnbook.check`), plotting (:mod:`attnbook.plots`),
widget plumbing (:mod:`attnbook.widgets`) and the diagrams in ``figures/``
(:mod:`attnbook.diagrams`), live figures (:mod:`attnbook.live`) and the
notebook tools (:mod:`attnbook.nbtools`). Each part of the book has its answer
key in ``attnbook/reference/`` and its checkers in ``attnbook/check/``; the
shared validation (:mod:`attnbook.validate`) and checking machinery
(:mod:`attnbook.checking`) import nothing above them.
"""

__version__ = "0.1.0"
