"""The student kit stands alone and, by default, does not hand students the solutions of its
own exercises: the answer-key functions they ask for are sealed (the calls the chapters make,
recorded), and their checkers carry their cases as data and still work."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from attnbook import nbtools

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "chapters" / "06_masking.ipynb"  # two exercises: causal_mask, padding_mask
MULTIHEAD = ROOT / "chapters" / "08_multihead.ipynb"  # one exercise: multi-head from a list


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    out = tmp_path_factory.mktemp("kit")
    nbtools.write_student_copies(out, [CHAPTER, MULTIHEAD])
    return out


def run_in(folder, code):
    """Run Python in the kit's folder, where its own copy of attnbook is imported first."""
    proc = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, '.')\n" + code],
                          cwd=folder, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_kit_has_its_own_readme_requirements_and_makefile(kit):
    readme = (kit / "README.md").read_text()
    assert "make lab" in readme and "WHEELHOUSE=/path/to/wheelhouse" in readme
    assert "`reference.causal_mask`" in readme and "`reference.padding_mask`" in readme
    requirements = (kit / "requirements.txt").read_text()
    assert "jupyterlab-myst" in requirements and "numpy" in requirements
    assert "torch" not in requirements  # chapter 06 needs no PyTorch
    assert "lab: .venv/.installed" in (kit / "Makefile").read_text()


def test_the_kits_readme_says_everything_in_english_and_in_chinese(kit):
    """Both halves give the same commands: with make, without make (Linux/macOS and Windows),
    the wheelhouse (and its limits), and what to do with a copied .venv."""
    readme = (kit / "README.md").read_text()
    en, zh = readme.split("## 学生包（中文）")
    fences = lambda text: re.findall(r"```\w*\n(.*?)```", text, re.S)  # noqa: E731
    assert fences(en) == fences(zh) and len(fences(en)) >= 5
    commands = "\n".join(fences(en))
    for command in ["python3 -m venv .venv", "py -3 -m venv .venv", ".venv\\Scripts\\jupyter lab",
                    "--no-index --find-links wheelhouse -r requirements.txt", ".venv/bin/jupyter lab",
                    "pip download -r requirements.txt -d wheelhouse",
                    "--only-binary=:all: --platform win_amd64 --python-version"]:
        assert command in commands, command
    for half in (en, zh):
        assert "3.11" in half and "Remove-Item -Recurse -Force .venv" in half
        assert "pip debug --verbose" in half and "`reference.causal_mask`" in half
    assert "operating system, CPU architecture and Python version" in en
    assert "操作系统、CPU架构和Python版本" in zh and "掩码：因果掩码与填充掩码" in zh
    # Chinese paragraphs are not broken into lines (a line break shows as a space)
    assert not re.search(r"[\u4e00-\u9fff，。；：]\n[\u4e00-\u9fff]", zh)


def fake_python(folder):
    """A python3 that makes a fake .venv in a blink: its pip logs its arguments, its jupyter
    says what it would start."""
    fake = folder / "python3"
    fake.write_text(f"""#!/bin/bash
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin"
  printf '#!/bin/bash\\necho "pip $*" >> "$PIP_LOG"\\n' > "$3/bin/python"
  printf '#!/bin/bash\\necho "jupyter $*"\\n' > "$3/bin/jupyter"
  chmod +x "$3/bin/python" "$3/bin/jupyter"
  exit 0
fi
exec {sys.executable} "$@"
""")
    fake.chmod(0o755)
    return fake


def test_a_venv_copied_from_another_folder_is_noticed_and_made_again(kit, tmp_path):
    """The teacher prepares one kit with its .venv and copies the folder: make lab in the copy
    says the .venv was made elsewhere and makes it again (from wheelhouse/ when there is one),
    where it used to start the copied .venv because its stamp existed."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    python, log = fake_python(tmp_path), tmp_path / "pip.log"
    first = tmp_path / "first"
    first.mkdir()
    for name in ("Makefile", "requirements.txt"):
        shutil.copy2(kit / name, first / name)
    env = {**os.environ, "PIP_LOG": str(log)}

    def make(folder, *targets):
        return subprocess.run(["make", "--no-print-directory", f"PYTHON={python}", *targets],
                              cwd=folder, env=env, capture_output=True, text=True, timeout=60)

    made = make(first, "lab")
    assert made.returncode == 0, made.stdout + made.stderr
    assert "jupyter lab" in made.stdout and len(log.read_text().splitlines()) == 1
    assert (first / ".venv" / ".installed").read_text().strip() == str(first / ".venv")
    again = make(first, "lab")
    assert "made in" not in again.stdout and len(log.read_text().splitlines()) == 1  # kept
    assert make(first, "check-venv").returncode == 0

    copy = tmp_path / "copy"
    shutil.copytree(first, copy, symlinks=True)
    (copy / "wheelhouse").mkdir()
    (copy / "wheelhouse" / "numpy-2.4.0-py3-none-any.whl").write_text("")
    check = make(copy, "check-venv")
    assert check.returncode != 0 and f"made in {first / '.venv'}, not here" in check.stdout
    moved = make(copy, "lab")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert f"was made in {first / '.venv'}" in moved.stdout and "from wheelhouse/" in moved.stdout
    pip = log.read_text().splitlines()
    assert len(pip) == 2 and f"--no-index --find-links {copy / 'wheelhouse'}" in pip[1]
    assert (copy / ".venv" / ".installed").read_text().strip() == str(copy / ".venv")
    assert make(copy, "check-venv").returncode == 0 and "jupyter lab" in moved.stdout


def test_a_venv_made_without_make_and_copied_is_noticed(kit, tmp_path):
    """The README's route without make leaves no stamp: the folder a .venv was made in is read
    from its pip's first line instead, so a copied one is still noticed (a lecturer's finding)."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    for name, made_in in (("copied", "/elsewhere/kit/.venv"), ("here", None)):
        folder = tmp_path / name
        (folder / ".venv" / "bin").mkdir(parents=True)
        shutil.copy2(kit / "Makefile", folder / "Makefile")
        made_in = made_in or str(folder / ".venv")
        (folder / ".venv" / "bin" / "pip").write_text(f"#!{made_in}/bin/python3.11\n")
        check = subprocess.run(["make", "--no-print-directory", "check-venv"], cwd=folder,
                               capture_output=True, text=True, timeout=60)
        if name == "copied":
            assert check.returncode != 0, check.stdout + check.stderr
            assert f"made in {made_in}, not here" in check.stdout
        else:
            assert check.returncode == 0 and "belongs to this folder" in check.stdout, check.stdout


SOLUTIONS = {  # text of the checkers' near-solutions of the kit's exercises (06 and 08)
    "the causal mask": "np.tril(np.ones(",
    "the padding mask": "np.arange(n)[None, :]",
    "multi-head attention from a list": "def _mha_list(",
    "a head's output times its rows of W_o": "W_o[h * step:(h + 1) * step]",
    "the cases computed by the answer key": "ref.causal_mask(n)",
}


def test_the_checkers_near_solutions_are_not_in_the_kit(kit):
    """The checkers of the kit's exercises computed their cases and wrong answers with code
    one line away from a solution; in the kit that code is a stand-in (the data is carried)."""
    book = "\n".join(p.read_text() for p in (ROOT / "attnbook" / "check").glob("*.py"))
    source = "\n".join(p.read_text() for p in (kit / "attnbook" / "check").glob("*.py"))
    for what, text in SOLUTIONS.items():
        assert text in book, f"the test is stale: the book's checkers no longer hold {what}"
        assert text not in source, f"the kit's checkers hold {what}: {text}"
    assert '_mha_list = _sealed_code("multihead._mha_list")' in source
    # a checker of a chapter not in the kit may build an exercise's answer in passing
    # (chapter 24's varlen checker builds a causal mask): sealed too
    assert 'check_varlen_attention = _sealed_code("serving.check_varlen_attention", ' in source
    out = run_in(kit, """
from attnbook import _kit
from attnbook.check import multihead, self_attention, serving
for f in (multihead._mha_list, self_attention._causal_mistakes,
          serving.check_varlen_attention):
    try:
        f()
    except _kit.Sealed as e:
        print(e)
""")
    assert out.count("attnbook.check's") == 3 and "a chapter\nthis student kit does not have" in out
    assert max(map(len, out.splitlines())) <= 79


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
def attn(q, k, v, mask=None):
    s = q @ k.swapaxes(-2, -1) / np.sqrt(q.shape[-1])
    s = s if mask is None else np.where(mask, s, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True) @ v
def mha(x, W_qs, W_ks, W_vs, W_o, mask=None):
    heads = [attn(x @ q, x @ k, x @ v, mask) for q, k, v in zip(W_qs, W_ks, W_vs)]
    return np.concatenate(heads, axis=-1) @ W_o
assert check.check_multihead_list(mha)
assert not check.check_multihead_list(
    lambda x, W_qs, W_ks, W_vs, W_o, mask=None: mha(x, W_qs, W_ks, W_vs, W_o))
""")
    assert "check_causal_mask: all" in out and "passed" in out
    assert "hint: inverted polarity" in out
    assert "the mask must be a boolean array" in out
    assert "check_multihead_list: all" in out and "the mask is ignored" in out


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


@pytest.mark.parametrize("chapter", [CHAPTER, MULTIHEAD], ids=["06", "08"])
def test_the_kits_chapter_runs_top_to_bottom(kit, chapter):
    """No recorded call is missing: the student copy runs, its stubs say 'not done yet'."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(kit / chapter.name, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   kernel_manager_class=nbtools.ipc_kernel_manager(),
                   resources={"metadata": {"path": str(kit)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors[0]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    checker = "check_causal_mask" if chapter == CHAPTER else "check_multihead_list"
    assert f"{checker}: not done yet" in text


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


def test_the_kit_holds_only_the_figures_its_chapters_show(tmp_path):
    """figures/ in a kit holds the diagrams its chapters (English and Chinese) show, no more."""
    chapter = ROOT / "chapters" / "01_three_tokens.ipynb"
    nbtools.write_student_copies(tmp_path, [chapter], key=True)
    kit_figures = sorted(p.relative_to(tmp_path / "figures").as_posix()
                         for p in (tmp_path / "figures").rglob("*") if p.is_file())
    shown = set()
    for nb in [tmp_path / chapter.name, tmp_path / "zh" / chapter.name]:
        text = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        for link in re.findall(r"\]\(([^)\s]*figures/[^)\s]+)\)", text):
            assert (nb.parent / link).resolve().is_file(), (nb, link)
            shown.add((nb.parent / link).resolve().relative_to(tmp_path / "figures").as_posix())
    assert shown and kit_figures == sorted(shown)
    book = {p.name for p in (ROOT / "figures").glob("*.svg")}
    assert len(book) > len(kit_figures)


def test_the_kit_finds_the_chinese_chapters_own_figures(tmp_path, monkeypatch):
    """A Chinese chapter may show its own diagram, figures/zh/X (../figures/zh/X from zh/)."""
    from attnbook.nbtools import student

    book = tmp_path / "book"
    for name in ("a.svg", "b.svg", "unused.svg", "zh/a.svg"):
        (book / "figures" / name).parent.mkdir(parents=True, exist_ok=True)
        (book / "figures" / name).write_text("<svg/>")
    monkeypatch.setattr(student, "BOOK_ROOT", book)
    kit = tmp_path / "kit"
    (kit / "zh").mkdir(parents=True)

    def notebook(path, text):
        path.write_text(json.dumps({"cells": [{"cell_type": "markdown", "metadata": {},
                                               "source": [text]}],
                                    "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        return path

    written = [notebook(kit / "x.ipynb", "![A](figures/a.svg) <img src=\"figures/b.svg\">"),
               notebook(kit / "zh" / "x.ipynb", "![甲](../figures/zh/a.svg) ![](https://x/y.svg)")]
    assert student.used_figures(kit, written) == ["a.svg", "b.svg", "zh/a.svg"]


def test_a_function_called_too_often_to_record_stops_being_recorded(monkeypatch):
    """A chapter that calls an answer-key function in a loop (chapter 12 trains a model) must
    not hold gigabytes of recorded calls: past the limit the recording stops and is dropped,
    and the function stays code in the kit."""
    import numpy as np

    from attnbook import reference
    from attnbook.nbtools import kit as kit_module

    monkeypatch.setattr(kit_module, "MAX_RECORD_BYTES", 4000)
    original = reference.softmax
    recorder = kit_module.Recorder(["softmax"])
    try:
        wrapped = reference.softmax
        assert wrapped is not original
        wrapped(np.zeros(3))
        assert recorder.size["softmax"] > 0 and len(recorder.calls["softmax"]) == 1
        for i in range(100):
            wrapped(np.full(20, float(i)))
        assert recorder.size["softmax"] is None and recorder.calls["softmax"] == {}
        assert np.allclose(wrapped(np.zeros(4)), 0.25)  # still computes
    finally:
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("attnbook"):
                for attr, value in list(vars(module).items()):
                    if value is wrapped:
                        setattr(module, attr, original)
    assert reference.softmax is original
