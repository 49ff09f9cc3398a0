"""attnbook: the helper package of the attention book.

What is not the lesson lives here: the answer key (:mod:`attnbook.reference`),
exercise checkers (:mod:`attnbook.check`), plotting (:mod:`attnbook.plots`),
widget plumbing (:mod:`attnbook.widgets`) and the diagrams in ``figures/``
(:mod:`attnbook.diagrams`).
"""

__version__ = "0.1.0"
