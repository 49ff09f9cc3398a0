"""attnbook.timing: BLAS limited to one thread at run time, and the count in use reported."""

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from attnbook import timing


def test_one_blas_thread_limits_the_loaded_library_and_restores_it():
    np.ones((4, 4)) @ np.ones((4, 4))  # BLAS is loaded with NumPy
    before = timing.blas_threads()
    assert before, "no BLAS library found"
    with timing.one_blas_thread() as in_use:
        assert set(in_use.values()) == {1}
        assert all(p["num_threads"] == 1 for p in threadpool_info()
                   if p["user_api"] == "blas")
    assert timing.blas_threads() == before


def test_one_blas_thread_refuses_when_the_limit_does_not_hold(monkeypatch):
    # a library that ignored the limit: the chapter must not print "1 thread"
    monkeypatch.setattr(timing, "blas_threads", lambda: {"openblas x": 2})
    with pytest.raises(RuntimeError, match="several threads"):
        with timing.one_blas_thread():
            pass
    monkeypatch.setattr(timing, "blas_threads", dict)
    with pytest.raises(RuntimeError, match="no BLAS library"):
        with timing.one_blas_thread():
            pass


def test_an_environment_variable_after_numpy_is_ignored(monkeypatch):
    # what chapter 09 used to do: set OPENBLAS_NUM_THREADS after NumPy was imported
    with threadpool_limits(limits=2, user_api="blas"):
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
        counts = set(timing.blas_threads().values())
    if counts == {1}:
        pytest.skip("this machine's BLAS has one thread anyway")
    assert 1 not in counts


def test_best_time_is_the_minimum():
    calls = []
    t = timing.best_time(lambda: calls.append(1), repeat=3)
    assert len(calls) == 3 and 0 <= t < 1
