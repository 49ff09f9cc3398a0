"""The set-up cell every chapter starts with (its first code cell)."""

from __future__ import annotations

import re
from pathlib import Path

from ._io import BOOK_ROOT, BOOTSTRAP_TAG, _lines, _source

# The book's repository, as `make repository` records it in _config.yml: a GitHub URL
# (``repository.url``), the tag readers' launch buttons open (``repository.branch``: the
# theme's name for the ref; a tag of the publishing commit, never a branch) and the commit the
# set-up cell installs the helper package from in Colab (``repository.commit``). Without a
# URL, nothing is ever installed from the network and no launch button shows.
GITHUB = re.compile(r"https://github\.com/([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})")
COMMIT = re.compile(r"[0-9a-f]{40}")
# Names that stand for "your account here": a URL naming one is not a repository anyone
# published, and whoever registers the name would own it.
PLACEHOLDER = re.compile(r"your|example|placeholder|^owner$|^user(name)?$|^account$|^org$", re.I)


def is_placeholder(url: str) -> bool:
    """True for no URL, or for a URL whose owner or name is a placeholder."""
    m = GITHUB.fullmatch((url or "").rstrip("/"))
    return not url or (m is not None and any(PLACEHOLDER.search(part) for part in m.groups()))


def check_repository(url: str, commit: str) -> None:
    """Refuse what cannot be a published, fixed version of the book, saying why."""
    if not GITHUB.fullmatch(url):
        raise ValueError(f"repository URL {url!r}: expected https://github.com/OWNER/NAME "
                         "(the launch buttons work with GitHub only)")
    if is_placeholder(url):
        raise ValueError(f"repository URL {url!r} names a placeholder, not a real account: "
                         "whoever registers that name would run their code in every reader's "
                         "runtime. Give the repository the book is really published in.")
    if not COMMIT.fullmatch(commit or ""):
        raise ValueError(f"repository ref {commit!r} is not a full commit hash (40 hex digits): "
                         "a branch moves, so a reader's click would install whatever it holds "
                         "at that moment. Set it with `make repository URL=... REF=<new tag>`, "
                         "which records this clone's commit.")


MOVING = {"main", "master", "develop", "dev", "trunk", "gh-pages", "head", "latest", "stable"}
TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_launch_ref(ref: str) -> None:
    """The ref the launch buttons open must be a tag name (or a commit), not a branch."""
    if not TAG.fullmatch(ref or "") or ref.lower() in MOVING or ref.endswith(".lock"):
        raise ValueError(f"REF={ref!r} is not a tag name for this publication (e.g. v1.0): a "
                         "branch moves, so a reader's click would open whatever it holds at "
                         "that moment.")


def _config(config_path=None) -> dict:
    import yaml

    path = Path(config_path or BOOK_ROOT / "_config.yml")
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("repository") or {}


def repository(config_path=None) -> tuple[str | None, str | None]:
    """The repository URL and the commit the set-up cell installs from, as set in _config.yml
    (``repository.url`` and ``repository.commit``, written by `make repository`), or
    (None, None) when it names none (no URL, or a placeholder such as YOUR-GITHUB-ACCOUNT).
    A real URL with anything but a full commit hash is an error (ValueError), never a moving
    branch to install from."""
    repo = _config(config_path)
    url, commit = str(repo.get("url") or "").rstrip("/"), str(repo.get("commit") or "")
    if is_placeholder(url):
        return None, None
    check_repository(url, commit)
    return url, commit


def launch_ref(config_path=None) -> str | None:
    """The tag the launch buttons open (``repository.branch``), or None with no repository."""
    if repository(config_path)[0] is None:
        return None
    ref = str(_config(config_path).get("branch") or "")
    check_launch_ref(ref)
    return ref


BOOTSTRAP_OFFLINE = """\
# Set-up, the same in every chapter. With the book's environment
# (`make lab`) it does nothing. Opened alone, it finds the helper
# package `attnbook` in the book's folder, or says how to get it. It
# installs nothing: the book names no published repository (see
# `make repository` in the README).
try:
    import attnbook  # noqa: F401
except ModuleNotFoundError:
    import os, sys
    here, up = os.path.abspath(""), os.path.dirname
    found = [d for d in (here, up(here), up(up(here)))  # zh/chapters too
             if os.path.isfile(os.path.join(d, "attnbook", "__init__.py"))]
    if not found:
        raise ModuleNotFoundError(
            "This chapter needs the book's helper package, attnbook: open it "
            "from a copy of the book (`make lab` in its folder).") from None
    sys.path.insert(0, found[0])
    print("Using the helper package attnbook from", found[0])
"""

BOOTSTRAP = """\
# Set-up, the same in every chapter. With the book's environment
# (`make lab`) it does nothing. Opened alone (Colab, a downloaded
# notebook), it finds the helper package `attnbook` in the book's
# folder, installs it in Colab from the book's repository at one
# fixed commit (set by `make repository`), or says how to get it.
try:
    import attnbook  # noqa: F401
except ModuleNotFoundError:
    import importlib.util, os, subprocess, sys
    BOOK = "{url}"
    COMMIT = "{commit}"
    PIP = f"attnbook @ git+{{BOOK}}@{{COMMIT}}"
    here, up = os.path.abspath(""), os.path.dirname
    found = [d for d in (here, up(here), up(up(here)))  # zh/chapters too
             if os.path.isfile(os.path.join(d, "attnbook", "__init__.py"))]
    if found:
        sys.path.insert(0, found[0])
        print("Using the helper package attnbook from", found[0])
    elif "google.colab" in sys.modules:
        print("Installing the helper package attnbook from", BOOK,
              "at commit", COMMIT[:12])
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


def bootstrap_source(url=None, commit=None) -> str:
    """The set-up cell's source for the repository set in _config.yml, or for the one given
    (``url`` and a full ``commit`` hash). With no repository (or a placeholder), the cell
    installs nothing and says in one line what to do instead."""
    if url is None and commit is None:
        url, commit = repository()
    if url is None or is_placeholder(url):
        return BOOTSTRAP_OFFLINE.rstrip("\n")
    check_repository(url, commit)
    return BOOTSTRAP.format(url=url, commit=commit).rstrip("\n")


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




# --- `make repository`: one command sets the repository for the whole book ---

LAUNCHERS = {"binderhub_url": "https://mybinder.org",
             "colab_url": "https://colab.research.google.com"}


def _git(git_dir, *args) -> str | None:
    import subprocess

    proc = subprocess.run(["git", "-C", str(git_dir or BOOK_ROOT), *args],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _install_commit(git_dir) -> str:
    """This clone's HEAD, whose helper package is the one readers will install: refused if
    the package's files have changes not committed (they would not be in it)."""
    head = _git(git_dir, "rev-parse", "--verify", "HEAD")
    if not head or not COMMIT.fullmatch(head):
        raise ValueError("this folder is not a git clone with a commit: commit the book first")
    dirty = _git(git_dir, "status", "--porcelain", "--", "attnbook", "pyproject.toml")
    if dirty:
        raise ValueError("the helper package has changes that are not committed (readers would "
                         "not get them): commit attnbook/ and pyproject.toml first\n" + dirty)
    return head


def _set_keys(text: str, block: str, values: dict) -> str:
    """``text`` (YAML) with the given keys of the top-level mapping ``block`` set, each to a
    quoted string; comments and every other line are kept."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == f"{block}:"), None)
    if start is None:
        raise ValueError(f"_config.yml has no top-level {block!r} section")
    todo = dict(values)
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line.startswith((" ", "#")):
            break  # the next top-level key
        m = re.match(r"(\s+)([A-Za-z_]+):", line)
        if m and m.group(2) in todo:
            value = todo.pop(m.group(2))
            comment = re.search(r"\s+#.*$", line.rstrip("\n"))
            lines[i] = (f'{m.group(1)}{m.group(2)}: "{value}"'
                        + (comment.group(0) if comment else "") + "\n")
    if todo:
        raise ValueError(f"_config.yml: {block}: no line for {sorted(todo)}")
    return "".join(lines)


def set_repository(url: str, ref: str, notebooks, config_path=None, git_dir=None,
                   commit=None) -> list[str]:
    """Set (or, with an empty ``url``, unset) the book's repository everywhere: _config.yml's
    ``repository`` and launch buttons, and the set-up cell of every notebook given, whose
    source alone changes (its stored output stays: with the book's environment the cell
    prints nothing either way). ``ref`` is the tag this publication will carry (it must not
    exist yet: its commit is the one that records it); the set-up cell installs the helper
    package from ``commit``, by default this clone's HEAD. Returns what it changed."""
    config_path = Path(config_path or BOOK_ROOT / "_config.yml")
    url = (url or "").strip().rstrip("/")
    if url:
        url = url[:-4] if url.endswith(".git") else url
        check_launch_ref(ref)
        if _git(git_dir, "rev-parse", "--verify", "--quiet", f"refs/heads/{ref}"):
            raise ValueError(f"REF={ref!r} is a branch of this clone: a branch moves. Give the "
                             "name of a new tag for this publication, e.g. REF=v1.0.")
        if _git(git_dir, "rev-parse", "--verify", "--quiet", f"refs/tags/{ref}"):
            raise ValueError(f"the tag {ref!r} exists already: a publication's tag goes on the "
                             "commit that records it (made after this command), so choose a new "
                             "tag name for this publication")
        commit = commit or _install_commit(git_dir)
        check_repository(url, commit)
        source = bootstrap_source(url, commit)
    else:
        ref = commit = ""
        source = bootstrap_source(None, "")
    text = config_path.read_text(encoding="utf-8")
    new = _set_keys(text, "repository", {"url": url, "branch": ref, "commit": commit})
    new = _set_keys(new, "launch_buttons",
                    {k: (v if url else "") for k, v in LAUNCHERS.items()})
    changed = []
    if new != text:
        config_path.write_text(new, encoding="utf-8")
        changed.append(f"{config_path.name}: " + (
            f"repository {url}; launch buttons open tag {ref}; Colab installs attnbook from "
            f"commit {commit}" if url else "no repository; launch buttons off"))
    from ._io import _load, _save

    for path in notebooks:
        nb = _load(path)
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        if not (code and _is_bootstrap(code[0])):
            raise ValueError(f"{path}: its first code cell is not the set-up cell "
                             "(run `make outputs` first)")
        if _source(code[0]) != source:
            code[0]["source"] = _lines(source)
            _save(path, nb)
            changed.append(f"{path}: set-up cell")
    return changed
