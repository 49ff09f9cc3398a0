"""The text of the chapters: claims that were once wrong, and conventions.

Each test here guards a fix of issue 10 (sections 3 and 4): a sentence that
was not true as written, a name an exercise used to rebind, the one form of
the boxes about the sources' mistakes. nbval checks the outputs; the asserts
in the chapters check the numbers; this file checks what only the text shows.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# every page: a chapter's later pages are 09b_..., 10c_...
CHAPTERS = sorted((ROOT / "chapters").glob("[01][0-9]*_*.ipynb"))
PART_1_TO_4 = [p for p in CHAPTERS if p.name[:2] <= "10"]


def cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(c["cell_type"], "".join(c["source"]), c["metadata"])
            for c in nb["cells"]]


def markdown(path):
    return "\n".join(s for t, s, _ in cells(path) if t == "markdown")


def chapter(prefix):
    """A page by its prefix: "10" is 10_pytorch, "10c" the chapter's third page."""
    pages = (ROOT / "chapters").glob("*.ipynb")
    (path,) = [p for p in pages if p.name.startswith(prefix + "_")]
    return path


def test_chapters_found():
    assert len({p.name[:2] for p in PART_1_TO_4}) == 10


# Sentences that were found untrue (issue 10, section 3), and the old
# spellings that the book replaced (section 4). None may come back.
RETIRED = {
    "02": ["always lies between the smallest and the largest\nvalue"],
    "03": ["not symmetric the bug shows at once"],
    "04": ["Position 4, the 12", "position 4 takes",
           "has almost no gradient, so a model that starts sharp learns slowly",
           "so no gradient flows back to the queries and keys"],
    "06": ["The sources use all three:", "rejects as inverted"],
    "07": ["$N_q$ queries against $N_v$ keys"],
    "08": ["not bigger or slower"],
    "09": ["an error when B differs from NH and",
           "loop can then be as fast, or faster"],
    "10": ["they always are", "$H = NH \\cdot HS$",
           "**A mistake in source", "**A second mistake"],
    # issue 21: BLAS threads set after NumPy's import; "no gradient" said as grad mode only
    "09b": ["limits BLAS to one thread (it must run before NumPy"],
    "10c": ["gradients are off (`torch.no_grad()` or `torch.inference_mode()`), it has"],
}


@pytest.mark.parametrize("prefix", sorted(RETIRED))
def test_retired_sentences_stay_retired(prefix):
    text = markdown(chapter(prefix))
    for sentence in RETIRED[prefix]:
        assert sentence not in text, f"{prefix}: {sentence!r} is back"


BOX = re.compile(r"^:::\{admonition\} In the source: (.+)$", re.M)


@pytest.mark.parametrize("path", PART_1_TO_4, ids=lambda p: p.name)
def test_source_mistakes_are_in_one_kind_of_box(path):
    text = markdown(path)
    assert "A mistake in the source" not in text, "use 'In the source: ...'"
    assert "```{admonition} In the source" not in text, "use the ::: fence"
    for match in BOX.finditer(text):
        after = text[match.end():].lstrip("\n").splitlines()[0]
        assert after == ":class: dropdown", f"{match.group(1)}: not collapsed"


def test_boxes_where_the_sources_go_wrong():
    # chapter prefix -> how many "In the source" boxes it has at least
    expected = {"01": 3, "02": 1, "03": 2, "05": 1, "06": 1, "09": 1,
                "10": 2}
    for prefix, n in expected.items():
        found = len(BOX.findall(markdown(chapter(prefix))))
        assert found >= n, f"chapter {prefix}: {found} boxes, want {n}"


def test_003s_lost_parameter_name_is_said_where_mirrored():
    assert "`key`" in markdown(chapter("06"))
    assert "SyntaxError" in markdown(chapter("06"))
    assert "lost the name of its `key`" in markdown(chapter("10"))
    sources = (ROOT / "sources.md").read_text(encoding="utf-8")
    assert "SyntaxError" in sources and "was lost" in sources
    # the Sources page points at the box that shows the 'adds' comment
    assert "In the source: the function of `003`, as printed" in sources
    assert "*adds*" in markdown(chapter("06"))


def top_level_names(source):
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell magic
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= {n.id for n in ast.walk(target)
                          if isinstance(n, ast.Name)}
    return names - {"_"}


@pytest.mark.parametrize("path", PART_1_TO_4, ids=lambda p: p.name)
def test_exercises_do_not_rebind_the_chapters_names(path):
    defined, clashes, in_exercises = set(), set(), False
    for kind, source, meta in cells(path):
        if kind == "markdown" and source.startswith("## Exercises"):
            in_exercises = True
        if kind != "code" or "bootstrap" in meta.get("tags", []):
            continue
        names = top_level_names(source)
        if in_exercises:
            clashes |= names & defined
        else:
            defined |= names
    assert not clashes, f"exercises rebind {sorted(clashes)}"


# Exercises whose checker takes an attention output: each says the contract.
CONTRACT = "a tuple `(output, weights)`"


@pytest.mark.parametrize("prefix", ["01", "02", "05", "07", "08", "09b", "10c"])
def test_exercises_state_the_return_contract(prefix):
    text = re.sub(r"\s+", " ", markdown(chapter(prefix)))
    exercises = text[text.index("## Exercises"):]
    assert re.search(r"[Rr]eturn the output[^.]*, or " + re.escape(CONTRACT),
                     exercises)
    assert CONTRACT in exercises


def test_timing_prose_comes_from_the_measurement():
    path = ROOT / "chapters" / "09b_bug_einsum_timing.ipynb"
    all_cells = cells(path)
    (timing,) = [(s, m) for t, s, m in all_cells
                 if t == "code" and "best_time(" in s and "sizes" in s]
    source, meta = timing
    # BLAS is limited at run time, and the count in use is printed and asserted
    assert "with timing.one_blas_thread() as in_use:" in source
    assert "assert set(in_use.values()) == {1}" in source
    assert "nbval-ignore-output" in meta.get("tags", [])
    assert "In this run" in source, "the verdict is printed from the data"
    section = markdown(path).split("## 3.")[1].split("## Summary")[0]
    assert not re.search(r"\d+(\.\d+)? ?ms\b", section), "a time in prose"


@pytest.mark.parametrize("path", sorted((ROOT / "chapters").glob("*.ipynb")),
                         ids=lambda p: p.name)
def test_no_chapter_sets_blas_threads_too_late(path):
    # the set-up cell imports attnbook, hence NumPy: a thread count set in an
    # environment variable afterwards is ignored (threadpoolctl saw 2 threads)
    code = "\n".join(s for t, s, _ in cells(path) if t == "code")
    found = re.search(r"environ\W[^\n]*(OPENBLAS|OMP|MKL)_NUM_THREADS", code)
    assert not found, f"{path.name}: {found and found.group(0)} after NumPy's import"


def test_multihead_attention_fast_path_is_shown_and_asserted():
    code = "\n".join(s for t, s, _ in cells(chapter("10c")) if t == "code")
    assert 'paths["eval", False] == ("nan", "nan")' in code
    assert "key_padding_mask=every_key" in code
    assert "inference_mode" in code
    # "no gradient" is grad mode off OR nothing requiring grad (issue 21)
    assert "requires_grad_(False)" in code
    assert 'status(y_frozen) == "nan" and status(y_x_rg) == "zeros"' in code
    guide = (ROOT / "instructor_guide.md").read_text(encoding="utf-8")
    assert "fast path" in guide and "key_padding_mask" in guide
    assert "frozen module" in guide
    glossary = (ROOT / "glossary.md").read_text(encoding="utf-8")
    (row,) = [r for r in glossary.splitlines() if r.startswith("| fast path")]
    assert "need_weights=False" in row and "nothing requiring a gradient" in row


def test_masked_fill_and_an_additive_mask_differ_in_the_text():
    # taught in the text and computed, not only in a checker's hint (issue 21)
    text = markdown(chapter("10c"))
    assert "## 3. The backward pass: `masked_fill` or an additive mask" in text
    code = "\n".join(s for t, s, _ in cells(chapter("10c")) if t == "code")
    assert 'assert (grads["masked_fill"][1] == 0).all()' in code
    assert 'assert grads["additive"][2].isnan().any()' in code


def test_a_3d_attn_mask_is_batch_times_heads():
    text = markdown(chapter("10b"))
    assert "$(B \\cdot NH, N_q, N_k)$" in text
    code = "\n".join(s for t, s, _ in cells(chapter("10b")) if t == "code")
    assert "repeat_interleave(NH3, dim=0)" in code
    assert "assert not agree(y_in_turn, expected3, TOL32)" in code


def test_notation_page_states_the_conventions():
    notation = (ROOT / "notation.md").read_text(encoding="utf-8")
    for needle in ["raw scores", "counted from 0", "no separate $N_v$",
                   "$D_\\text{hid}$", "`002`", "t0, t1, t2"]:
        assert needle in notation, needle


def test_01_names_its_tokens_t0_to_t2_everywhere():
    # the source's A, B, C were renamed t0, t1, t2 (issue 21): code, outputs
    # and alt texts too
    text = chapter("01").read_text(encoding="utf-8")
    for old in ("output[A]", "V[C]", "tokens A, B, C", "key C", "query A"):
        assert old not in text, f"01: {old!r} is back"


def test_figures_count_positions_from_0():
    # the default tick labels of a bar chart, static and live (chapter 04)
    from attnbook import live, plots
    ax = plots.weight_bars([0.2, 0.3, 0.5])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"]
    if hasattr(live, "TemperatureBars"):
        assert live.TemperatureBars([1.0, 2.0, 3.0]).labels == ["0", "1", "2"]
    assert "positions 1 to 8" not in json.dumps(
        json.loads(chapter("04").read_text(encoding="utf-8"))["cells"])
