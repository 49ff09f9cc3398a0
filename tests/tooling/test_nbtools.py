"""`make outputs` tidying: widget state and widget outputs are removed, nothing else."""

import json

from attnbook import nbtools


def test_tidy_removes_widget_state_and_outputs(tmp_path):
    nb = {
        "metadata": {"widgets": {"state": {}}, "kernelspec": {"name": "python3"}},
        "cells": [
            {"cell_type": "code", "outputs": [
                {"output_type": "execute_result", "data": {nbtools.WIDGET_MIME: {"model_id": "abc"}, "text/plain": "w"}},
                {"output_type": "stream", "name": "stdout", "text": "kept"},
            ]},
            {"cell_type": "markdown", "source": "x"},
        ],
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert nbtools.tidy(path)
    out = json.loads(path.read_text())
    assert "widgets" not in out["metadata"] and out["metadata"]["kernelspec"] == {"name": "python3"}
    assert out["cells"][0]["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "kept"}]
    assert not nbtools.tidy(path), "a second tidy changes nothing"


def test_tidy_joins_split_streams(tmp_path):
    nb = {"metadata": {}, "cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["a\n", "b"]},
        {"output_type": "stream", "name": "stdout", "text": "c\n"},
        {"output_type": "stream", "name": "stderr", "text": "e\n"},
        {"output_type": "stream", "name": "stdout", "text": "d\n"},
    ]}]}
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    assert nbtools.tidy(path)
    outs = json.loads(path.read_text())["cells"][0]["outputs"]
    assert [(o["name"], o["text"]) for o in outs] == [("stdout", ["a\n", "bc\n"]), ("stderr", "e\n"),
                                                      ("stdout", "d\n")]


# --- student_slice: the cells of a student copy that must run --------------------------------

def notebook(*cells):
    """Code cells from ("code" | "solution", source) pairs; a solution is gated like the book's."""
    out = [{"cell_type": "code", "id": "bootstrap", "metadata": {"tags": [nbtools.BOOTSTRAP_TAG]},
            "outputs": [], "execution_count": None, "source": "import attnbook"}]
    for k, (kind, text) in enumerate(cells):
        code = {"cell_type": "code", "id": f"c{k}", "metadata": {}, "outputs": [],
                "execution_count": None, "source": text}
        if kind == "solution":
            out += [{"cell_type": "markdown", "id": f"s{k}", "metadata": {},
                     "source": f"````{{solution-start}} ex{k}\n:class: dropdown\n````"}, code,
                    {"cell_type": "markdown", "id": f"e{k}", "metadata": {},
                     "source": "````{solution-end}\n````"}]
        else:
            out.append(code)
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": out}


def ran(nb):
    """The sources of the copy's cells in the slice."""
    copy = nbtools.student_copy(nb)
    return [nbtools._source(copy["cells"][i]) for i in nbtools.student_slice(nb, copy)]


STUB = "def mine(x):\n    raise NotImplementedError\n\ncheck.check_x(mine)"


def test_slice_runs_a_cell_that_reads_what_a_solution_defined():
    nb = notebook(("code", "from attnbook import check\nimport numpy as np"), ("code", STUB),
                  ("solution", "W = np.ones(3)"), ("code", "y = np.zeros(2)"),
                  ("code", "print(W.sum())"), ("code", "z = y + 1"))
    assert ran(nb) == ["import attnbook", "from attnbook import check\nimport numpy as np", STUB,
                       "print(W.sum())"], "W's reader (a NameError in the copy), not y or z"


def test_slice_follows_taint_through_kept_cells():
    nb = notebook(("code", "from attnbook import check"), ("code", STUB), ("solution", "k = 2"),
                  ("code", "m = k + 1"), ("code", "print(m)"), ("code", "print('other')"))
    assert ran(nb)[-2:] == ["m = k + 1", "print(m)"]


def test_slice_a_method_call_in_a_solution_taints_its_receiver():
    """rng.normal() advances the generator: a later cell drawing from rng sees other numbers."""
    setup = "from attnbook import check\nimport numpy as np\nrng = np.random.default_rng(0)"
    nb = notebook(("code", setup),
                  ("code", STUB), ("solution", "noise = rng.normal(size=3)"),
                  ("code", "x = rng.normal(size=2)"), ("code", "np.set_printoptions(precision=3)"))
    assert "x = rng.normal(size=2)" in ran(nb)
    assert "np.set_printoptions(precision=3)" not in ran(nb), "a module's function: no write to np"


def test_slice_a_solution_seeding_a_module_taints_the_module():
    """np.random.seed changes what every later np.random call draws: np counts as written."""
    nb = notebook(("code", "from attnbook import check\nimport numpy as np"), ("code", STUB),
                  ("solution", "np.random.seed(1)"), ("code", "print(np.random.rand())"))
    assert "print(np.random.rand())" in ran(nb)


def test_slice_stores_and_appends_in_a_solution_taint():
    for solution in ("xs.append(4)", "xs[0] = 9", "obj.a = 2", "del xs", "for xs in []: pass",
                     "def f():\n    global xs\n    xs = 1\nf()", "import json as xs", "(xs := 5)",
                     "with open('f') as xs: pass", "class xs: pass"):
        nb = notebook(("code", "from attnbook import check\nxs, obj = [1], object()"),
                      ("code", STUB),
                      ("solution", solution), ("code", "print(xs, obj)"))
        assert "print(xs, obj)" in ran(nb), solution


def test_slice_a_solution_calling_a_helper_that_mutates_a_global_taints_it():
    setup = "from attnbook import check\nseen = []\ndef note(v):\n    seen.append(v)"
    nb = notebook(("code", setup),
                  ("code", STUB), ("solution", "note(1)"), ("code", "print(len(seen))"))
    assert "print(len(seen))" in ran(nb)


def test_slice_a_helper_reading_a_global_a_solution_rebinds():
    nb = notebook(("code", "from attnbook import check\nW = 1\ndef f():\n    return W"),
                  ("code", STUB), ("solution", "W = 2"), ("code", "print(f())"))
    assert "print(f())" in ran(nb), "f's result depends on W"


def test_slice_magic_or_exec_in_a_solution_runs_everything():
    for solution in ("%time x = 1", "!ls", "exec('x = 1')", "eval('1')", "globals()['x'] = 1",
                     "setattr(obj, 'a', 1)"):
        nb = notebook(("code", "from attnbook import check"), ("code", STUB),
                      ("solution", solution),
                      ("code", "print('a')"), ("code", "print('b')"))
        copy = nbtools.student_copy(nb)
        code = [i for i, c in enumerate(copy["cells"]) if c["cell_type"] == "code"]
        assert list(nbtools.student_slice(nb, copy)) == code, solution


def test_slice_a_stub_pulls_in_the_cells_that_define_what_it_reads():
    stub = "def mine(x):\n    raise NotImplementedError\n\ncheck.check_x(mine, data)"
    nb = notebook(("code", "from attnbook import check"), ("code", "data = [1, 2]"),
                  ("code", "data.append(3)"), ("code", "other = 5"), ("code", stub))
    assert ran(nb) == ["import attnbook", "from attnbook import check", "data = [1, 2]",
                       "data.append(3)", stub]


def test_slice_module_names_do_not_pull_in_everything():
    """Every cell calls np.something: a stub reading np needs the import, not every such cell."""
    stub = "def mine(x):\n    raise NotImplementedError\n\ncheck.check_x(mine, np.ones(2))"
    nb = notebook(("code", "from attnbook import check\nimport numpy as np"),
                  ("code", "a = np.arange(3)"), ("code", "np.testing.assert_equal(a, a)"),
                  ("code", stub))
    assert ran(nb) == ["import attnbook", "from attnbook import check\nimport numpy as np", stub]


def test_slice_adds_the_stub_for_an_exercise_without_code():
    nb = notebook(("code", "from attnbook import check"), ("code", "print(1)"),
                  ("solution", "print(2)"))
    exercise = {"cell_type": "markdown", "id": "x", "metadata": {},
                "source": "```{exercise}\n:label: ex2\nExplain.\n```"}
    nb["cells"].insert(3, exercise)  # after print(1), before the solution
    assert ran(nb) == ["import attnbook",
                       "# Exercise ex2: your code here (see the exercise above)."]
