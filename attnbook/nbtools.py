"""Notebook housekeeping: `make outputs`, `make slides` and `make student` use it.

``python -m attnbook.nbtools prepare NOTEBOOK...`` (run by `make outputs` before it
executes the notebooks) puts every chapter in the book's standard shape:

- ``split``: a markdown cell is split before each ``##``/``###`` heading and at the
  solution gates (````{solution-start}```` begins a cell, ````{solution-end}```` ends
  one), so a slide starts at each section and every cell lies wholly inside or
  outside a solution. The rendered page does not change.
- ``bootstrap``: the first code cell is the standard set-up cell (:data:`BOOTSTRAP`):
  silent when the helper package is installed; opened alone (Colab, a downloaded
  notebook), it finds the package in the book's folder, installs it in Colab, or
  explains how to get it. The repository URL and branch come from ``_config.yml``.
- ``slides``: every cell gets RISE slide metadata (``slideshow.slide_type``).

``python -m attnbook.nbtools student OUTDIR NOTEBOOK...`` writes the student copies.

``python -m attnbook.nbtools execute NOTEBOOK...`` (run by `make outputs`) executes the
notebooks in place with nbconvert, after :func:`fix_nbclient_output_widget`.

``python -m attnbook.nbtools tidy NOTEBOOK...`` joins consecutive pieces of
one cell's printed output (their split depends on timing) and removes what executing a
slider cell stores: the widget state in the notebook's metadata and the widget
output of the cell (it carries a random model id, so keeping it would change
the file on every run). The site has no kernel to drive such a slider; the
static site shows the fixed-setting version of each demo instead. In
JupyterLab the slider appears when its cell is run. The exception: the
state of the live figures (``attnbook.live``), which run without a kernel,
is kept, with model ids numbered in order so re-execution gives the same
file.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path

__all__ = ["tidy", "WIDGET_MIME", "split_cells", "bootstrap", "slides", "prepare", "student_copy",
           "bootstrap_source", "repository", "solution_mask", "BOOTSTRAP_TAG", "student_slice",
           "is_exercise_stub"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _text(output):
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def _merge_streams(outputs):
    """Join consecutive stream outputs of the same stream into one.

    How a kernel's prints are cut into messages depends on timing, so the
    same cell can be stored as one stream output on one run and two on the
    next; joining them makes re-execution give the same file.
    """
    merged = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None
                and prev.get("output_type") == "stream" and prev.get("name") == out.get("name")):
            # stored as a list of lines, the form nbformat writes, so a joined output and one
            # that arrived whole are stored alike
            merged[-1] = {**prev, "text": (_text(prev) + _text(out)).splitlines(keepends=True)}
        else:
            merged.append(out)
    return merged


def tidy(path) -> bool:
    """Tidy one notebook in place: widget state and outputs, split streams.

    Widget outputs and state are removed, except those of the live figures
    (``attnbook.live``), which are kept with model ids numbered in order
    (:func:`attnbook.live.tidy_widget_state`). Returns True if it changed
    anything.
    """
    from attnbook.live import tidy_widget_state

    nb = _load(path)
    changed = tidy_widget_state(nb, Path(path).stem)
    for cell in nb.get("cells", []):
        outputs = cell.get("outputs", [])
        kept = _merge_streams(outputs)
        if kept != outputs:
            cell["outputs"] = kept
            changed = True
    if changed:
        _save(path, nb)
    return changed


# --- chapter shape: split cells, bootstrap cell, slide metadata, student copies ---

BOOK_ROOT = Path(__file__).resolve().parents[1]
BOOTSTRAP_TAG = "bootstrap"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "skip", "notes")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}|:{3,})\s*(.*)$")
_HEADING = re.compile(r"^#{1,3} ")


def _load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _save(path, nb):
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _lines(text: str) -> list[str]:
    """Notebook-style source: a list of lines, each but the last ending in a newline."""
    return text.splitlines(keepends=True)


def _split_markdown(text: str) -> list[str]:
    """Split markdown before top-level headings and at solution gates (fences are respected)."""
    pieces, current, fence = [], [], None  # fence: (char, length, info) of the open fence
    for line in text.splitlines():
        m = _FENCE.match(line)
        if fence is None:
            if m:
                marker, info = m.group(1), m.group(2)
                if info.startswith("{solution-start}") and current:
                    pieces.append(current)
                    current = []
                fence = (marker[0], len(marker), info)
            elif _HEADING.match(line) and current:
                pieces.append(current)
                current = []
            current.append(line)
        else:
            current.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2):
                if fence[2].startswith("{solution-end}"):
                    pieces.append(current)
                    current = []
                fence = None
    pieces.append(current)
    texts = ["\n".join(p).strip("\n") for p in pieces]
    return [t for t in texts if t.strip()]


def split_cells(nb: dict) -> bool:
    """Split markdown cells before headings and at solution gates. Returns True if it changed."""
    cells, changed = [], False
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            cells.append(cell)
            continue
        parts = _split_markdown(_source(cell))
        if len(parts) <= 1:
            cells.append(cell)
            continue
        changed = True
        base = cell.get("id", "md")
        for k, text in enumerate(parts):
            new = {**json.loads(json.dumps(cell)), "source": _lines(text)}
            if k:
                new["id"] = f"{base}-{k}"[:64]
                new["metadata"] = {}
            cells.append(new)
    nb["cells"] = cells
    return changed


def repository(config_path=None) -> tuple[str, str]:
    """The repository URL and branch set in _config.yml (``repository.url``, ``repository.branch``)."""
    import yaml

    config = yaml.safe_load(Path(config_path or BOOK_ROOT / "_config.yml").read_text(encoding="utf-8"))
    repo = config.get("repository") or {}
    return str(repo["url"]).rstrip("/"), str(repo.get("branch") or "main")


BOOTSTRAP = """\
# Set-up, the same in every chapter. With the book's environment
# (`make lab`) it does nothing. Opened alone (Colab, a downloaded
# notebook), it finds the helper package `attnbook` in the book's
# folder, installs it in Colab, or says how to get it.
try:
    import attnbook  # noqa: F401
except ModuleNotFoundError:
    import importlib.util, os, subprocess, sys
    BOOK = "{url}"
    BRANCH = "{branch}"
    PIP = f"attnbook @ git+{{BOOK}}@{{BRANCH}}"
    here = os.path.abspath("")
    found = [d for d in (here, os.path.dirname(here))
             if os.path.isfile(os.path.join(d, "attnbook", "__init__.py"))]
    if found:
        sys.path.insert(0, found[0])
        print("Using the helper package attnbook from", found[0])
    elif "google.colab" in sys.modules:
        print("Installing the helper package attnbook from", BOOK)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                        PIP])
        importlib.invalidate_caches()
    if not found and importlib.util.find_spec("attnbook") is None:
        raise ModuleNotFoundError(
            "This chapter needs the book's helper package, attnbook. "
            f"Either open the chapter from a copy of the book ({{BOOK}}: "
            "clone or download it, then run `make lab` in it), or install "
            "the package into this kernel with:  "
            f'%pip install "{{PIP}}"') from None
"""


def bootstrap_source(url=None, branch=None) -> str:
    """The bootstrap cell's source, for the repository set in _config.yml (or the one given)."""
    if url is None or branch is None:
        url0, branch0 = repository()
        url, branch = url or url0, branch or branch0
    return BOOTSTRAP.format(url=url, branch=branch).rstrip("\n")


def _is_bootstrap(cell) -> bool:
    return cell["cell_type"] == "code" and BOOTSTRAP_TAG in cell.get("metadata", {}).get("tags", [])


def bootstrap(nb: dict, source: str | None = None) -> bool:
    """Make the first code cell the bootstrap cell (insert it, or update its source)."""
    source = bootstrap_source() if source is None else source
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    if code and _is_bootstrap(code[0]):
        cell = code[0]
        changed = _source(cell) != source
        if changed:
            cell["source"] = _lines(source)
            cell["outputs"], cell["execution_count"] = [], None
        tags = cell["metadata"].setdefault("tags", [])
        if "remove-cell" not in tags:
            tags.append("remove-cell")
            changed = True
        return changed
    cell = {"cell_type": "code", "execution_count": None, "id": "bootstrap",
            "metadata": {"tags": [BOOTSTRAP_TAG, "remove-cell"]}, "outputs": [],
            "source": _lines(source)}
    if nb.get("nbformat_minor", 0) < 5 and nb.get("nbformat", 4) == 4:
        cell.pop("id")
    index = nb["cells"].index(code[0]) if code else len(nb["cells"])
    nb["cells"].insert(index, cell)
    return True


def solution_mask(nb: dict) -> list[bool]:
    """For each cell: does it lie inside a gated solution (solution-start ... solution-end, inclusive)?"""
    mask, inside = [], False
    for cell in nb["cells"]:
        text = _source(cell) if cell["cell_type"] == "markdown" else ""
        starts = bool(re.search(r"^ {0,3}(`{3,}|:{3,})\s*\{solution-start\}", text, re.M))
        ends = bool(re.search(r"^ {0,3}(`{3,}|:{3,})\s*\{solution-end\}", text, re.M))
        mask.append(inside or starts)
        if starts:
            inside = True
        if ends:
            inside = False
    return mask


def _slide_type(cell, in_solution: bool) -> str:
    if _is_bootstrap(cell) or in_solution:
        return "skip"  # set-up, and solutions: not shown in class
    if cell["cell_type"] == "markdown":
        first = _source(cell).lstrip().split("\n", 1)[0]
        if first.startswith(("# ", "## ")):
            return "slide"
        if first.startswith("### "):
            return "subslide"
    return "fragment"  # the rest appears cell by cell


def slides(nb: dict) -> bool:
    """Give every cell RISE slide metadata; a slide per ## heading, a sub-slide per ###.

    A slide type an author set by hand is kept, except that headings always start a
    (sub)slide and the bootstrap cell and solutions are always skipped.
    """
    changed = False
    for cell, in_solution in zip(nb["cells"], solution_mask(nb)):
        wanted = _slide_type(cell, in_solution)
        show = cell.setdefault("metadata", {}).setdefault("slideshow", {})
        current = show.get("slide_type")
        if current is None or (wanted != "fragment" and current != wanted) or current not in SLIDE_TYPES:
            show["slide_type"] = wanted
            changed = True
    rise = nb.setdefault("metadata", {}).setdefault("rise", {})
    for key, value in {"scroll": True, "enable_chalkboard": False}.items():
        if key not in rise:
            rise[key] = value
            changed = True
    return changed


def prepare(path) -> bool:
    """split + bootstrap + slides on one notebook in place. Returns True if it changed anything."""
    nb = _load(path)
    changed = split_cells(nb)
    changed = bootstrap(nb) or changed
    changed = slides(nb) or changed
    if changed:
        _save(path, nb)
    return changed


STUB = """\
# Exercise {label}: your code here (see the exercise above).
"""


def student_copy(nb: dict) -> dict:
    """A student's copy: solutions removed, a stub where an exercise had no code cell, no outputs.

    Solutions are the gated ``{solution-start}`` ... ``{solution-end}`` cells and every
    cell between them. The exercise stubs (functions raising NotImplementedError, whose
    checker then prints "not done yet") are kept as they are.
    """
    nb = json.loads(json.dumps(nb))
    cells, mask = [], solution_mask(nb)
    for i, (cell, in_solution) in enumerate(zip(nb["cells"], mask)):
        if in_solution:
            starts = re.search(r"\{solution-start\}\s*(\S+)", _source(cell)) if cell["cell_type"] == "markdown" else None
            if starts:
                # the exercise's own code cell, if any, sits between its directive and the solution
                label = starts.group(1)
                j = len(cells) - 1
                while j >= 0 and not (cells[j]["cell_type"] == "markdown" and f":label: {label}" in _source(cells[j])):
                    j -= 1
                if not any(c["cell_type"] == "code" for c in cells[j + 1:]) and (
                        any(c["cell_type"] == "code" for c, m in zip(nb["cells"][i:], mask[i:]) if m)):
                    cells.append({"cell_type": "code", "execution_count": None, "id": f"stub-{i}",
                                  "metadata": {"slideshow": {"slide_type": "fragment"}}, "outputs": [],
                                  "source": _lines(STUB.format(label=label).rstrip("\n"))})
            continue
        cells.append(cell)
    for cell in cells:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if cell["cell_type"] == "markdown":
            cell["source"] = _lines(_source(cell).replace("](../figures/", "](figures/"))
    if nb.get("nbformat_minor", 0) < 5:
        for cell in cells:
            cell.pop("id", None)
    nb["cells"] = cells
    nb["metadata"].pop("widgets", None)
    return nb


# --- which cells of a student copy can behave differently from the original (student_slice) ---
#
# A student copy is the original minus the solution regions, plus a stub cell where an exercise
# had no code cell; every other cell is byte-identical. nbval executes every original chapter,
# so a kept cell needs running in the copy only if something it reads can differ there: a name
# a removed solution wrote. The analysis is static and errs on the side of running more: it
# follows names, not values, and a function's free names count as read wherever a name that
# may hold the function is read.

_DYNAMIC = {"exec", "eval", "globals", "locals", "vars", "setattr", "delattr", "__import__",
            "get_ipython", "compile"}
# module functions that change process-wide state: calling one counts as a write to the module
_GLOBAL_STATE = {"seed", "manual_seed", "set_printoptions", "set_default_dtype", "set_grad_enabled",
                 "chdir", "use", "rc", "rcdefaults", "putenv"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = _FUNCTIONS + (ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class _Scope:
    """What one scope does with names: reads (free), binds, declares global, mutates."""

    def __init__(self):
        self.loads, self.binds, self.globals, self.imported = set(), set(), set(), set()
        self.mutated = set()  # ("call" | "store", root name): x.append(1), x[0] = 1, obj.a = 2
        self.dynamic = self.nested = False


def _root(node):
    """The name at the root of ``a.b[c].d``, or None."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _params(node) -> set:
    if not isinstance(node, _FUNCTIONS):
        return set()
    args = node.args
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
            + [a for a in (args.vararg, args.kwarg) if a]}


def _nested(node, scope: _Scope, stack: list):
    """A def, class, lambda or comprehension inside ``scope``: its free names become the scope's."""
    inner = _Scope()
    scope.nested = True
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scope.binds.add(node.name)
        stack.extend(node.decorator_list)
    if isinstance(node, ast.ClassDef):
        stack.extend(node.bases + [k.value for k in node.keywords])
        _scan(node.body, inner)
        local = set()  # class-level names are not visible in methods: count every read
    elif isinstance(node, _FUNCTIONS):
        stack.extend(node.args.defaults + [d for d in node.args.kw_defaults if d])
        _scan(node.body if isinstance(node.body, list) else [node.body], inner)
        local = (inner.binds | _params(node)) - inner.globals
    else:  # a comprehension: the first iterable is evaluated outside, the targets are its own
        gens = node.generators
        stack.append(gens[0].iter)
        parts = [g.target for g in gens] + [g.iter for g in gens[1:]]
        parts += [c for g in gens for c in g.ifs]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        _scan(parts, inner)
        local = inner.binds - inner.globals
        scope.binds |= inner.binds & inner.globals
    scope.loads |= inner.loads - local
    scope.globals |= inner.globals
    scope.mutated |= {m for m in inner.mutated if m[1] not in local}
    scope.imported |= inner.imported & inner.globals
    scope.dynamic |= inner.dynamic


def _scan(nodes, scope: _Scope):
    """Fill ``scope`` from statements or expressions of one scope."""
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            _nested(node, scope, stack)
            continue
        if isinstance(node, ast.Name):
            (scope.loads if isinstance(node.ctx, ast.Load) else scope.binds).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                scope.binds.add(name)
                scope.imported.add(name)
                scope.dynamic |= alias.name == "*"
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            scope.globals.update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            scope.binds.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            scope.binds.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            scope.binds.add(node.rest)
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC:
                scope.dynamic = True
            if isinstance(node.func, ast.Attribute) and _root(node.func.value):
                kind = "store" if node.func.attr in _GLOBAL_STATE else "call"
                scope.mutated.add((kind, _root(node.func.value)))
        elif (isinstance(node, (ast.Attribute, ast.Subscript))
              and not isinstance(node.ctx, ast.Load)):
            if _root(node.value):
                scope.mutated.add(("store", _root(node.value)))
        stack.extend(ast.iter_child_nodes(node))


def _unconditional_binds(stmt) -> set:
    """Names a top-level statement binds whenever it completes (so later reads are its own)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {a.asname or a.name.split(".")[0] for a in stmt.names}
    targets = (stmt.targets if isinstance(stmt, ast.Assign)
               else [stmt.target] if isinstance(stmt, ast.AnnAssign) and stmt.value else [])
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _python(source: str) -> tuple[str, bool]:
    """A cell's source as Python, and whether it used IPython syntax (magics, shell escapes)."""
    from IPython.core.inputtransformer2 import TransformerManager

    python = TransformerManager().transform_cell(source) if re.search(r"[%!]", source) else source
    return python, "get_ipython()" in python


def _statements(source: str):
    """Per top-level statement of a cell: (reads, binds, scope); None if the cell is not Python."""
    python, magic = _python(source)
    try:
        tree = ast.parse(python)
    except SyntaxError:
        return None
    out, settled = [], set()
    for stmt in tree.body:
        scope = _Scope()
        _scan([stmt], scope)
        scope.dynamic |= magic
        out.append((scope.loads - settled, scope.binds | scope.globals, scope))
        settled |= _unconditional_binds(stmt)
    return out


def _closure(names, table) -> set:
    out, todo = set(names), list(names)
    while todo:
        for extra in table.get(todo.pop(), ()):
            if extra not in out:
                out.add(extra)
                todo.append(extra)
    return out


def is_exercise_stub(cell) -> bool:
    """An auto-checked exercise stub: it raises NotImplementedError and calls a checker."""
    text = _source(cell)
    return cell["cell_type"] == "code" and "NotImplementedError" in text and "check.check_" in text


def student_slice(nb: dict, copy: dict | None = None) -> dict[int, str]:
    """Which code cells of ``student_copy(nb)`` must run, in order: {index in the copy: reason}.

    Every other code cell of the copy is byte-identical to the original's and reads no name
    that a removed solution wrote, nor one written by a cell that read such a name: nbval's
    run of the original has run it as it would run in the copy. The rules err towards running:

    - tainted: every name a solution cell binds (assignment, for/with/except targets, walrus,
      del, def/class, import, ``global``) and the receiver of a method call or of a subscript or
      attribute store in it (``rng.normal()``, ``x[0] = 1``, ``x.append(1)``), except a name
      only ever bound by imports (calling a module's function is not a write to the module,
      unless it changes process-wide state: ``np.random.seed``, ``torch.manual_seed``, ...);
    - a cell using IPython syntax (magic, shell escape), ``exec``, ``eval``, ``globals()``,
      ``setattr``, ..., or one that does not parse: every code cell runs;
    - affected: a kept cell reading a tainted name; what it writes is tainted too;
    - must run: the set-up cell, every stub, changed or added cell, every affected cell, and
      then, for each name such a cell reads, every earlier kept cell that writes it (and so on).

    A function's free names count as read where it is defined and wherever a name that may
    hold it (the def's name, or a name assigned from an expression reading it) is read; the
    names its body mutates or declares global count as written there too.
    """
    copy = student_copy(nb) if copy is None else copy
    code = [i for i, c in enumerate(copy["cells"]) if c["cell_type"] == "code"]
    original = [(c, m) for c, m in zip(nb["cells"], solution_mask(nb)) if c["cell_type"] == "code"]
    # the copy's code cells that are an original kept cell, unchanged (the rest are stubs)
    kept, origin = iter([k for k, (_, m) in enumerate(original) if not m]), {}
    pending = next(kept, None)
    for i in code:
        if pending is not None and _source(copy["cells"][i]) == _source(original[pending][0]):
            origin[i], pending = pending, next(kept, None)
    cells = [_statements(_source(c)) for c, _ in original]
    cells += [_statements(_source(copy["cells"][i])) for i in code if i not in origin]
    if any(c is None or any(s[2].dynamic for s in c) for c in cells):
        return {i: "full run: a cell the analysis cannot follow" for i in code}
    bound_otherwise = {n for c in cells for _, binds, s in c for n in binds - s.imported}
    modules = {n for c in cells for _, _, s in c for n in s.imported} - bound_otherwise
    # per name: what the functions it may hold read and write (free names, mutations, globals)
    sum_reads, sum_writes = {}, {}

    def effects(statements):
        """(reads, writes) of a cell, through the functions it may call; updates the tables."""
        reads, writes = set(), set()
        for loads, binds, scope in statements:
            mutated = {n for kind, n in scope.mutated if kind == "store" or n not in modules}
            calls = _closure(loads, sum_reads)
            did = mutated | scope.globals | {w for n in calls for w in sum_writes.get(n, ())}
            for name in binds | mutated:
                if scope.nested:  # a def, class or lambda: its free names, read when it runs
                    sum_reads.setdefault(name, set()).update(scope.loads - {name})
                    sum_writes.setdefault(name, set()).update(did - {name})
                else:  # y = f(...): y may hold what f returns, a function among others
                    for n in loads - {name}:
                        sum_reads.setdefault(name, set()).update(sum_reads.get(n, ()))
                        sum_writes.setdefault(name, set()).update(sum_writes.get(n, ()))
            reads |= calls
            writes |= binds | did
        return reads, writes

    info = [effects(c) for c in cells[:len(original)]]
    tainted, reason = set(), {}
    position = {k: i for i, k in origin.items()}
    for k, ((_, in_solution), (reads, writes)) in enumerate(zip(original, info)):
        if in_solution:
            tainted |= writes
        elif k in position and reads & tainted:
            hit = ", ".join(sorted(reads & tainted)[:3])
            reason[position[k]] = f"reads {hit}: a solution wrote it"
            tainted |= writes
    for i in code:
        if i not in origin:
            reason[i] = "stub (not in the original)"
        elif _is_bootstrap(copy["cells"][i]):
            reason[i] = "set-up cell"
        elif is_exercise_stub(copy["cells"][i]):
            reason.setdefault(i, "exercise stub (its checker must say 'not done yet')")
    extra = iter(cells[len(original):])
    stub_reads = {i: effects(next(extra))[0] for i in code if i not in origin}
    todo = list(reason)
    while todo:
        i = todo.pop()
        reads = info[origin[i]][0] if i in origin else stub_reads[i]
        for j in code:
            if j < i and j not in reason and j in origin and reads & info[origin[j]][1]:
                hit = ", ".join(sorted(reads & info[origin[j]][1])[:3])
                reason[j] = f"writes {hit} for cell {i}"
                todo.append(j)
    return {i: reason[i] for i in sorted(reason)}


def write_student_copies(outdir, notebooks) -> list[Path]:
    """Write student copies of the notebooks into outdir, with figures/ and attnbook/ beside them.

    The folder is self-contained: hand it out as it is. The bootstrap cell finds the copy of
    attnbook in the folder, so the notebooks run with numpy, matplotlib and ipywidgets installed.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebooks:
        target = outdir / Path(path).name
        _save(target, student_copy(_load(path)))
        written.append(target)
    for folder in ("figures", "attnbook"):
        if (BOOK_ROOT / folder).is_dir():
            shutil.rmtree(outdir / folder, ignore_errors=True)
            shutil.copytree(BOOK_ROOT / folder, outdir / folder,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return written


# --- executing notebooks (make outputs) ---

CELL_TIMEOUT = 120  # seconds per cell for `make outputs`; the slowest cell takes a few


def fix_nbclient_output_widget() -> None:
    """Make nbclient's Output-widget mimic send on the asyncio socket's own path.

    When a cell shows an ``ipywidgets.interactive`` (the book's sliders), nbclient plays
    the front end of its Output widget and sends a ``comm_msg`` on the shell socket while
    it awaits the cell's ``execute_reply`` on that same socket. jupyter_client's
    ``Session.send`` sends through a synchronous shadow of the asyncio socket; libzmq then
    processes the socket's pending commands ("a message arrived") and clears its
    edge-triggered FD, so the event loop is never woken for a reply that has already
    arrived. The reply is then read only when the poll times out (nbclient's cell timeout,
    600 s by default) and the cell "succeeds" ten minutes late. Sending with the asyncio
    socket's ``send_multipart`` lets pyzmq re-check the socket's events after the send.
    (nbclient 0.10-0.11, jupyter_client 8, pyzmq 27; see "Tests" in README.md.)
    """
    from nbclient import output_widget

    if getattr(output_widget.OutputWidget, "_attnbook_fixed", False):
        return
    output_widget.OutputWidget._publish_msg = _output_widget_publish_msg
    output_widget.OutputWidget._attnbook_fixed = True


def _output_widget_publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
    """nbclient's ``OutputWidget._publish_msg``, sending with the asyncio socket's own method."""
    from nbclient.jsonutil import json_clean

    content = json_clean(dict(data={} if data is None else data, comm_id=self.comm_id, **keys))
    msg = self.kernel_client.session.msg(msg_type, content=content, parent=self.parent_header,
                                         metadata={} if metadata is None else metadata)
    frames = self.kernel_client.session.serialize(msg) + list(buffers or [])
    self.kernel_client.shell_channel.socket.send_multipart(frames)


def ipc_kernel_manager():
    """jupyter_client's KernelManager with the kernel's sockets on Unix sockets, not TCP.

    On TCP, jupyter_client picks each of a kernel's five ports by binding to port 0 and
    releasing it, and the kernel binds it a moment later; a kernel started at the same
    moment by another process can be handed the same port in between. Its client then
    talks to the other kernel, whose replies are signed with another key and ignored: the
    kernel "didn't respond in 60 seconds" (seen in `make test` once its two workers started
    chapters' kernels together). Unix sockets get unique file names instead of ports
    (in Jupyter's runtime folder, given as absolute paths: the kernel runs in the
    notebook's folder, the client elsewhere), so no two kernels can meet.
    """
    import os
    import uuid

    from jupyter_client.manager import KernelManager
    from jupyter_core.paths import jupyter_runtime_dir
    from traitlets import default

    class IPCKernelManager(KernelManager):
        @default("transport")
        def _default_transport(self):
            return "ipc"

        @default("ip")
        def _default_ip(self):
            runtime = jupyter_runtime_dir()
            os.makedirs(runtime, exist_ok=True)
            return os.path.join(runtime, f"kernel-{uuid.uuid4().hex[:16]}-ipc")

    return IPCKernelManager


def execute(notebooks, timeout: int = CELL_TIMEOUT) -> int:
    """Execute notebooks in place with nbconvert (as `jupyter nbconvert --execute --inplace`)."""
    from nbconvert.nbconvertapp import NbConvertApp

    fix_nbclient_output_widget()
    app = NbConvertApp()
    app.initialize(["--to", "notebook", "--execute", "--inplace",
                    f"--ExecutePreprocessor.timeout={timeout}",
                    "--ExecutePreprocessor.record_timing=False", *map(str, notebooks)])
    app.start()
    return 0


USAGE = """usage: python -m attnbook.nbtools COMMAND ...
  prepare NOTEBOOK...          split cells, insert/update the bootstrap cell, add slide metadata
  tidy NOTEBOOK...             join split stream outputs, remove widget state and widget outputs
                               (except the live figures' state, renumbered)
  student OUTDIR NOTEBOOK...   write student copies (solutions removed) into OUTDIR
  execute NOTEBOOK...          execute in place with nbconvert (fixed Output-widget sends)"""
# --- optional dependencies of a notebook (PyTorch chapter) ---
# A notebook that needs a package beyond requirements.txt says so in its metadata:
#     "attnbook": {"requires": ["torch"]}
# The root conftest.py skips such a notebook's cells when a package is missing.

INSTALL_HINTS = {"torch": "make torch"}


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


__all__ += ["notebook_requirements", "missing_requirements", "skip_reason"]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("tidy", "prepare", "student", "execute"):
        print(USAGE, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    if command == "tidy":
        for p in args:
            if tidy(p):
                print(f"tidied {p}")
    elif command == "execute":
        return execute(args)
    elif command == "prepare":
        for p in args:
            if prepare(p):
                print(f"prepared {p}: cells split at headings and solution gates, bootstrap cell, slide metadata")
    else:
        if not args:
            print(USAGE, file=sys.stderr)
            return 2
        for target in write_student_copies(args[0], args[1:]):
            print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
