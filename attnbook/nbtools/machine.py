"""What this machine's NumPy dispatches to, and how ``make test`` turns that off.

NumPy compiles its loops for a baseline instruction set (``X86_V2`` on x86-64 wheels) and
for newer ones it picks at run time (``X86_V3``: AVX2 and FMA; ``X86_V4`` and the
``AVX512_*`` groups; ``ASIMDHP``, ``SVE`` ... on Arm). Two machines can therefore round
the same sum differently. A reader's laptop is another machine, so ``make test`` runs the
notebooks a second time with ``NPY_DISABLE_CPU_FEATURES`` naming every extension this
machine dispatches to, and the stored outputs must hold both ways::

    python -m attnbook.nbtools simd-off      # prints e.g. X86_V3 (nothing: baseline only)

OpenBLAS chooses its own kernels by processor too (``np.show_runtime()`` names them). Its
variable ``OPENBLAS_CORETYPE`` is never set by the book's tests: some processors need the
machine's own setting. Try ``OPENBLAS_CORETYPE=Haswell`` or ``=Prescott`` by hand.
"""

from __future__ import annotations


def dispatched_features() -> list[str]:
    """The SIMD extensions NumPy dispatches to on this machine, beyond its baseline,
    in NumPy's own order (empty where the machine has only the baseline)."""
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:  # pragma: no cover (NumPy 1 kept them in numpy.core)
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    return [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]


def simd_off_setting() -> str:
    """The value of ``NPY_DISABLE_CPU_FEATURES`` that turns all of them off."""
    return ",".join(dispatched_features())
