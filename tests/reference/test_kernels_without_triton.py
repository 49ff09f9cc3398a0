"""The Triton kernels are optional: the package imports without triton, and says what to
run when it is missing (no triton needed for these tests)."""

import subprocess
import sys

import pytest

from attnbook import kernels
from attnbook.nbtools import skip_reason


def test_the_package_imports_without_importing_torch_or_triton():
    code = ("import sys, attnbook.kernels, attnbook.check, attnbook.kernels.gpu_timing; "
            "print(sorted({'torch', 'triton'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]", out


def test_a_missing_triton_is_named_with_its_make_target(monkeypatch):
    real = kernels.importlib.util.find_spec
    monkeypatch.setattr(kernels.importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    reason = kernels.triton_missing()
    assert reason == "needs triton, which is not installed: run `make triton` to install it"
    with pytest.raises(ModuleNotFoundError, match="make triton"):
        kernels.load_triton()


def test_the_skip_reason_of_the_notebooks_names_make_triton():
    assert "`make triton`" in skip_reason(["triton"])
