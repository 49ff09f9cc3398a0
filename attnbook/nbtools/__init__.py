"""Notebook housekeeping, one module per job: `make outputs`, `make slides` and
`make student` use it.

:mod:`.shape` (``prepare``: split cells, set-up cell, slide metadata), :mod:`.setup_cell`,
:mod:`.slides`, :mod:`.student` and :mod:`.slicer` (student copies), :mod:`.execute`,
:mod:`.tidy`, :mod:`.requirements` (a notebook's optional packages); the command
line is :mod:`.__main__`. Chapters and tests import the names from here.

``python -m attnbook.nbtools prepare NOTEBOOK...`` (run by `make outputs` before it
executes the notebooks) puts every chapter in the book's standard shape:

- ``split``: a markdown cell is split before each ``##``/``###`` heading and at the
  solution gates (````{solution-start}```` begins a cell, ````{solution-end}```` ends
  one), so a slide starts at each section and every cell lies wholly inside or
  outside a solution. The rendered page does not change.
- ``bootstrap``: the first code cell is the standard set-up cell (:data:`BOOTSTRAP`):
  silent when the helper package is installed; opened alone (Colab, a downloaded
  notebook), it finds the package in the book's folder, installs it in Colab, or
  explains how to get it. The repository URL and branch come from ``_config.yml``.
- ``slides``: every cell gets RISE slide metadata (``slideshow.slide_type``).

``python -m attnbook.nbtools student OUTDIR NOTEBOOK...`` writes the student copies.

``python -m attnbook.nbtools execute NOTEBOOK...`` (run by `make outputs`) executes the
notebooks in place with nbconvert, after :func:`fix_nbclient_output_widget`.

``python -m attnbook.nbtools tidy NOTEBOOK...`` joins consecutive pieces of
one cell's printed output (their split depends on timing) and removes what executing a
slider cell stores: the widget state in the notebook's metadata and the widget
output of the cell (it carries a random model id, so keeping it would change
the file on every run). The site has no kernel to drive such a slider; the
static site shows the fixed-setting version of each demo instead. In
JupyterLab the slider appears when its cell is run. The exception: the
state of the live figures (``attnbook.live``), which run without a kernel,
is kept, with model ids numbered in order so re-execution gives the same
file.
"""

from ._io import BOOK_ROOT, BOOTSTRAP_TAG, SLIDE_TYPES, _source
from .execute import (CELL_TIMEOUT, _output_widget_publish_msg, execute,
                      fix_nbclient_output_widget, ipc_kernel_manager)
from .requirements import INSTALL_HINTS, missing_requirements, notebook_requirements, skip_reason
from .setup_cell import BOOTSTRAP, bootstrap, bootstrap_source, repository
from .shape import _split_markdown, prepare, split_cells
from .slicer import is_exercise_stub, student_slice
from .slides import slides, solution_mask
from .student import STUB, student_copy, write_student_copies
from .tidy import WIDGET_MIME, tidy

__all__ = ["tidy", "WIDGET_MIME", "split_cells", "bootstrap", "slides", "prepare", "student_copy",
           "bootstrap_source", "repository", "solution_mask", "BOOTSTRAP_TAG", "student_slice",
           "is_exercise_stub", "notebook_requirements", "missing_requirements", "skip_reason",
           "execute", "ipc_kernel_manager", "fix_nbclient_output_widget", "write_student_copies"]
