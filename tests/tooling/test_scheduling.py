"""The order of a parallel run (the root conftest.py): longest files first, in every worker.

Under xdist the scheduler hands out the files in the order the *workers* collected them
(the controller collects nothing), and a worker collects with ``numprocesses`` reset to
None: the ordering must not depend on that option alone, or it silently never happens.
"""

from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root_conftest(request):
    return next(p for p in request.config.pluginmanager.get_plugins()
                if getattr(p, "__file__", None) == str(ROOT / "conftest.py"))


class Item:
    def __init__(self, rel):
        self.path = ROOT / rel
        self.nodeid = rel

    def add_marker(self, marker):  # a notebook whose package is missing is marked skipped
        pass


def config(numprocesses=None, worker=False):
    cfg = SimpleNamespace(option=SimpleNamespace(numprocesses=numprocesses))
    if worker:
        cfg.workerinput = {"workerid": "gw0"}
    return cfg


def test_a_worker_and_the_controller_count_as_parallel(root_conftest):
    assert root_conftest._parallel(config(worker=True))  # numprocesses is None in a worker
    assert root_conftest._parallel(config(numprocesses=2))
    assert not root_conftest._parallel(config())


def test_a_worker_orders_browser_then_chapters_biggest_first_then_the_rest(root_conftest):
    chapters = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "chapters").glob("*.ipynb"))
    files = ["tests/test_check.py", "tests/classroom/test_classroom.py", "tests/site/test_browser.py",
             "tests/test_check_torch.py", *chapters, "tests/site/test_live_figures.py",
             "tests/reference/test_reference.py"]
    items = [Item(f) for f in files]
    root_conftest.pytest_collection_modifyitems(config(worker=True), items)
    order = [item.nodeid for item in items]
    by_size = sorted(chapters, key=lambda rel: -(ROOT / rel).stat().st_size)
    assert order == ["tests/site/test_browser.py", "tests/site/test_live_figures.py", *by_size,
                     "tests/classroom/test_classroom.py", "tests/test_check_torch.py",
                     "tests/test_check.py", "tests/reference/test_reference.py"]


def test_a_serial_run_keeps_the_collection_order(root_conftest):
    files = ["tests/test_check.py", "tests/site/test_browser.py", "chapters/01_three_tokens.ipynb"]
    items = [Item(f) for f in files]
    root_conftest.pytest_collection_modifyitems(config(), items)
    assert [item.nodeid for item in items] == files
