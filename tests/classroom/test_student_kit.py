"""The student kit stands alone and, by default, does not hand students the solutions of its
own exercises: the answer-key functions they ask for are sealed (the calls the chapters make,
recorded), and their checkers carry their cases as data and still work."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook import nbtools

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "06_masking.ipynb"  # two exercises: causal_mask, padding_mask


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    nbtools.write_student_copies(out, [CHAPTER])
    return out


def run_in(folder, code):
    """Run Python in the kit's folder, where its own copy of attnbook is imported first."""
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.')\n" + code],
                          cwd=folder, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_kit_has_its_own_readme_requirements_and_makefile(kit):
    readme = (kit / "README.md").read_text()
    assert "make lab" in readme and "WHEELHOUSE=wheelhouse" in readme
    assert "`reference.causal_mask`" in readme and "`reference.padding_mask`" in readme
    requirements = (kit / "requirements.txt").read_text()
    assert "jupyterlab-myst" in requirements and "numpy" in requirements
    assert "torch" not in requirements  # chapter 06 needs no PyTorch
    assert "lab: .venv/.installed" in (kit / "Makefile").read_text()


def test_the_exercises_answers_are_not_in_the_kit_as_code(kit):
    source = "\n".join(p.read_text() for p in (kit / "attnbook" / "reference").rglob("*.py"))
    assert "def causal_mask(" not in source and "def padding_mask(" not in source
    assert 'causal_mask = _sealed_function("causal_mask")' in source
    assert "def scaled_dot_product_attention" in source  # an earlier chapter's: kept


def test_the_chapters_own_calls_work_and_others_are_refused(kit):
    nb = json.loads(CHAPTER.read_text())
    assert any("ref.causal_mask(N)" in "".join(c["source"]) for c in nb["cells"])
    out = run_in(kit, """
import numpy as np
from attnbook import reference as ref, _kit
print(ref.scaled_dot_product_attention(np.eye(2), np.eye(2), np.eye(2))[0].shape)
try:
    ref.causal_mask(11)
except _kit.Sealed as e:
    print("sealed:", e)
""")
    assert "(2, 2)" in out
    assert "sealed: reference.causal_mask is an exercise of this student kit" in out
    assert max(map(len, out.splitlines())) <= 79


def test_the_kits_checkers_still_pass_a_right_answer_and_name_a_mistake(kit):
    out = run_in(kit, """
import numpy as np
from attnbook import check
def causal(n_q, n_k=None):
    n_k = n_q if n_k is None else n_k
    return np.tril(np.ones((n_q, n_k), dtype=bool), k=n_k - n_q)
assert check.check_causal_mask(causal)
assert not check.check_causal_mask(lambda n_q, n_k=None: ~causal(n_q, n_k))
assert not check.check_padding_mask(lambda lengths, n: np.ones((len(lengths), 1, n)))
""")
    assert "check_causal_mask: all" in out and "passed" in out
    assert "hint: inverted polarity" in out
    assert "the mask must be a boolean array" in out


def test_a_recorded_call_that_raised_raises_the_same_error(tmp_path):
    """Chapter 11 shows the error of a fully masked row: the kit's sealed function raises it too."""
    nbtools.write_student_copies(tmp_path, [ROOT / "chapters" / "11_attention_gradients.ipynb"])
    out = run_in(tmp_path, """
import numpy as np
from attnbook import _kit
calls = _kit._load("calls.pkl")["attention_backward"]
import pickle
print(sorted({pickle.loads(v)[0] for v in calls.values()}))
""")
    assert "['raise', 'return']" in out


def test_the_kits_chapter_runs_top_to_bottom(kit):
    """No recorded call is missing: the student copy runs, its stubs say 'not done yet'."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(kit / CHAPTER.name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   kernel_manager_class=nbtools.ipc_kernel_manager(),
                   resources={"metadata": {"path": str(kit)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors[0]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "check_causal_mask: not done yet" in text


def test_a_kit_with_the_key_keeps_the_answer_key(tmp_path):
    nbtools.write_student_copies(tmp_path, [CHAPTER], key=True)
    source = (tmp_path / "attnbook" / "reference" / "attention.py").read_text()
    assert "def causal_mask" in source
    assert not (tmp_path / "attnbook" / "_kit_data").exists()
    assert "includes the book's whole answer key" in (tmp_path / "README.md").read_text()


def test_the_kit_has_each_chapter_in_chinese_too(kit):
    """zh/ holds the Chinese edition's student copy: the same code cells, Chinese prose, no
    solutions, figures found from its folder (../figures/)."""
    en = json.loads((kit / CHAPTER.name).read_text())
    zh = json.loads((kit / "zh" / CHAPTER.name).read_text())
    code = lambda nb: [c["source"] for c in nb["cells"] if c["cell_type"] == "code"]  # noqa: E731
    assert code(zh) == code(en)
    prose = "".join("".join(c["source"]) for c in zh["cells"] if c["cell_type"] == "markdown")
    assert "掩码" in prose and "solution-start" not in prose and "](figures/" not in prose
    for link in __import__("re").findall(r"\]\((\.\./figures/[^)\s]+)\)", prose):
        assert (kit / "zh" / link).resolve().exists(), link
