"""Shared fixtures: the book is built once per test run, whichever worker asks first.

`make test` runs pytest with ``-n auto --dist loadfile``: each test file goes to one
worker, and the site tests (test_site.py) and the browser tests (test_browser.py) may
land on different workers. The first worker to ask for ``built_site`` builds the book
into a folder shared by all workers of the run; the others wait on a lock and reuse it.

The terminal summary prints the reports that tests attach as user properties named
``report:<title>`` (the page-weight table of the browser suite, for example), so they
show up under xdist too.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Folders never copied into the throwaway build tree (big, or not part of the book).
BUILD_IGNORE = (".venv", "_build", ".git", "__pycache__", ".pytest_cache", ".hypothesis",
                "student", "slides", "wheelhouse", ".ipynb_checkpoints", "node_modules")


def _build(out: Path) -> dict:
    src = out / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*BUILD_IGNORE))
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", str(src), "-W", "-n", "--keep-going"],
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return {"returncode": proc.returncode, "log": proc.stdout + proc.stderr,
            "html": str(src / "_build" / "html")}


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """Build the book once per run into a temporary folder with -W -n --keep-going.

    Returns a dict: ``returncode``, ``log`` (the build's output) and ``html`` (a Path).
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by every worker of this run
    out = base / "book-build"
    result_file = base / "book-build.json"
    with open(base / "book-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if result_file.exists():
                result = json.loads(result_file.read_text())
            else:
                if out.exists():
                    shutil.rmtree(out)
                out.mkdir()
                result = _build(out)
                result_file.write_text(json.dumps(result))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return {**result, "html": Path(result["html"])}


def pytest_terminal_summary(terminalreporter):
    """Print the reports tests attached with ``record_property("report:<title>", text)``."""
    seen = set()
    for key in ("passed", "failed"):
        for rep in terminalreporter.stats.get(key, []):
            for name, text in getattr(rep, "user_properties", []):
                if isinstance(name, str) and name.startswith("report:") and name not in seen:
                    seen.add(name)
                    terminalreporter.write_sep("-", name[len("report:"):])
                    terminalreporter.write_line(str(text))
