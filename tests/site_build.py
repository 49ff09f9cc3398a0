"""Build the book into a throwaway folder, as `make book` does (-W -n --keep-going).

Used by the ``built_site`` fixture (conftest.py) when the tests run without `make`
(`make test` checks the site `make` built in _build). ``build(out)`` builds into
out/src/_build/html; conftest.py keeps its return code, log and html path in
out/book-build.json (RESULT) for the other workers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folders never copied into the throwaway build tree (big, or not part of the book).
BUILD_IGNORE = (".venv", "_build", ".git", "__pycache__", ".pytest_cache", ".hypothesis",
                "student", "slides", "wheelhouse", ".ipynb_checkpoints", "node_modules")
RESULT = "book-build.json"


def build(out: Path) -> dict:
    """Copy the book into out/src and build it there; returns returncode, log and html."""
    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*BUILD_IGNORE))
    proc = subprocess.run([sys.executable, "-m", "attnbook.build_site", str(src)],
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(src)})
    return {"returncode": proc.returncode, "log": proc.stdout + proc.stderr,
            "html": str(src / "_build" / "html")}
