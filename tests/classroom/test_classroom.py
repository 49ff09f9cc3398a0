"""The classroom kit: every chapter runs alone, presents as slides, and has a student copy.

- Bootstrap: the first code cell of every chapter is the standard set-up cell, up to
  date with the repository set in _config.yml. With attnbook installed it prints nothing
  (nbval also runs it); without it, it finds the book's folder, installs it in Colab, or
  explains how to get it.
- Slides: every cell has RISE slide metadata; headings start slides; the set-up cell and
  the solutions are skipped; nbconvert exports each chapter as reveal.js slides.
- Student copies: solutions removed, no solution text left, stubs report "not done yet",
  and each copy runs: the cells the removal can affect (``nbtools.student_slice``) are
  executed in order; the others are identical to the original's, which nbval executes.

The chapters are put in shape by `make outputs` (``python -m attnbook.nbtools prepare``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attnbook import nbtools

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
FIX = "run `make outputs` (it runs `python -m attnbook.nbtools prepare`)"


def load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def src(cell):
    return nbtools._source(cell)


# --- bootstrap cell -------------------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_first_code_cell_is_the_bootstrap_cell(path):
    nb = load(path)
    first = next(c for c in nb["cells"] if c["cell_type"] == "code")
    assert nbtools.BOOTSTRAP_TAG in first["metadata"].get("tags", []), f"{path.name}: no bootstrap cell: {FIX}"
    assert src(first) == nbtools.bootstrap_source(), \
        f"{path.name}: the bootstrap cell is not up to date with _config.yml (repository url/branch): {FIX}"
    assert "remove-cell" in first["metadata"]["tags"], "the set-up cell is not shown on the site"
    assert first["outputs"] == [], f"{path.name}: the bootstrap cell printed something with attnbook installed"
    markdown_before = [c for c in nb["cells"][: nb["cells"].index(first)] if c["cell_type"] == "markdown"]
    assert markdown_before and src(markdown_before[0]).startswith("# "), "the title comes first"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_chapter_is_already_prepared(path, tmp_path):
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    assert not nbtools.prepare(copy), f"{path.name}: not in the standard shape: {FIX}"


def run_bootstrap(cwd, prelude="", isolated=True):
    """Run the bootstrap cell in a fresh interpreter; with isolated=True attnbook is not installed."""
    code = prelude + "\n" + nbtools.bootstrap_source() + "\nimport attnbook\nprint('IMPORTED', attnbook.__file__)\n"
    args = [sys.executable] + (["-S", "-I"] if isolated else []) + ["-c", code]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_bootstrap_is_silent_when_attnbook_is_installed(tmp_path):
    proc = run_bootstrap(tmp_path, isolated=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:-1] == [] and proc.stderr == "", proc.stdout + proc.stderr


def test_bootstrap_uses_the_book_folder_when_not_installed():
    """Binder, a JupyterHub (nbgitpuller), a downloaded zip: the notebook sits in chapters/."""
    proc = run_bootstrap(ROOT / "chapters")
    assert proc.returncode == 0, proc.stderr
    assert f"Using the helper package attnbook from {ROOT}" in proc.stdout
    assert f"IMPORTED {ROOT / 'attnbook' / '__init__.py'}" in proc.stdout


def test_bootstrap_explains_how_to_get_attnbook(tmp_path):
    """A notebook downloaded alone, with no attnbook anywhere: a clear message, not a bare import error.
    (In Colab: tests/classroom/test_repository.py, which also checks what it installs, if anything.)"""
    url, commit = nbtools.repository()
    proc = run_bootstrap(tmp_path)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: This chapter needs the book's helper package"), proc.stderr
    assert "make lab" in last
    if url is not None:
        assert f'%pip install "attnbook @ git+{url}@{commit}"' in last


def test_bootstrap_inserts_then_updates(tmp_path):
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "id": "t", "metadata": {}, "source": ["# Title"]},
        {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 1, "outputs": [], "source": ["x = 1"]},
    ]}
    assert nbtools.bootstrap(nb, "print('old')")
    assert [c.get("id") for c in nb["cells"]] == ["t", "bootstrap", "c"]
    assert not nbtools.bootstrap(nb, "print('old')"), "a second run changes nothing"
    assert nbtools.bootstrap(nb, "print('new')") and src(nb["cells"][1]) == "print('new')"
    assert len(nb["cells"]) == 3


# --- markdown cells and slides ----------------------------------------------------------------

def test_split_respects_fences_and_gates():
    text = textwrap.dedent("""\
        Intro.

        ```python
        ## not a heading: inside a code fence
        ```

        ## A section
        Text.
        ````{solution-end}
        ````

        ```{exercise}
        :label: ex
        Do it.
        ```

        ````{solution-start} ex
        :class: dropdown
        ````

        The answer.""")
    parts = nbtools._split_markdown(text)
    assert [p.splitlines()[0] for p in parts] == ["Intro.", "## A section", "```{exercise}", "````{solution-start} ex"]
    assert "## not a heading" in parts[0] and parts[1].endswith("````{solution-end}\n````")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_cell_has_slide_metadata(path):
    nb = load(path)
    mask = nbtools.solution_mask(nb)
    for cell, in_solution in zip(nb["cells"], mask):
        kind = cell["metadata"].get("slideshow", {}).get("slide_type")
        assert kind in nbtools.SLIDE_TYPES, f"{path.name}: a cell without slide metadata: {FIX}\n{src(cell)[:80]}"
        first = src(cell).lstrip().split("\n", 1)[0]
        if cell["cell_type"] == "markdown" and first.startswith(("# ", "## ")) and not in_solution:
            assert kind == "slide", f"{path.name}: heading {first!r} does not start a slide"
        if in_solution or nbtools.BOOTSTRAP_TAG in cell["metadata"].get("tags", []):
            assert kind == "skip", f"{path.name}: a solution or set-up cell would be shown on a slide"
    assert nb["cells"][0]["metadata"]["slideshow"]["slide_type"] == "slide"


@pytest.fixture(scope="module")
def slides_exporter():
    """One exporter for every chapter: its templates are loaded and compiled once."""
    from nbconvert import SlidesExporter

    return SlidesExporter()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_slides_export(path, slides_exporter):
    html, _ = slides_exporter.from_filename(str(path))
    assert html.count("<section") >= 3, "too few slides"
    solution_code = [src(c) for c, m in zip(load(path)["cells"], nbtools.solution_mask(load(path)))
                     if m and c["cell_type"] == "code"]
    first_lines = [s.strip().splitlines()[-1] for s in solution_code if s.strip()]
    assert first_lines
    assert not any(line.replace('"', "&quot;") in html for line in first_lines if len(line) > 20), \
        "solution code appears on the slides"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_image_alt_text_is_on_one_line(path):
    """MyST drops the line breaks inside ![alt](...), gluing words together ("matricesto")."""
    for cell in load(path)["cells"]:
        if cell["cell_type"] == "markdown":
            for alt in re.findall(r"!\[([^\]]*)\]\(", src(cell)):
                assert "\n" not in alt, f"{path.name}: alt text split over lines: {alt[:80]}..."


# --- student copies ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    # the whole answer key (key=True): sealing executes the chapters once (tests/classroom/test_student_kit.py)
    nbtools.write_student_copies(out, NOTEBOOKS, key=True)
    return out


def solution_lines(nb):
    """Lines of solution cells that appear nowhere outside the solutions (worth looking for)."""
    mask = nbtools.solution_mask(nb)
    outside = "\n".join(src(c) for c, m in zip(nb["cells"], mask) if not m)
    lines = set()
    for cell, in_solution in zip(nb["cells"], mask):
        if in_solution:
            for line in src(cell).splitlines():
                line = line.strip()
                if len(line) >= 12 and line not in outside and not re.fullmatch(r"[`:]+(\{solution-\w+\}.*)?", line):
                    lines.add(line)
    return lines


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_has_no_solution(path, student_dir):
    original = load(path)
    copy = load(student_dir / path.name)
    text = "\n".join(src(c) for c in copy["cells"])
    leaks = solution_lines(original)
    assert leaks, "the chapter has no solutions?"
    leaked = [line for line in leaks if line in text]
    assert not leaked, f"{path.name}: solution text in the student copy: {leaked[:5]}"
    assert "{solution-start}" not in text and "{solution-end}" not in text
    assert "{exercise}" in text, "the exercises themselves are kept"
    assert all(c.get("outputs") == [] for c in copy["cells"] if c["cell_type"] == "code"), "outputs are cleared"
    assert "../figures/" not in text, "figure paths point into the book, not the student folder"
    for name in re.findall(r"\]\((figures/[^)]+)\)", text):
        assert (student_dir / name).exists(), f"{name} is not in the student folder"


# The student copies run in one kernel, one after the other, each in a fresh namespace.
#
# Not with nbclient: nbclient answers an Output widget (the sliders' `interactive`) like a
# front end, sending a comm_msg on the shell socket while it waits for the cell's
# execute_reply on that same socket; jupyter_client's Session.send sends it through a
# synchronous shadow of the asyncio socket, which can swallow the "reply arrived" wake-up
# of libzmq's edge-triggered socket FD. The reply then sits unread until the poll's timeout
# (600 s) and the cell "passes" ten minutes late: the stall of `make test` (issue 11; see
# "Tests" in README.md). jupyter_client's blocking client polls with
# zmq_poll, which cannot miss a message that is already there.
#
# One kernel: starting a kernel and importing NumPy and Matplotlib costs more than most
# chapters' cells; nbval already runs every chapter in a kernel of its own. Before each copy
# the namespace is reset (%reset -f) and every figure closed. Figures are drawn with the
# non-interactive Agg backend (nothing is rasterised: nbval has checked the figures of the
# same code), so a student copy costs what its own computations cost.
CELL_TIMEOUT = 60  # s; the slowest cell (a timing in chapter 09) took 30 s at a load average of 20
START_TIMEOUT = 60  # s, for the kernel to start


class CellHung(Exception):
    pass


class StudentKernel:
    """One python3 kernel driven by jupyter_client's blocking client."""

    def __init__(self, cwd: Path, log: Path):
        self.cwd, self.log = cwd, log
        self.start()

    def start(self):
        self.km = nbtools.ipc_kernel_manager()(kernel_name="python3")  # no TCP port to share
        self.km.start_kernel(cwd=str(self.cwd), stderr=open(self.log, "ab"),
                             env={**os.environ, "MPLBACKEND": "agg"})
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=START_TIMEOUT)

    def stop(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def run(self, source: str, timeout: float = CELL_TIMEOUT) -> list[dict]:
        """Execute one cell; return its outputs. Raises CellHung after ``timeout`` seconds."""
        from queue import Empty

        msg_id = self.kc.execute(source, store_history=False, allow_stdin=False, stop_on_error=False)
        deadline = time.monotonic() + timeout
        outputs = []
        while True:
            try:
                msg = self.kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.01))
            except Empty:
                raise CellHung(f"no result within {timeout:g} s") from None
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                break
            if kind in ("stream", "error", "display_data", "execute_result"):
                outputs.append({"output_type": kind, **msg["content"]})
        while True:  # the execute_reply (already sent: the kernel is idle)
            try:
                reply = self.kc.get_shell_msg(timeout=max(deadline - time.monotonic(), 1))
            except Empty:
                raise CellHung(f"no execute_reply within {timeout:g} s") from None
            if reply["parent_header"].get("msg_id") == msg_id:
                return outputs

    def recover(self):
        """After a hung cell: interrupt it; if the kernel does not answer, start a new one."""
        self.km.interrupt_kernel()
        try:
            if self.run("pass", timeout=10) == []:
                return
        except CellHung:
            pass
        self.stop()
        self.start()

    def fresh_namespace(self):
        self.run("%reset -f\nimport os, matplotlib.pyplot\nmatplotlib.pyplot.close('all')\n"
                 f"os.chdir({str(self.cwd)!r})\ndel os, matplotlib")


@pytest.fixture(scope="module")
def student_kernel(student_dir, tmp_path_factory):
    log = tmp_path_factory.mktemp("kernel") / "stderr.log"
    kernel = StudentKernel(student_dir, log)
    yield kernel
    kernel.stop()


def execute_student_copy(kernel, nb, name, timeout=CELL_TIMEOUT, indices=None):
    """Run the code cells of a student copy in order (only ``indices``, if given).

    The outputs are stored on the cells that ran."""
    kernel.fresh_namespace()
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or (indices is not None and index not in indices):
            continue
        started = time.monotonic()
        try:
            cell["outputs"] = kernel.run(src(cell), timeout)
        except CellHung as hung:
            kernel.recover()  # the next chapter gets a working kernel
            log = kernel.log.read_text(errors="replace")[-2000:] if kernel.log.exists() else ""
            pytest.fail(f"{name}: cell {index} (id {cell.get('id')}) hung: {hung} "
                        f"(started {time.monotonic() - started:.0f} s ago):\n{src(cell)[:400]}"
                        f"\n--- kernel stderr ---\n{log}", pytrace=False)


def check_student_run(nb, name, ran):
    """The cells that ran raised nothing (unless tagged raises-exception).

    Every exercise stub among them says "not done yet", and there is at least one."""
    stubs = 0
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or index not in ran:
            continue
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors or "raises-exception" in cell["metadata"].get("tags", []), (
            f"{name}: cell {index} raised {errors[0]['ename']}: {errors[0]['evalue']}\n"
            f"{src(cell)[:300]}")
        if nbtools.is_exercise_stub(cell):
            stubs += 1
            out = "".join(o.get("text", "") for o in cell["outputs"] if o["output_type"] == "stream")
            assert "not done yet" in out, \
                f"{name}: cell {index}: the checker did not say 'not done yet':\n{out}"
    assert stubs >= 1, f"{name}: no auto-checked exercise stub"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_student_copy_executes_and_stubs_say_not_done_yet(path, student_dir, student_kernel,
                                                          record_property):
    """The student copy runs, and each exercise stub's checker says "not done yet".

    Only the copy's slice runs (``nbtools.student_slice``): the set-up cell, the stubs, every
    cell that reads a name a removed solution wrote (and, transitively, what such cells
    write), and every earlier cell that writes a name these read. The cells outside the slice
    are byte-identical to the original's and, by the analysis, read nothing a solution wrote,
    so they run in the copy as in the original, which nbval executes cell by cell. That the
    slice still catches a copy the removal broke: tests/tooling/test_nbtools.py (the slicer's rules)
    and test_a_broken_student_copy_fails_in_the_slice_as_in_full (executed).
    """
    missing = nbtools.missing_requirements(path)
    if missing:
        pytest.skip(f"{path.name} {nbtools.skip_reason(missing)}")
    nb = load(student_dir / path.name)
    ran = nbtools.student_slice(load(path), nb)
    code = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    record_property("student_cells_run", f"{len(ran)} of {len(code)}")
    print(f"{path.name}: {len(ran)} of {len(code)} code cells run (the slice)")
    stubs = {i for i in code if nbtools.is_exercise_stub(nb["cells"][i])}
    assert stubs <= set(ran), "every exercise stub is in the slice"
    execute_student_copy(student_kernel, nb, path.name, indices=ran)
    check_student_run(nb, path.name, ran)


def test_a_hung_cell_fails_fast_and_names_the_cell(student_kernel):
    """A cell that never finishes fails after the per-cell timeout, naming the cell; the next runs."""
    nb = {"cells": [{"cell_type": "code", "id": "sleepy", "metadata": {}, "outputs": [],
                     "source": "import time\ntime.sleep(60)"}]}
    started = time.monotonic()
    with pytest.raises(pytest.fail.Exception) as failure:
        execute_student_copy(student_kernel, nb, "hang.ipynb", timeout=1)
    assert time.monotonic() - started < 20
    assert "hang.ipynb: cell 0 (id sleepy) hung" in str(failure.value) and "time.sleep(60)" in str(failure.value)
    assert student_kernel.run("print(6 * 7)")[0]["text"] == "42\n", "the kernel did not recover"


def test_student_copy_adds_a_stub_where_an_exercise_has_no_code():
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {"widgets": {}}, "cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["```{exercise}\n:label: ex-a\nExplain.\n```"]},
        {"cell_type": "markdown", "id": "b", "metadata": {}, "source": ["````{solution-start} ex-a\n:class: dropdown\n````"]},
        {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": 3, "outputs": [], "source": ["secret = 42"]},
        {"cell_type": "markdown", "id": "d", "metadata": {}, "source": ["````{solution-end}\n````"]},
        {"cell_type": "code", "id": "e", "metadata": {}, "execution_count": 4,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "x"}], "source": ["print(1)"]},
    ]}
    out = nbtools.student_copy(nb)
    sources = [src(c) for c in out["cells"]]
    assert sources[1].startswith("# Exercise ex-a: your code here") and "secret" not in "".join(sources)
    assert out["cells"][-1]["outputs"] == [] and out["cells"][-1]["execution_count"] is None
    assert "widgets" not in out["metadata"]
    assert len(nb["cells"]) == 5, "the original is not modified"


def tiny_notebook(*cells):
    """A notebook from ("code" | "md" | "solution", source) pairs; a solution is gated."""
    out = []
    for k, (kind, text) in enumerate(cells):
        if kind == "solution":
            out.append({"cell_type": "markdown", "id": f"s{k}", "metadata": {},
                        "source": f"````{{solution-start}} ex{k}\n:class: dropdown\n````"})
        extra = {} if kind == "md" else {"outputs": [], "execution_count": None}
        out.append({"cell_type": "markdown" if kind == "md" else "code", "id": f"c{k}",
                    "metadata": {}, "source": text, **extra})
        if kind == "solution":
            out.append({"cell_type": "markdown", "id": f"e{k}", "metadata": {},
                        "source": "````{solution-end}\n````"})
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": out}


def test_a_broken_student_copy_fails_in_the_slice_as_in_full(student_kernel):
    """A later cell uses what a solution defined: the copy breaks (NameError), and running the
    slice catches it, as running every cell does: the same verdict."""
    original = tiny_notebook(
        ("code", "from attnbook import check\nlimit = 3"),
        ("code", "print('unrelated', limit)"),
        ("md", "```{exercise}\n:label: ex2\nWrite helper.\n```"),
        ("code", "def helper(n):\n    raise NotImplementedError\n\n"
                 "check.check_causal_mask(helper)"),
        ("solution", "def scale(x):\n    return 2 * x"),
        ("code", "print(scale(limit))"),
    )
    copy = nbtools.student_copy(original)
    ran = nbtools.student_slice(original, copy)
    uses = next(i for i, c in enumerate(copy["cells"]) if src(c) == "print(scale(limit))")
    unrelated = next(i for i, c in enumerate(copy["cells"]) if src(c).startswith("print('unrel"))
    assert uses in ran and "scale" in ran[uses] and unrelated not in ran, ran
    verdicts = []
    for indices in (ran, None):
        nb = json.loads(json.dumps(copy))
        execute_student_copy(student_kernel, nb, "broken.ipynb", indices=indices)
        broken = r"cell \d+ raised NameError: name 'scale'"
        with pytest.raises(AssertionError, match=broken) as failed:
            check_student_run(nb, "broken.ipynb", ran if indices else range(len(nb["cells"])))
        verdicts.append(str(failed.value).splitlines()[0])
    assert verdicts[0] == verdicts[1]
