"""Optional dependencies of a notebook (the PyTorch chapter, the Triton pages)."""

from __future__ import annotations

from ._io import _load

# --- optional dependencies of a notebook (PyTorch chapter) ---
# A notebook that needs a package beyond requirements.txt says so in its metadata:
#     "attnbook": {"requires": ["torch"]}
# The root conftest.py skips such a notebook's cells when a package is missing.

INSTALL_HINTS = {"torch": "make torch", "triton": "make triton"}


def notebook_requirements(path) -> list[str]:
    """The optional packages a notebook declares in ``metadata["attnbook"]["requires"]``."""
    return list(_load(path).get("metadata", {}).get("attnbook", {}).get("requires", []))


def missing_requirements(path) -> list[str]:
    """The declared packages that cannot be imported (not found on ``sys.path``)."""
    import importlib.util

    return [name for name in notebook_requirements(path) if importlib.util.find_spec(name) is None]


def skip_reason(missing) -> str:
    """The reason shown by ``pytest -rs`` for a notebook whose packages are missing."""
    hints = sorted({INSTALL_HINTS.get(name, f"pip install {name}") for name in missing})
    return (f"needs {', '.join(missing)}, which is not installed: run `{'` and `'.join(hints)}` "
            "to install it")


__all__ = ["notebook_requirements", "missing_requirements", "skip_reason"]


