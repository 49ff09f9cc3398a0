"""Shared fixtures: the book is built once per test run, and toured in chromium once.

`make test` runs pytest with ``-n auto --dist loadfile`` on the site in _build/html,
which `make` has (re)built from scratch if any of its inputs changed since the last
build, keeping the build's log and exit code beside it (ATTNBOOK_SITE names that
folder). Run without make, the site is built once per run into a folder shared by every
worker (``built_site``): in a parallel run the controller starts the build in the
background as the run begins (``pytest_sessionstart``), so no worker sits idle waiting
for it; otherwise the first worker to ask builds it, under a lock. Likewise the browser's tour of the built site (tests/site_tour.py) is taken once,
in four parts (``tour_part``, ``site_tour``), and what it saw is shared, as JSON, by
test_browser.py and test_live_figures.py; the scheduler in the root conftest.py runs those two files on one
worker.

The terminal summary prints the reports that tests attach as user properties named
``report:<title>`` (the page-weight table of the browser suite, for example), so they
show up under xdist too.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))  # site_build, site_tour

import site_build  # noqa: E402

# The test files that need the built site; the background build starts only for a run that
# may include one of them.
SITE_TESTS = ("test_site.py", "test_browser.py", "test_live_figures.py")
BUILD_TIMEOUT = 900  # s: a cold build takes about 10 s alone, 40 s on a loaded machine


def _shared_dir(base: Path) -> Path:
    """The run's temporary folder shared by all workers (a worker's basetemp is inside it)."""
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _needs_site(config) -> bool:
    for arg in config.args:
        path = Path(arg.split("::", 1)[0]).resolve()
        if path in (ROOT, HERE) or path.name in SITE_TESTS:
            return True
    return False


def pytest_sessionstart(session):
    """In the controller of a parallel run: start building the site in the background."""
    config = session.config
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    if not _needs_site(config) or os.environ.get("ATTNBOOK_SITE"):
        return
    out = config._tmp_path_factory.getbasetemp() / "book-build"
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, str(HERE / "site_build.py"), str(out)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=ROOT)
    (out / "pid").write_text(str(proc.pid))
    config._attnbook_build = proc


def pytest_sessionfinish(session):
    proc = getattr(session.config, "_attnbook_build", None)
    if proc is not None and proc.poll() is None:
        proc.kill()
    if proc is not None:
        proc.wait()


def _alive(pid: int) -> bool:
    """Whether the background build is still running (a finished one is a zombie)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        if Path("/proc/self").exists():
            return False
    try:  # no /proc (macOS)
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


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
    result_file = out / site_build.RESULT
    pidfile = out / "pid"
    if pidfile.exists():  # started in the background by the controller: wait for it
        pid, deadline = int(pidfile.read_text()), time.monotonic() + BUILD_TIMEOUT
        while not result_file.exists() and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    if not result_file.exists():
        out.mkdir(parents=True, exist_ok=True)
        with open(out.parent / "book-build.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not result_file.exists():
                    site_build.write_result(out, site_build.build(out))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
    result = json.loads(result_file.read_text())
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
        result_file = shared / f"site-tour-{slug}.json"
        with open(shared / f"site-tour-{slug}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if not result_file.exists():
                    try:
                        result = tour.run_part(part, built_site["html"])
                    except Exception:
                        result = {"error": traceback.format_exc()}
                    result_file.write_text(json.dumps(result))
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        result = json.loads(result_file.read_text())
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
