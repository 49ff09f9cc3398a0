"""Skip the notebooks whose optional packages are not installed; order a parallel run;
start nbval's kernels on Unix sockets (pytest_configure).

A notebook declares what it needs beyond requirements.txt in its metadata,
``"attnbook": {"requires": ["torch"]}``. When such a package cannot be imported,
every nbval cell of that notebook is marked skipped, with a reason naming the
package and the command that installs it (``pytest -rs`` prints it). The skip
mark is evaluated before nbval starts the notebook's kernel, so none is started.
"""

import sys
from pathlib import Path

import pytest

from attnbook.nbtools import ipc_kernel_manager, missing_requirements, skip_reason


def pytest_configure(config):
    """nbval's kernels listen on Unix sockets, not TCP ports (see nbtools.ipc_kernel_manager:
    two kernels started at the same moment by the two workers could share a port)."""
    try:
        import nbval.kernel
    except ImportError:  # pragma: no cover (nbval is in requirements.txt)
        return
    nbval.kernel.KernelManager = ipc_kernel_manager()


def pytest_collection_modifyitems(config, items):
    _skip_missing_requirements(items)
    if _parallel(config):
        ranks = {}
        items.sort(key=lambda item: ranks.setdefault(item.path, _rank(item.path)))


def _parallel(config) -> bool:
    """A parallel run: the controller (-n) or one of its workers. A worker collects with
    numprocesses reset to None; its collection is the one the scheduler distributes."""
    return bool(getattr(config.option, "numprocesses", None)) or hasattr(config, "workerinput")


def _skip_missing_requirements(items):
    verdicts = {}
    for item in items:
        path = getattr(item, "path", None)
        if path is None or path.suffix != ".ipynb":
            continue
        if path not in verdicts:
            missing = missing_requirements(path)
            verdicts[path] = skip_reason(missing) if missing else None
        if verdicts[path]:
            item.add_marker(pytest.mark.skip(reason=f"{path.name} {verdicts[path]}"))


# --- scheduling a parallel run (`make test`: -n auto --dist loadfile) ---
#
# xdist's loadfile sends each file to one worker, in the order the workers collected the
# tests (the controller collects nothing, and a worker collects with numprocesses reset to
# None: _parallel). Here the files that take longest go first, so that the run does not
# end with one worker busy and the other idle: the browser's tour of the site (whose two
# test files share one tour and one chromium, so they go to one worker together; without
# `make`, that worker builds the site first, see tests/conftest.py), then the chapters
# (nbval; the bigger notebook first), then the classroom kit, the tests against PyTorch and
# transformers, and the other unit tests in their usual order.
BROWSER_FILES = ("tests/site/test_browser.py", "tests/site/test_live_figures.py")
# The tests against PyTorch and transformers go to one worker too: importing them costs
# seconds of CPU in every process that does.
TORCH_SCOPE = "tests/*torch*, tests/*transformers*"


def _rel(path: Path) -> str:
    return path.resolve().relative_to(Path(__file__).resolve().parent).as_posix()


def _uses_torch(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return rel.startswith("tests/") and ("torch" in name or "transformers" in name)


def _rank(path: Path) -> tuple:
    rel = _rel(path)
    if rel in BROWSER_FILES:
        return (0, 0)
    if path.suffix == ".ipynb":
        return (1, -path.stat().st_size)
    if rel == "tests/classroom/test_classroom.py":
        return (2, 0)
    if _uses_torch(rel):
        return (3, 0)
    return (4, 0)


@pytest.hookimpl(optionalhook=True)  # known only when pytest-xdist is active
def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BookScheduling(LoadFileScheduling):
        """loadfile, in the order of the collection (above); the browser files as one unit,
        and the torch and transformers files as another."""

        def __init__(self, config, log=None):
            super().__init__(config, log)
            config.option.loadscopereorder = False

        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            if path in BROWSER_FILES:
                return BROWSER_FILES[0]
            return TORCH_SCOPE if _uses_torch(path) else path

    return BookScheduling(config, log)


# The browser files share one chromium (tests/site_tour.py, shared_browser). It is closed as
# soon as this worker's next test is not in one of them (or there is none): Playwright's
# sync API keeps an event loop running in this thread, and a later test may need
# asyncio.run().
@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    tour = sys.modules.get("site_tour")
    if tour is not None and tour.browser_is_open() and not (
            nextitem is not None and _rel(nextitem.path) in BROWSER_FILES):
        tour.close_browser()
