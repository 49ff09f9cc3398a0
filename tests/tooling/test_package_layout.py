"""The helper package has the shape of the book: no import cycles, one module per part
for the answer key and the checkers (re-exported by the facades chapters import), and
every checker written on the one mechanism in attnbook.checking."""

import ast
import json
from pathlib import Path

import pytest

from attnbook import check, live, reference

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "attnbook"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(name: str) -> bool:
    return (ROOT / Path(*name.split(".")) / "__init__.py").exists()


def _exists(name: str) -> bool:
    path = ROOT / Path(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imports_of(path: Path) -> set:
    """The attnbook modules a file imports, anywhere in it (function bodies included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "attnbook"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "attnbook":
                continue
            found.add(target)
            for alias in node.names:  # `from . import reference` imports a module
                if _exists(f"{target}.{alias.name}"):
                    found.add(f"{target}.{alias.name}")
    return {m for m in found if m != name}


def import_graph() -> dict:
    return {module_name(p): imports_of(p) for p in sorted(PACKAGE.rglob("*.py"))}


def find_cycle(graph: dict):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_a_parent_import_is_seen():
    # reference/fast.py importing the facade `from .. import reference` would be a cycle
    graph = import_graph()
    assert "attnbook.reference.fast" in graph["attnbook.reference"]
    graph["attnbook.reference.fast"] = graph["attnbook.reference.fast"] | {"attnbook.reference"}
    assert find_cycle(graph)


def test_no_import_cycle_inside_attnbook():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("low", ["attnbook.validate", "attnbook.checking", "attnbook.nbtools._io"])
def test_the_low_modules_import_nothing_of_the_package(low):
    assert import_graph()[low] == set()


def test_the_answer_key_does_not_import_the_checkers_or_the_facade():
    for name, targets in import_graph().items():
        if name.startswith("attnbook.reference."):
            assert not {t for t in targets if t.startswith("attnbook.check")}, name
            assert "attnbook.reference" not in targets and "attnbook" not in targets, name


def test_every_part_module_is_re_exported_by_its_facade():
    for facade, folder in ((reference, "reference"), (check, "check")):
        for path in sorted((PACKAGE / folder).glob("[!_]*.py")):
            module = __import__(f"attnbook.{folder}.{path.stem}", fromlist=["__all__"])
            public = [n for n in getattr(module, "__all__", []) if not n.endswith("_cases")]
            public = [n for n in public if not n.endswith("_mistakes") and n != "attention_flops_reference"]
            missing = [n for n in public if not hasattr(facade, n)]
            assert not missing, f"{path.name}: {missing} not in attnbook.{folder}"


def test_modules_are_small_enough_to_read_in_one_sitting():
    long = {module_name(p): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long, long


def test_checkers_use_the_one_mechanism():
    """No checker module prints hints or failures itself: run_cases does."""
    for path in sorted((PACKAGE / "check").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "print(" not in text and "textwrap" not in text, path.name


def test_live_figures_are_found_in_the_notebooks():
    shown = {}
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        for cls, _ in live.figures_in(json.loads(path.read_text(encoding="utf-8"))):
            assert cls is not None, f"{path.name}: a live figure of unknown class"
            shown.setdefault(cls, path.stem)
    assert set(shown) == set(live.FIGURES), shown


def test_every_checker_says_which_answer_key_functions_its_exercise_asks_for():
    """The student kit seals these (attnbook.nbtools.kit): a new checker must say."""
    checkers = [n for n in check.__all__ if n.startswith("check_")]
    assert set(checkers) == set(check.ANSWER_KEY), set(checkers) ^ set(check.ANSWER_KEY)
    for names in check.ANSWER_KEY.values():
        assert all(callable(getattr(reference, n)) for n in names), names


def test_every_subpackage_is_installed():
    """pyproject.toml lists the packages setuptools installs: a subpackage left out works in
    the editable install of the book and is missing from a wheel (the student kit, Colab)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")
             if "_kit_data" not in p.parts}
    assert found == listed, f"in the tree, not listed: {sorted(found - listed)}; " \
                            f"listed, not in the tree: {sorted(listed - found)}"
