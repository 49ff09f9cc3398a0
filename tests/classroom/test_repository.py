"""The book's repository: no launch button and no install from a placeholder, and from a real
repository only one fixed commit (`make repository`, attnbook/nbtools/setup_cell.py).

- The set-up cell of every chapter matches _config.yml. While _config.yml names no real
  repository (none, or a placeholder such as YOUR-GITHUB-ACCOUNT), the cell, run in a
  simulated Colab (google.colab present, pip and every network connection recorded instead
  of made), installs nothing, touches no network and says in one line what to do.
- With a repository set, the same simulated Colab run installs exactly one thing:
  ``attnbook @ git+URL@COMMIT``, COMMIT a full commit hash; a branch is refused, as is a
  placeholder URL.
- `make repository` (``nbtools.set_repository``) writes _config.yml and every set-up cell
  (their source only: outputs, ids and every other cell stay): the launch buttons open a new
  tag, REF (never a branch or a tag that exists already), and Colab installs the helper
  package from the clone's HEAD (refused while attnbook/ has uncommitted changes).
- Every page of the built site: no launch link (Binder, Colab, JupyterHub) while there is no
  repository; with one, each launch link names it and its tag.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from attnbook import nbtools
from attnbook.nbtools import setup_cell

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))
REAL = "https://github.com/attnbook-authors/attention-book"  # a well-formed URL, for the tests
COMMIT = "0123456789abcdef0123456789abcdef01234567"
FIX = "run `make repository URL=... REF=...` (or `make repository URL=` for none)"

# google.colab is present; pip, os.system and every socket connection are recorded, not run.
FAKE_COLAB = textwrap.dedent("""
    import os, socket, subprocess, sys, types
    sys.modules["google.colab"] = types.ModuleType("google.colab")
    def fake_run(cmd, *a, **k):
        print("RUN", list(cmd[1:]))
        return subprocess.CompletedProcess(cmd, 1)
    subprocess.run = subprocess.call = subprocess.check_call = fake_run
    os.system = lambda cmd: print("SYSTEM", cmd) or 1
    def no_network(self, address, *a):
        print("CONNECT", address)
        raise OSError("no network in this test")
    socket.socket.connect = socket.socket.connect_ex = no_network
""")


def first_code_cell(path) -> str:
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    return nbtools._source(next(c for c in nb["cells"] if c["cell_type"] == "code"))


def run_in_colab(source: str, cwd) -> subprocess.CompletedProcess:
    """The set-up cell in a fresh interpreter without attnbook (-I -S), in a simulated Colab."""
    code = FAKE_COLAB + "\n" + source + "\n"
    return subprocess.run([sys.executable, "-S", "-I", "-c", code], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def installs(proc) -> list[str]:
    return [line for line in proc.stdout.splitlines() if line.startswith(("RUN", "SYSTEM",
                                                                          "CONNECT"))]


# --- the set-up cells the chapters hold ---

def test_the_configured_repository_is_real_or_none():
    url, commit = nbtools.repository()
    ref = setup_cell.launch_ref()
    if url is not None:
        assert setup_cell.COMMIT.fullmatch(commit) and not setup_cell.is_placeholder(url)
        assert ref and ref.lower() not in setup_cell.MOVING
    else:
        assert ref is None
    text = (ROOT / "_config.yml").read_text(encoding="utf-8")
    assert "YOUR-GITHUB-ACCOUNT" not in re.sub(r"#.*", "", text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_set_up_cell_matches_the_config(path):
    source, (url, commit) = first_code_cell(path), nbtools.repository()
    assert source == nbtools.bootstrap_source(), f"{path.name}: set-up cell out of date: {FIX}"
    installs_from = re.findall(r"git\+|pip", source)
    if url is None:
        assert not installs_from and "http" not in source, source
    else:
        assert f'BOOK = "{url}"' in source and f'COMMIT = "{commit}"' in source


def test_the_committed_set_up_cell_in_a_simulated_colab(tmp_path):
    """Chapter 01's own set-up cell, run as Colab runs it, with no copy of the book around."""
    url, commit = nbtools.repository()
    proc = run_in_colab(first_code_cell(NOTEBOOKS[0]), tmp_path)
    if url is None:
        assert installs(proc) == [], f"it tried to install: {installs(proc)}"
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert last == ("ModuleNotFoundError: This chapter needs the book's helper package, "
                        "attnbook: open it from a copy of the book (`make lab` in its "
                        "folder)."), proc.stderr
    else:
        assert installs(proc) == [f"RUN ['-m', 'pip', 'install', '--quiet', "
                                  f"'attnbook @ git+{url}@{commit}']"], proc.stdout


def test_with_a_repository_colab_installs_one_fixed_commit(tmp_path):
    proc = run_in_colab(nbtools.bootstrap_source(REAL, COMMIT), tmp_path)
    assert installs(proc) == [f"RUN ['-m', 'pip', 'install', '--quiet', "
                              f"'attnbook @ git+{REAL}@{COMMIT}']"], proc.stdout
    assert f"Installing the helper package attnbook from {REAL} at commit {COMMIT[:12]}" \
        in proc.stdout
    # the fake pip installed nothing, so the cell then says what to do, in one line
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: This chapter needs") and COMMIT in last


def test_the_set_up_cell_uses_the_book_folder_without_installing():
    """Binder, a hub, a downloaded zip: the notebook sits in chapters/, attnbook beside it."""
    for source in (nbtools.bootstrap_source(None, ""), nbtools.bootstrap_source(REAL, COMMIT)):
        proc = run_in_colab(source + "\nimport attnbook; print('IMPORTED', attnbook.__file__)",
                            ROOT / "chapters")
        assert proc.returncode == 0 and installs(proc) == [], proc.stdout + proc.stderr
        assert f"IMPORTED {ROOT / 'attnbook' / '__init__.py'}" in proc.stdout


@pytest.mark.parametrize("url,ref,why", [
    (REAL, "main", "not a full commit hash"),
    (REAL, COMMIT[:12], "not a full commit hash"),
    ("https://github.com/YOUR-GITHUB-ACCOUNT/attention-book", COMMIT, "placeholder"),
    ("https://github.com/your-name/attention-book", COMMIT, "placeholder"),
    ("http://github.com/a/attention-book", COMMIT, "expected https://github.com/OWNER/NAME"),
    ("https://gitlab.com/a/attention-book", COMMIT, "expected https://github.com/OWNER/NAME"),
])
def test_a_moving_branch_or_a_placeholder_is_refused(url, ref, why):
    with pytest.raises(ValueError, match=why):
        setup_cell.check_repository(url, ref)


def test_a_config_with_a_branch_is_an_error_not_an_install(tmp_path):
    config = tmp_path / "_config.yml"
    config.write_text(f'repository:\n  url: "{REAL}"\n  branch: v1.0\n  commit: main\n',
                      encoding="utf-8")
    with pytest.raises(ValueError, match="a branch moves"):
        nbtools.repository(config)
    config.write_text(f'repository:\n  url: "{REAL}"\n  branch: main\n  commit: {COMMIT}\n',
                      encoding="utf-8")
    assert nbtools.repository(config) == (REAL, COMMIT)
    with pytest.raises(ValueError, match="not a tag name"):
        setup_cell.launch_ref(config)
    config.write_text("repository:\n  url: https://github.com/YOUR-GITHUB-ACCOUNT/attention-book"
                      "\n  branch: main\n", encoding="utf-8")
    assert nbtools.repository(config) == (None, None), "a placeholder is no repository"
    assert setup_cell.launch_ref(config) is None


# --- `make repository` ---

def _git(cwd, *args):
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                          "GIT_COMMITTER_NAME": "t",
                                          "GIT_COMMITTER_EMAIL": "t@t",
                                          "PATH": "/usr/bin:/bin"}).stdout.strip()


def test_make_repository_sets_the_config_and_every_set_up_cell(tmp_path):
    book = tmp_path / "book"
    (book / "chapters").mkdir(parents=True)
    (book / "attnbook").mkdir()
    (book / "attnbook" / "__init__.py").write_text("", encoding="utf-8")
    shutil.copy(ROOT / "_config.yml", book / "_config.yml")
    copies = [book / "chapters" / p.name for p in NOTEBOOKS[:2]]
    for p, c in zip(NOTEBOOKS, copies):
        shutil.copy(p, c)
    config = book / "_config.yml"
    setup_cell.set_repository("", "", copies, config)  # as the book ships, whatever this one says
    shipped = config.read_text(encoding="utf-8")
    _git(book, "init", "-q", "-b", "trunk2")
    _git(book, "add", "-A")
    _git(book, "commit", "-q", "-m", "the book")
    _git(book, "tag", "v0.9")
    head = _git(book, "rev-parse", "HEAD")
    before = [json.loads(c.read_text(encoding="utf-8")) for c in copies]

    def set_(url, ref):
        return setup_cell.set_repository(url, ref, copies, config, git_dir=book)

    for ref, why in [("main", "not a tag name"), ("master", "not a tag name"), ("", "not a tag"),
                     ("trunk2", "is a branch of this clone"), ("v0.9", "exists already")]:
        with pytest.raises(ValueError, match=why):
            set_(REAL, ref)
    (book / "attnbook" / "__init__.py").write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not committed"):
        set_(REAL, "v1.0")
    _git(book, "checkout", "-q", "--", "attnbook")
    assert [json.loads(c.read_text(encoding="utf-8")) for c in copies] == before
    assert config.read_text(encoding="utf-8") == shipped

    changed = set_(REAL + ".git", "v1.0")
    assert len(changed) == 3, changed
    settings = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert settings["repository"]["url"] == REAL
    assert settings["repository"]["branch"] == "v1.0" and settings["repository"]["commit"] == head
    assert settings["launch_buttons"]["binderhub_url"] == "https://mybinder.org"
    assert settings["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    assert nbtools.repository(config) == (REAL, head) and setup_cell.launch_ref(config) == "v1.0"
    for copy, old in zip(copies, before):
        new = json.loads(copy.read_text(encoding="utf-8"))
        first = next(i for i, c in enumerate(new["cells"]) if c["cell_type"] == "code")
        assert nbtools._source(new["cells"][first]) == nbtools.bootstrap_source(REAL, head)
        new["cells"][first]["source"] = old["cells"][first]["source"]
        assert new == old, f"{copy.name}: more than the set-up cell's source changed"
    assert set_(REAL, "v1.0") == [], "a second run changes nothing"

    set_("", "")  # unset
    settings = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert settings["repository"]["url"] == "" and not settings["launch_buttons"]["colab_url"]
    assert [json.loads(c.read_text(encoding="utf-8")) for c in copies] == before
    assert config.read_text(encoding="utf-8") == shipped


# --- every built page ---

LAUNCH = re.compile(r'href="(https://mybinder\.org/[^"]*|https://colab\.research\.google\.com/'
                    r'[^"]*|[^"]*/hub/user-redirect/git-pull\?[^"]*)"')


def launch_problems(pages: dict[str, str], url, tag) -> list[str]:
    """Launch links that point at no repository, at a placeholder, or at another ref than the
    publication's tag."""
    problems = []
    for name, text in pages.items():
        if "YOUR-GITHUB-ACCOUNT" in text:
            problems.append(f"{name}: names the placeholder YOUR-GITHUB-ACCOUNT")
        for link in LAUNCH.findall(text):
            link = link.replace("&amp;", "&")
            if url is None:
                problems.append(f"{name}: a launch link, but the book names no repository: "
                                f"{link}")
                continue
            owner_name = "/".join(url.split("/")[-2:])
            if owner_name not in link.replace("%2F", "/") or not re.search(
                    rf"[/=]{re.escape(tag)}([/?&]|$)", link):
                problems.append(f"{name}: a launch link not to {owner_name} at {tag}: {link}")
    return problems


def test_no_launch_link_points_at_a_placeholder_or_a_branch(built_site):
    if built_site["returncode"] != 0:
        pytest.fail("the book did not build (see test_site.py)")
    html = built_site["html"]
    pages = {p.relative_to(html).as_posix(): p.read_text(encoding="utf-8")
             for p in html.rglob("*.html") if "_static" not in p.parts}
    assert len(pages) > 20
    url, tag = nbtools.repository()[0], setup_cell.launch_ref()
    problems = launch_problems(pages, url, tag)
    assert not problems, "\n".join(problems[:20])
    if url is not None:
        chapters = [t for n, t in pages.items() if n.startswith("chapters/")]
        assert all(LAUNCH.search(t) for t in chapters), "a chapter without its launch buttons"


def test_the_page_check_catches_a_placeholder_and_a_branch():
    binder = '<a href="https://mybinder.org/v2/gh/{}/attention-book/{}?urlpath=x">'
    colab = ('<a href="https://colab.research.google.com/github/{}/attention-book/blob/{}/'
             'chapters/01.ipynb">')
    owner = REAL.split("/")[-2]
    ok = {"a.html": binder.format(owner, "v1.0") + colab.format(owner, "v1.0")}
    assert launch_problems(ok, REAL, "v1.0") == []
    assert len(launch_problems(ok, None, None)) == 2, "links while no repository is set"
    branch = {"b.html": binder.format(owner, "main")}
    assert "not to attnbook-authors/attention-book at" in launch_problems(branch, REAL, "v1.0")[0]
    placeholder = {"c.html": colab.format("YOUR-GITHUB-ACCOUNT", "main")}
    assert len(launch_problems(placeholder, REAL, "v1.0")) == 2
    hub = {"d.html": '<a href="https://hub.example/hub/user-redirect/git-pull?repo=https%3A'
                     '%2F%2Fgithub.com%2Fattnbook-authors%2Fattention-book&amp;branch=main">'}
    assert len(launch_problems(hub, REAL, "v1.0")) == 1
