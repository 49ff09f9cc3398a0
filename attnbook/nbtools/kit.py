"""The student kit (`make student`): a folder a teacher copies to every machine.

It holds the chapters without their solutions (:mod:`.student`), the diagrams they show,
a copy of ``attnbook``, its own README, requirements and Makefile, so that
``make lab`` in it starts JupyterLab (offline with a wheelhouse). By default the
kit does not hand students the solutions of its own exercises: the answer-key
functions those exercises ask for (``attnbook.check.ANSWER_KEY``) are sealed in
its copy of the package. Each becomes a table of the calls the kit's chapters
make, recorded by executing the chapters once, and the checkers of those
exercises carry their cases and the wrong answers they recognise as data
(:mod:`attnbook._kit`); the checkers' code that computed them, and the checkers
of chapters the kit does not have, are sealed too (:func:`seal_checker_code`).
``key=True`` (``make student KEY=1``) keeps the whole answer key instead. The
kit's README, requirements and Makefile: :mod:`.kit_files`.
"""

from __future__ import annotations

import ast
import json
import pickle
import re
import shutil
import sys
import tempfile
from pathlib import Path

from ._io import BOOK_ROOT, _load, _source
from .kit_files import MAKEFILE, README, REQUIREMENTS, write_kit_files  # noqa: F401

__all__ = ["kit_checkers", "sealed_names", "record_calls", "checker_data", "seal_package",
           "seal_checker_code", "write_kit_files"]

# A function whose recorded calls take more than this stays in the kit as code (and the
# kit's README says so): a chapter that calls it in a loop would make the kit too large.
MAX_RECORD_BYTES = 20 * 2 ** 20


def kit_checkers(notebooks) -> list[str]:
    """The checkers the notebooks call, in order of first use."""
    found = []
    for path in notebooks:
        for cell in _load(path)["cells"]:
            if cell["cell_type"] == "code":
                for name in re.findall(r"\bcheck\.(check_\w+)", _source(cell)):
                    if name not in found:
                        found.append(name)
    return found


def sealed_names(checkers) -> list[str]:
    """The answer-key functions the checkers' exercises ask for."""
    from attnbook.check import ANSWER_KEY

    names = []
    for checker in checkers:
        for name in ANSWER_KEY.get(checker, []):
            if name not in names:
                names.append(name)
    return names


# --- recording the calls the chapters make ----------------------------------

class Recorder:
    """Wraps answer-key functions wherever attnbook binds them, recording each call."""

    def __init__(self, names):
        from attnbook import _kit, reference

        self.key = _kit.call_key
        self.calls = {name: {} for name in names}
        self.size = {name: 0 for name in names}  # bytes recorded; None: over the limit
        wrapped = {}
        for name in names:
            original = getattr(reference, name)
            wrapped[id(original)] = (original, self._wrap(name, original))
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").split(".")[0] != "attnbook":
                continue
            for attr, value in list(vars(module).items()):
                if id(value) in wrapped and wrapped[id(value)][0] is value:
                    setattr(module, attr, wrapped[id(value)][1])

    def _wrap(self, name, original):
        table = self.calls[name]

        def keep(key, outcome):
            # a function called too much to record stays code in the kit: stop recording it
            # at once (a training loop would otherwise hold gigabytes of calls in memory)
            if self.size[name] is None or key in table:
                return
            data = pickle.dumps(outcome)
            self.size[name] += len(data)
            if self.size[name] > MAX_RECORD_BYTES:
                self.size[name] = None
                table.clear()
            else:
                table[key] = data

        def wrapper(*args, **kwargs):
            if self.size[name] is None:
                return original(*args, **kwargs)
            key = self.key(args, kwargs)
            try:
                result = original(*args, **kwargs)
            except Exception as exc:  # a chapter that shows the error: the kit raises it too
                keep(key, ("raise", type(exc), str(exc)))
                raise
            keep(key, ("return", result))
            return result

        wrapper.__name__ = name
        wrapper.__doc__ = original.__doc__
        return wrapper

    def save(self, path):
        """The calls, None for a function over the limit."""
        with open(path, "wb") as f:
            pickle.dump({n: None if self.size[n] is None else t for n, t in self.calls.items()},
                        f)


def record_calls(notebooks, names, timeout=300) -> dict:
    """Execute the (original) notebooks once, recording every call of ``names`` (None for a
    function whose calls pass MAX_RECORD_BYTES: it stays code in the kit)."""
    import nbformat
    from nbclient import NotebookClient

    from .execute import fix_nbclient_output_widget, ipc_kernel_manager

    fix_nbclient_output_widget()
    calls = {name: {} for name in names}
    if not names:
        return calls
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(notebooks):
            out = Path(tmp) / f"calls{i}.pkl"
            nb = nbformat.read(path, as_version=4)
            start = nbformat.v4.new_code_cell(
                "from attnbook.nbtools.kit import Recorder as _Recorder\n"
                f"_attnbook_recorder = _Recorder({list(names)!r})")
            end = nbformat.v4.new_code_cell(f"_attnbook_recorder.save({str(out)!r})")
            first = next(j for j, c in enumerate(nb.cells) if c.cell_type == "code")
            nb.cells = nb.cells[:first + 1] + [start] + nb.cells[first + 1:] + [end]
            NotebookClient(nb, timeout=timeout, kernel_name="python3",
                           kernel_manager_class=ipc_kernel_manager(),
                           resources={"metadata": {"path": str(Path(path).parent)}}).execute()
            with open(out, "rb") as f:
                for name, table in pickle.load(f).items():
                    if table is None or calls[name] is None:
                        calls[name] = None  # over the limit: the function stays code
                    else:
                        calls[name].update(table)
                        if sum(map(len, calls[name].values())) > MAX_RECORD_BYTES:
                            calls[name] = None
    return calls


# --- the checkers' cases and mistakes as data -------------------------------

def checker_data(name: str) -> dict:
    """One checker's cases, options and known mistakes (computed on each case), as data."""
    from attnbook import check, checking

    captured = {}

    def capture(fn, cases, cname, **options):
        captured.update(cases=cases, name=cname, options=options)
        return checking.Verdict(False, cname)

    modules = [m for m in list(sys.modules.values())
               if getattr(m, "__name__", "").startswith("attnbook.check.")
               and getattr(m, "run_cases", None) is checking.run_cases]
    for module in modules:
        module.run_cases = capture
    try:
        getattr(check, name)(lambda *a, **k: None)
    finally:
        for module in modules:
            module.run_cases = checking.run_cases
    options = dict(captured["options"])
    mistakes = options.pop("mistakes", ())
    call = checking.adapter(options.get("call"), options.get("pick"))
    labels = [case.label for case in captured["cases"]]
    assert len(set(labels)) == len(labels), f"{name}: case labels repeat"
    by_label = {case.label: [m.computed(call, case) for m in checking._mistakes_for(mistakes, case)]
                for case in captured["cases"]}
    return {"cases": captured["cases"], "name": captured["name"], "options": options,
            "mistakes": by_label, "doc": getattr(check, name).__doc__}


# --- writing the kit ------------------------------------------------------------

def seal_package(package: Path, names, calls, checkers) -> list[str]:
    """Seal ``names`` in the kit's copy of attnbook; returns the names kept as code."""
    kept = [n for n in names if calls[n] is None
            or sum(map(len, calls[n].values())) > MAX_RECORD_BYTES]
    sealed = [n for n in names if n not in kept]
    data = package / "_kit_data"
    data.mkdir(exist_ok=True)
    with open(data / "calls.pkl", "wb") as f:
        pickle.dump({n: calls[n] for n in sealed}, f)
    carried = {}
    for checker in checkers:
        try:
            carried[checker] = checker_data(checker)
        except ImportError:  # the PyTorch checker without torch: it stays code (it seals nothing)
            continue
    with open(data / "checkers.pkl", "wb") as f:
        pickle.dump(carried, f)
    seal_checker_code(package / "check", carried, checkers)
    for path in sorted((package / "reference").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        found = [node for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name in sealed]
        if not found:
            continue
        for node in sorted(found, key=lambda n: -n.lineno):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            lines[start:node.end_lineno] = [
                f'{node.name} = _sealed_function("{node.name}")  # an exercise of this kit\n']
        text = "".join(lines)
        text = text.replace("from __future__ import annotations\n",
                            "from __future__ import annotations\n\n"
                            "from .._kit import sealed_function as _sealed_function\n", 1)
        path.write_text(text, encoding="utf-8")
    return kept


# --- the checkers' own code: what computed the carried cases goes ------------

class _Globals(pickle.Unpickler):
    """Unpickles, noting every (module, name) the data refers to."""

    def __init__(self, f):
        super().__init__(f)
        self.names = set()

    def find_class(self, module, name):
        self.names.add((module, name))
        return super().find_class(module, name)


def _definitions(tree):
    """Top-level statements that define names: {name: node} (functions, and assignments that
    compute: a hint's text is not an answer)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign) and any(
                isinstance(n, (ast.Call, ast.Lambda)) for n in ast.walk(node.value)):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = node
    return found


def _loads(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def seal_checker_code(folder: Path, carried: dict, checkers=None) -> dict[str, list[str]]:
    """Remove from the kit's ``check/`` modules the code only the carried checkers ran.

    A carried checker runs on its cases and mistakes as data (:func:`attnbook._kit.carried_checker`);
    the functions that computed them (a mistake's whole wrong answer is often the right one with
    one line changed, ``np.tril(np.ones(...))`` or a whole multi-head attention) would hand a
    student the exercise. Everything a checker kept as code still needs, and everything the
    carried data refers to (a ``call`` adapter, a rule's class), stays; each other function or
    computed assignment becomes a stand-in that raises :class:`attnbook._kit.Sealed`, so every
    import still works. ``checkers``: the kit's checkers; the others (of chapters the kit does
    not have, which may compute an earlier exercise's answer in passing) are sealed too.
    Returns, per module, the names sealed.
    """
    with open(folder.parent / "_kit_data" / "checkers.pkl", "rb") as f:
        unpickler = _Globals(f)
        unpickler.load()
    modules = {p.stem: p for p in sorted(folder.glob("*.py")) if p.stem != "__init__"}
    trees = {m: ast.parse(p.read_text(encoding="utf-8")) for m, p in modules.items()}
    defs = {m: _definitions(t) for m, t in trees.items()}
    imports = {}  # module -> {local name: (module, name)}, and its star imports
    stars = {}
    for m, tree in trees.items():
        imports[m], stars[m] = {}, []
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in modules:
                for alias in node.names:
                    if alias.name == "*":
                        stars[m].append(node.module)
                    else:
                        imports[m][alias.asname or alias.name] = (node.module, alias.name)

    def resolve(m, name, seen=()):
        if name in defs[m]:
            return (m, name)
        if name in imports[m] and (m, name) not in seen:
            return resolve(*imports[m][name], seen + ((m, name),))
        for other in stars[m]:
            if not name.startswith("_") and name in defs[other]:
                return resolve(other, name, seen)
        return None

    prefix = "attnbook.check."
    roots = [(module[len(prefix):], name) for module, name in unpickler.names
             if module.startswith(prefix) and module[len(prefix):] in modules]
    for m, tree in trees.items():
        for node in tree.body:
            names = [n for n, d in defs[m].items() if d is node]
            if not names:
                roots += [(m, n) for n in _loads(node)]  # imports, classes, __all__, constants
            elif isinstance(node, ast.FunctionDef) and node.name.startswith("check_") \
                    and node.name not in carried and (checkers is None or node.name in checkers):
                roots.append((m, node.name))  # a checker of the kit kept as code
    keep, todo = set(), list(roots)
    while todo:
        found = resolve(*todo.pop())
        if found is None or found in keep:
            continue
        keep.add(found)
        m, name = found
        todo += [(m, n) for n in _loads(defs[m][name])]

    sealed = {}
    for m, path in modules.items():
        nodes = {}
        for name, node in defs[m].items():
            if (m, name) not in keep and not any((m, n) in keep for n, d in defs[m].items()
                                                 if d is node):
                nodes.setdefault(id(node), (node, []))[1].append(name)
        if not nodes:
            continue
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        for node, names in sorted(nodes.values(), key=lambda v: -v[0].lineno):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            lines[start - 1:node.end_lineno] = [
                f'{n} = _carried_checker("{n}")  # carried as data\n' if n in carried else
                f'{n} = _sealed_code("{m}.{n}", elsewhere=True)  # not in this kit\n'
                if n.startswith("check_") else f'{n} = _sealed_code("{m}.{n}")  # sealed\n'
                for n in names]
        text = "".join(lines).replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\n"
            "from .._kit import carried_checker as _carried_checker, sealed_code as _sealed_code\n",
            1)
        path.write_text(text, encoding="utf-8")
        sealed[m] = sorted(n for _, names in nodes.values() for n in names)
    return sealed
