"""Shared fixtures: the book is built once per test run, and toured in chromium once.

`make test` runs pytest with ``-n auto --dist loadfile`` on the site in _build/html,
which `make` has (re)built from scratch if any of its inputs changed since the last
build, keeping the build's log and exit code beside it (ATTNBOOK_SITE names that
folder). Run without make, the site is built once per run into a folder shared by every
worker (``built_site``): the first worker to ask builds it, under a lock (the scheduler
in the root conftest.py sends the browser's tour first, so that is where it happens).
Likewise the browser's tour of the built site (tests/site_tour.py) is taken once,
in four parts (``tour_part``, ``site_tour``), and what it saw is shared, as JSON, by
test_browser.py and test_live_figures.py; the scheduler in the root conftest.py runs those two
files on one worker, one after the other, and they share one chromium (closed after
the last of them by ``pytest_runtest_teardown`` in the root conftest.py).

The terminal summary prints the reports that tests attach as user properties named
``report:<title>`` (the page-weight table of the browser suite, for example), so they
show up under xdist too.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import traceback
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # site_build, site_tour
# Triton's interpreter must be chosen before anything imports triton (transformers imports it
# to see whether it is there; triton.language is built for the interpreter or not when it is
# first imported). Without an NVIDIA GPU, the Triton tests run in the interpreter.
if "TRITON_INTERPRET" not in os.environ and not Path("/dev/nvidiactl").exists():
    os.environ["TRITON_INTERPRET"] = "1"

import site_build  # noqa: E402


def _shared_dir(base: Path) -> Path:
    """The run's temporary folder shared by all workers (a worker's basetemp is inside it)."""
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _once_per_run(result_file: Path, compute) -> dict:
    """``compute()``'s JSON result, computed by the first worker to ask and kept in
    ``result_file`` (in the run's shared folder); the others wait on a lock and read it."""
    with open(result_file.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not result_file.exists():
                tmp = result_file.with_suffix(".tmp")
                tmp.write_text(json.dumps(compute()))
                tmp.replace(result_file)  # atomic: a reader sees all of it or nothing
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return json.loads(result_file.read_text())


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The book built once per run into a temporary folder with -W -n --keep-going.

    Returns a dict: ``returncode``, ``log`` (the build's output) and ``html`` (a Path).
    """
    made = os.environ.get("ATTNBOOK_SITE")
    if made:  # `make test`: the site `make` built in _build, up to date with every input
        made = Path(made)
        return {"returncode": int((made / "book.returncode").read_text()),
                "log": (made / "book.log").read_text(encoding="utf-8", errors="replace"),
                "html": made / "html"}
    out = _shared_dir(tmp_path_factory.getbasetemp()) / "book-build"
    out.mkdir(parents=True, exist_ok=True)
    result = _once_per_run(out / site_build.RESULT, lambda: site_build.build(out))
    return {**result, "html": Path(result["html"])}


@pytest.fixture(scope="session")
def tour_part(built_site, tmp_path_factory):
    """A function: part name -> what chromium saw on that part of its tour of the built site
    (tests/site_tour.py), as JSON. Each part is taken once per run, by whichever worker
    asks first, and shared through a file."""
    import site_tour as tour

    if not Path(tour.CHROMIUM).exists():
        pytest.skip("chromium is not installed: run `apt-get install chromium` (Debian/Ubuntu), "
                    "or set CHROMIUM=/path/to/chromium")
    pytest.importorskip("playwright.sync_api", reason="Playwright for Python is missing: "
                        "`pip install -r requirements.txt` (never `playwright install`: the "
                        "tests use Debian's chromium)")
    if built_site["returncode"] != 0:
        pytest.fail("the book did not build (see test_site.py)")
    shared = _shared_dir(tmp_path_factory.getbasetemp())

    def take(part: str) -> dict:
        slug = "".join(c if c.isalnum() else "-" for c in part)

        def run():
            try:
                return tour.run_part(part, built_site["html"])
            except Exception:
                return {"error": traceback.format_exc()}

        result = _once_per_run(shared / f"site-tour-{slug}.json", run)
        if "error" in result:
            pytest.fail(f"the browser's tour of the site failed ({part}):\n" + result["error"],
                        pytrace=False)
        return result

    return take


@pytest.fixture(scope="session")
def site_tour(tour_part):
    """The whole tour (every part, merged): see tests/site_tour.py."""
    import site_tour as tour

    return tour.merge({part: tour_part(part) for part in tour.PARTS})


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
