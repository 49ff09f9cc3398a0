"""Student copies (`make student`): solutions removed, outputs cleared, stubs
where an exercise had no code cell."""

from __future__ import annotations

import json
import re

import shutil
from pathlib import Path

from ._io import BOOK_ROOT, _lines, _load, _save, _source
from .slides import solution_mask

STUB = """\
# Exercise {label}: your code here (see the exercise above).
"""


def student_copy(nb: dict) -> dict:
    """A student's copy: solutions removed, a stub where an exercise had no code cell, no outputs.

    Solutions are the gated ``{solution-start}`` ... ``{solution-end}`` cells and every
    cell between them. The exercise stubs (functions raising NotImplementedError, whose
    checker then prints "not done yet") are kept as they are.
    """
    nb = json.loads(json.dumps(nb))
    cells, mask = [], solution_mask(nb)
    for i, (cell, in_solution) in enumerate(zip(nb["cells"], mask)):
        if in_solution:
            starts = re.search(r"\{solution-start\}\s*(\S+)", _source(cell)) if cell["cell_type"] == "markdown" else None
            if starts:
                # the exercise's own code cell, if any, sits between its directive and the solution
                label = starts.group(1)
                j = len(cells) - 1
                while j >= 0 and not (cells[j]["cell_type"] == "markdown" and f":label: {label}" in _source(cells[j])):
                    j -= 1
                if not any(c["cell_type"] == "code" for c in cells[j + 1:]) and (
                        any(c["cell_type"] == "code" for c, m in zip(nb["cells"][i:], mask[i:]) if m)):
                    cells.append({"cell_type": "code", "execution_count": None, "id": f"stub-{i}",
                                  "metadata": {"slideshow": {"slide_type": "fragment"}}, "outputs": [],
                                  "source": _lines(STUB.format(label=label).rstrip("\n"))})
            continue
        cells.append(cell)
    for cell in cells:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if cell["cell_type"] == "markdown":
            cell["source"] = _lines(_source(cell).replace("](../figures/", "](figures/"))
    if nb.get("nbformat_minor", 0) < 5:
        for cell in cells:
            cell.pop("id", None)
    nb["cells"] = cells
    nb["metadata"].pop("widgets", None)
    return nb


_LINK = re.compile(r"""(?:\]\(|\bsrc=["'])([^)"'\s]+)""")


def used_figures(outdir, written) -> list[str]:
    """The files of figures/ (paths inside it) that the kit's notebooks show: a Markdown image
    or an HTML src, in the English chapters (figures/X) and the Chinese ones (../figures/X,
    ../figures/zh/X)."""
    outdir = Path(outdir).resolve()
    found = set()
    for path in written:
        for cell in _load(path)["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for link in _LINK.findall(_source(cell)):
                if re.match(r"[a-z]+:", link):
                    continue
                target = (Path(path).resolve().parent / link.split("#")[0]).resolve()
                try:
                    inside = target.relative_to(outdir / "figures")
                except ValueError:
                    continue
                if (BOOK_ROOT / "figures" / inside).is_file():
                    found.add(inside.as_posix())
    return sorted(found)


def write_student_copies(outdir, notebooks, *, key: bool = False) -> list[Path]:
    """Write the student kit into outdir: the notebooks' student copies (and, in zh/, those of
    their Chinese edition), the files of figures/ they show, attnbook/,
    and the kit's README, requirements and Makefile (:mod:`.kit`).

    The folder is self-contained: hand it out as it is. The bootstrap cell finds the copy of
    attnbook in the folder. Unless ``key``, the answer-key functions that are the kit's own
    exercises are sealed in that copy (recorded by executing the notebooks once) and their
    checkers carry their cases as data.
    """
    from .kit import kit_checkers, record_calls, seal_package, sealed_names, write_kit_files

    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebooks:
        target = outdir / Path(path).name
        _save(target, student_copy(_load(path)))
        written.append(target)
        # the same chapter in Chinese (the Chinese edition, generated into zh/chapters), in zh/
        zh = BOOK_ROOT / "zh" / "chapters" / Path(path).name
        if zh.exists():
            copy = student_copy(_load(zh))
            for cell in copy["cells"]:
                if cell["cell_type"] == "markdown":
                    cell["source"] = _lines(_source(cell).replace("](figures/", "](../figures/"))
            (outdir / "zh").mkdir(exist_ok=True)
            _save(outdir / "zh" / zh.name, copy)
            written.append(outdir / "zh" / zh.name)
    shutil.rmtree(outdir / "figures", ignore_errors=True)
    for figure in used_figures(outdir, written):
        (outdir / "figures" / figure).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(BOOK_ROOT / "figures" / figure, outdir / "figures" / figure)
    if (BOOK_ROOT / "attnbook").is_dir():
        shutil.rmtree(outdir / "attnbook", ignore_errors=True)
        shutil.copytree(BOOK_ROOT / "attnbook", outdir / "attnbook",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_kit_data"))
    sealed, kept = [], []
    if not key:
        checkers = kit_checkers(notebooks)
        names = sealed_names(checkers)
        calls = record_calls(notebooks, names)
        kept = seal_package(outdir / "attnbook", names, calls, checkers)
        sealed = [n for n in names if n not in kept]
    write_kit_files(outdir, notebooks, sealed, kept, key)
    return written
