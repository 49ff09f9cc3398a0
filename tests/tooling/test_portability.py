"""The book on a reader's machine, not only on the one that executed it (issue 30).

`make test` runs the notebooks a second time with NumPy's SIMD dispatch off; these tests
check that the setting it uses really turns the dispatch off, that `make test` runs that
pass, and that nothing needs a writable home directory."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook.nbtools.machine import dispatched_features, simd_off_setting

ROOT = Path(__file__).resolve().parents[2]


def _python(code, env=None):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)


def test_simd_off_setting_turns_every_dispatched_extension_off():
    from numpy._core._multiarray_umath import __cpu_dispatch__

    names = dispatched_features()
    assert set(names) <= set(__cpu_dispatch__)
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=simd_off_setting())
    proc = _python("from attnbook.nbtools.machine import dispatched_features as d; "
                   "print(d())", env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.strip() == "[]", ("with the setting, NumPy still dispatches to "
                                         + proc.stdout)


def test_make_test_runs_the_notebooks_again_with_dispatch_off():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    plan = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120).stdout
    second = plan[plan.index("simd-off"):]
    assert 'NPY_DISABLE_CPU_FEATURES="$off"' in second
    assert "--nbval" in second and second.rstrip().endswith("chapters; fi")


def _make_env(home):
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-s", "env"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120,
                         env=dict(env, HOME=home)).stdout
    return dict(line.split("=", 1) for line in out.splitlines()
                if line.split("=", 1)[0] in ("MPLCONFIGDIR", "IPYTHONDIR",
                                             "JUPYTER_RUNTIME_DIR"))


def test_an_unwritable_home_is_not_needed(tmp_path):
    """/proc/nohome can be created by nobody, root included. make then points matplotlib,
    IPython and Jupyter at _build/home; here at tmp_path, to leave the tree alone."""
    moved = _make_env("/proc/nohome")
    build = str(ROOT / "_build" / "home")
    assert moved and all(v.startswith(build) for v in moved.values()), moved
    env = dict(os.environ, HOME="/proc/nohome",
               **{k: str(tmp_path / Path(v).name) for k, v in moved.items()})
    proc = _python("import matplotlib.pyplot, IPython.paths, jupyter_core.paths, os\n"
                   "import matplotlib; matplotlib.get_cachedir()\n"
                   "os.makedirs(jupyter_core.paths.jupyter_runtime_dir(), exist_ok=True)\n"
                   "print(IPython.paths.get_ipython_dir())", env)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "ipython")


def test_a_writable_home_is_left_alone(tmp_path):
    assert _make_env(str(tmp_path)) == {"MPLCONFIGDIR": "", "IPYTHONDIR": "",
                                        "JUPYTER_RUNTIME_DIR": ""}


@pytest.mark.parametrize("version", ["3.10", "3.9"])
def test_an_older_python_is_refused_before_anything_installs(tmp_path, version):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = -V ] && echo 'Python {version}.0' && exit 0\n"
                    "exit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    proc = subprocess.run(["make", "--no-print-directory", "-s", "venv", f"PYTHON={fake}",
                           f"VENV={tmp_path}/venv"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "needs Python 3.11 or newer" in proc.stdout
    assert f"Python {version}.0" in proc.stdout and not (tmp_path / "venv").exists()
