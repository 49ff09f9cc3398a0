"""Timing helpers for the chapters that measure speed.

NumPy's matrix products run in a BLAS library (OpenBLAS, MKL, ...) that may use
several threads. Setting ``OPENBLAS_NUM_THREADS`` (or ``OMP_NUM_THREADS``,
``MKL_NUM_THREADS``) has an effect only if it happens before NumPy is first
imported, and every chapter's set-up cell has imported NumPy already (``import
attnbook`` does). :func:`one_blas_thread` limits the libraries that are loaded,
at run time, with threadpoolctl, and says how many threads they actually use.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from threadpoolctl import threadpool_info, threadpool_limits

__all__ = ["blas_threads", "one_blas_thread", "best_time"]


def blas_threads() -> dict[str, int]:
    """The BLAS libraries loaded in this process and the threads each uses now."""
    return {f"{p['internal_api']} {p['version']}": p["num_threads"]
            for p in threadpool_info() if p["user_api"] == "blas"}


@contextmanager
def one_blas_thread():
    """Run the ``with`` block with every loaded BLAS library on one thread.

    Yields :func:`blas_threads` as measured inside the block; raises
    ``RuntimeError`` if no BLAS library is found or one still uses more than
    one thread. The previous limits come back when the block ends.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        in_use = blas_threads()
        if not in_use:
            raise RuntimeError("threadpoolctl finds no BLAS library loaded\n"
                               "(import NumPy and run one matrix product first)")
        if any(n != 1 for n in in_use.values()):
            raise RuntimeError(f"BLAS still uses several threads: {in_use}")
        yield in_use


def best_time(f, repeat=5) -> float:
    """The best of ``repeat`` runs of ``f()``, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)
