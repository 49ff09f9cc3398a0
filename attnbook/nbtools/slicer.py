"""Which cells of a student copy can behave differently from the original: the
program slice that a removed solution can affect (``student_slice``)."""

from __future__ import annotations

import re

import ast

from ._io import _source
from .setup_cell import _is_bootstrap
from .slides import solution_mask
from .student import student_copy

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


