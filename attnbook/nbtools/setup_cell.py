"""The set-up cell every chapter starts with (its first code cell)."""

from __future__ import annotations

from pathlib import Path

from ._io import BOOK_ROOT, BOOTSTRAP_TAG, _lines, _source

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


