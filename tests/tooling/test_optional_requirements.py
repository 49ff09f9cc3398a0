"""Notebooks that need an optional package are skipped, with a reason, when it is missing.

The root conftest.py reads ``"attnbook": {"requires": [...]}`` from each notebook's
metadata. These tests run without PyTorch too: they use a package name that is
never installed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from attnbook import nbtools

ROOT = Path(__file__).resolve().parents[2]
ABSENT = "attnbook_no_such_package"


def write_notebook(path, requires, source='print("ran")'):
    nb = {
        "cells": [{"cell_type": "code", "execution_count": 1, "id": "c1", "metadata": {},
                   "outputs": [{"name": "stdout", "output_type": "stream", "text": ["ran\n"]}],
                   "source": [source]}],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                     **({"attnbook": {"requires": requires}} if requires is not None else {})},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_requirements_are_read_from_metadata(tmp_path):
    assert nbtools.notebook_requirements(write_notebook(tmp_path / "a.ipynb", None)) == []
    nb = write_notebook(tmp_path / "b.ipynb", ["numpy", ABSENT])
    assert nbtools.notebook_requirements(nb) == ["numpy", ABSENT]
    assert nbtools.missing_requirements(nb) == [ABSENT]


def test_skip_reason_names_the_package_and_the_command():
    assert "needs torch" in nbtools.skip_reason(["torch"]) and "make torch" in nbtools.skip_reason(["torch"])
    assert f"pip install {ABSENT}" in nbtools.skip_reason([ABSENT])


def test_the_pytorch_chapter_declares_torch():
    for page in ("10_pytorch", "10b_pytorch_apis", "10c_fully_masked"):
        assert nbtools.notebook_requirements(ROOT / "chapters" / f"{page}.ipynb") == ["torch"]


def test_pytest_skips_a_notebook_whose_package_is_missing(tmp_path):
    """Run pytest with the root conftest.py on two tiny notebooks: one skipped with its reason, one run."""
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    write_notebook(tmp_path / "needs_absent.ipynb", [ABSENT], source='raise SystemExit("must not run")')
    write_notebook(tmp_path / "plain.ipynb", [])
    # Only the nbval plugin is loaded (PYTEST_DISABLE_PLUGIN_AUTOLOAD): half the CPU time.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "nbval", "-p", "no:cacheprovider", "-rs", "--nbval",
         "--nbval-current-env", "-o", "addopts=", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed, 1 skipped" in out, out
    assert f"needs_absent.ipynb needs {ABSENT}, which is not installed" in out, out

