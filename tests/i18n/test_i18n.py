"""The Chinese edition: one source, translations complete and current, generated files untouched.

- every unit of every English page has a current Chinese translation that keeps its code,
  math, links, labels and numbers and uses the glossary's names (names every page and cell
  that does not);
- zh/ is exactly what `python -m attnbook.i18n build` writes, and its notebooks have the
  English notebooks' code cells and outputs, cell for cell;
- the machinery itself: a changed English cell makes its translation stale (and `make
  translations` keeps the old Chinese, marked fuzzy); each rule rejects what it is for.
"""

import json
import shutil
from pathlib import Path

import pytest

from attnbook.i18n import catalog, figures, generate, rules, sheet
from attnbook.i18n.check_terms import page_term_problems
from attnbook.i18n.units import Unit, all_pages, page_units, split_blocks, toc_pages

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = [p for p in toc_pages() if (ROOT / f"{p}.ipynb").exists()]


def test_every_page_has_a_current_translation():
    found = catalog.problems()
    assert not found, (f"{len(found)} missing, stale or malformed translation(s) "
                       "(README, 'Translating'):\n" + "\n".join(map(str, found[:60])))


def test_every_page_uses_the_glossary_names():
    found = [f"{page}: {m}" for page in all_pages() for m in page_term_problems(page)]
    assert not found, (f"{len(found)} glossary term(s) not used as the glossary names them:\n"
                       + "\n".join(found[:60]))


def test_zh_is_generated_not_edited():
    expected = generate.expected_files()
    differ = [rel for rel, text in expected.items()
              if not (ROOT / rel).exists() or (ROOT / rel).read_text(encoding="utf-8") != text]
    extra = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "zh").rglob("*")
                   if p.is_file() and "_build" not in p.parts
                   and not any(p.relative_to(ROOT / "zh").parts[0] == d for d in generate.LINKS)
                   and p.relative_to(ROOT).as_posix() not in expected)
    assert not differ and not extra, (
        "zh/ is not what `make translations` writes (never edit zh/ by hand):\n"
        f"differ: {differ[:20]}\nnot generated: {extra[:20]}")
    for name in generate.LINKS:
        link = ROOT / "zh" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve(), link


@pytest.mark.parametrize("page", NOTEBOOKS)
def test_chinese_notebook_has_the_english_code_and_outputs(page):
    en = json.loads((ROOT / f"{page}.ipynb").read_text(encoding="utf-8"))
    zh = json.loads((ROOT / "zh" / f"{page}.ipynb").read_text(encoding="utf-8"))
    assert [c.get("id") for c in zh["cells"]] == [c.get("id") for c in en["cells"]]
    for e, z in zip(en["cells"], zh["cells"]):
        assert z["cell_type"] == e["cell_type"]
        if e["cell_type"] != "code":
            continue
        assert z["source"] == e["source"], f"{page}, cell {e['id']}: code differs"
        assert figures.without_figure_svg(z.get("outputs", [])) == \
            figures.without_figure_svg(e.get("outputs", [])), \
            f"{page}, cell {e['id']}: outputs differ (beyond the figures drawn in Chinese)"
        meta_e, meta_z = json.loads(json.dumps(e["metadata"])), json.loads(json.dumps(z["metadata"]))
        for m in (meta_e, meta_z):
            for kind in ("image", "figure"):
                for field in ("alt", "caption"):
                    m.get("mystnb", {}).get(kind, {}).pop(field, None)
        assert meta_z == meta_e, f"{page}, cell {e['id']}: metadata differ beyond alt text"
    assert zh["metadata"]["attnbook"]["language"] == "zh"


# --- the machinery, on a copy of the book ---------------------------------------------

@pytest.fixture
def book(tmp_path):
    """A copy of the book's sources and translations (no notebooks but two)."""
    for name in ("_toc.yml", "_config.yml", "glossary.md", "intro.md", "notation.md", "sources.md",
                 "instructor_guide.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "locale", tmp_path / "locale")
    (tmp_path / "chapters").mkdir()
    for page in NOTEBOOKS:
        shutil.copy(ROOT / f"{page}.ipynb", tmp_path / f"{page}.ipynb")
    return tmp_path


def _edit_first_markdown(book, page, new_text):
    path = book / f"{page}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = new_text
    path.write_text(json.dumps(nb), encoding="utf-8")
    return cell["id"]


def test_a_changed_english_cell_makes_its_translation_stale(book):
    page = "chapters/03_softmax"
    before = catalog.translations(page, book)
    cid = _edit_first_markdown(book, page, "# Softmax\n\nA new first paragraph.")
    found = [p for p in catalog.problems([page], book, form=False)]
    assert [(p.page, p.ctx) for p in found] == [(page, cid)], found
    assert "stale" in found[0].what
    counts = catalog.update_page(page, book)
    assert counts["stale"] == 1 and counts["new"] == 0
    entry = next(e for e in catalog.load(page, book) if e.msgctxt == cid)
    assert "fuzzy" in entry.flags and entry.previous_msgid and entry.msgstr == before.get(cid, "")
    found = catalog.problems([page], book, form=False)
    assert [p.ctx for p in found] == [cid] and "fuzzy" in found[0].what


def test_a_new_english_cell_is_missing_until_translated(book):
    page = "chapters/03_softmax"
    path = book / f"{page}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["cells"].insert(2, {"cell_type": "markdown", "id": "newcell1", "metadata": {},
                           "source": "A new paragraph about `softmax`."})
    path.write_text(json.dumps(nb), encoding="utf-8")
    assert [(p.ctx, p.what[:7]) for p in catalog.problems([page], book, form=False)] == \
        [("newcell1", "missing")]
    catalog.update_page(page, book)
    assert [(p.ctx, p.what) for p in catalog.problems([page], book, form=False)] == \
        [("newcell1", "not translated")]
    sheet_file = book / "s.txt"
    text = sheet.write_sheet(page, book, only_todo=True)
    assert "newcell1" in text and text.count("@@@@ end") == 1
    sheet_file.write_text(text.replace("@@@@ newcell1 zh\n", "@@@@ newcell1 zh\n关于`softmax`的新段落。"),
                          encoding="utf-8")
    sheet.fill(sheet_file, book)
    assert catalog.problems([page], book) == []


def test_markdown_blocks_round_trip_and_rows_are_units():
    for name in ("glossary.md", "instructor_guide.md", "sources.md", "notation.md", "intro.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert generate.translate_markdown(name[:-3], text, {}) == text, name
    rows = [u for u in page_units("glossary") if u.kind == "row"]
    assert len(rows) > 100 and all(u.text.startswith("|") for u in rows)
    assert split_blocks("a\n\n```{note}\nx\n\ny\n```\n\nb") == ["a", "```{note}\nx\n\ny\n```", "b"]


# --- the rules: each rejects what it is for ----------------------------------------------

EN = ("The score of `q` and `k` is $q \\cdot k$, 410 here; see [the chapter](03_softmax.ipynb) "
      "and {ref}`the exercise <ex-scale>`.")
GOOD = "`q`和`k`的分数为$q \\cdot k$，此处为410；见[该章](03_softmax.ipynb)和{ref}`练习 <ex-scale>`。"


def _unit(text, kind="markdown"):
    return Unit("chapters/x", "c1", text, kind)


def test_a_faithful_translation_passes():
    assert rules.form_problems(_unit(EN), GOOD) == []


@pytest.mark.parametrize("bad, rule", [
    (GOOD.replace("`q`和", "`Q`和"), "inline code"),
    (GOOD.replace("$q \\cdot k$", "$q k$"), "math"),
    (GOOD.replace("410", "400"), "numbers"),
    (GOOD.replace("(03_softmax.ipynb)", "(04_scaling.ipynb)"), "link target"),
    (GOOD.replace("<ex-scale>", "<ex-scaling>"), "role target"),
    (GOOD.replace("，此处", ", 此处"), "ASCII punctuation"),
    (GOOD.replace("的分数", " 的分数"), "a space between"),
    (EN, "not translated"),
    ("**" + GOOD.replace("。", "。**") + "x", "CommonMark will not render"),
])
def test_each_rule_rejects_its_mistake(bad, rule):
    found = rules.form_problems(_unit(EN), bad)
    assert any(rule in f for f in found), found


def test_headings_labels_and_directive_options_must_match():
    en = "(sec-x)=\n## 2. Scores\n\n```{exercise} Scale\n:label: ex-a\nDo it.\n```"
    good = "(sec-x)=\n## 2. 分数\n\n```{exercise} 缩放\n:label: ex-a\n动手做。\n```"
    assert rules.form_problems(_unit(en), good) == []
    assert any("heading" in f for f in rules.form_problems(_unit(en), good.replace("## 2.", "### 2.")))
    assert any("label" in f for f in rules.form_problems(_unit(en), good.replace("(sec-x)=", "")))
    assert any("directive option" in f
               for f in rules.form_problems(_unit(en), good.replace(":label: ex-a", ":label: ex-b")))


def test_glossary_rule_wants_the_name_and_the_english_at_first_use():
    units = [Unit("p", "a", "The causal mask hides later keys.", "markdown"),
             Unit("p", "b", "A causal mask again.", "markdown")]
    good = {"a": "因果掩码（causal mask）隐藏后面的键（key）。", "b": "又是因果掩码。"}
    assert not [m for m in rules.term_problems("p", units, good, {}) if "causal" in m]
    no_bracket = {**good, "a": "因果掩码隐藏后面的键（key）。"}
    assert any("English in brackets" in m for m in rules.term_problems("p", units, no_bracket, {}))
    other_name = {**good, "b": "又是因果遮罩。"}
    assert any("b: uses 'causal mask'" in m for m in rules.term_problems("p", units, other_name, {}))
    exempt = rules.term_problems("p", units, other_name, {"b": "glossary: not causal mask"})
    assert not [m for m in exempt if m.startswith("b:") and "causal" in m]


def test_glossary_names_are_parsed_from_the_glossary():
    terms = {t.english[0]: t.chinese for t in rules.glossary_terms()}
    assert terms["causal mask"] == ("因果掩码",)
    assert "KV缓存" in terms["kv cache"] and "键值缓存" in terms["kv cache"]
    assert "reach" not in terms  # an everyday word (rules.ORDINARY_WORDS)


def test_chinese_launch_buttons_open_the_chinese_notebooks(tmp_path):
    """With a repository set (`make repository`), the Chinese book's launch buttons open the
    notebooks of zh/ (path_to_book), and its download button the Chinese notebook itself."""
    import yaml

    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    config = yaml.safe_load((tmp_path / "_config.yml").read_text())
    config["repository"] = {"url": "https://github.com/o/book", "branch": "v1", "commit": "c" * 40,
                            "path_to_book": ""}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    zh = yaml.safe_load(generate.translate_config(tmp_path, {"title": "动手算注意力"}))
    assert zh["repository"]["path_to_book"] == "zh" and zh["repository"]["url"] == config["repository"]["url"]
    assert zh["sphinx"]["config"]["language"] == "zh_CN" and zh["title"] == "动手算注意力"
    unset = yaml.safe_load(generate.translate_config(ROOT, {}))
    assert not unset["repository"]["url"] and not unset["repository"]["path_to_book"]


def test_fixed_chinese_terms():
    """Issue 31's terms stay fixed: no 逻辑值, 价值向量, 对数和指数, 前向计算 (nor the other
    words rules.BANNED_ZH names) in any Chinese unit, and one Chinese name per rules.ONE_NAME
    term on every page."""
    found = [f"{page}: {m}" for page in all_pages()
             for m in rules.banned_term_problems(page_units(page), catalog.translations(page))]
    assert not found, (f"{len(found)} Chinese term(s) the book has fixed otherwise:\n"
                       + "\n".join(found[:60]))


@pytest.mark.parametrize("bad", ["逻辑值", "价值向量", "对数和指数", "前向计算", "前向传递", "注意力池",
                                 "门控（gate）", "Xiao等（2023）", "原文`004`", "《All you need》",
                                 "动手试一试"])
def test_banned_term_rule_rejects(bad):
    units = [Unit("p", "a", "Some text.", "markdown")]
    assert rules.banned_term_problems(units, {"a": f"一句{bad}的话。"})
    assert not rules.banned_term_problems(units, {"a": "一句logit的话，Xiao等人（2023）。"})


def test_one_name_rule_rejects_another_name():
    units = [Unit("p", "a", "The forward pass stores $L$.", "markdown")]
    assert rules.banned_term_problems(units, {"a": "前向传播保存$L$。"}) == []
    assert any("前向传播" in m for m in rules.banned_term_problems(units, {"a": "正向过程保存$L$。"}))


# The loosened rules (issue 31): Chinese forms of the same number; a gloss once, where it helps.

@pytest.mark.parametrize("en, zh", [
    ("A window of 137k tokens.", "13.7万个词元的窗口。"),
    ("One million is 1M.", "一百万即100万。"),
    ("A 4k context.", "4096个词元的上下文。"),
    ("See chapter 04.", "见第4章。"),
    ("About 54 thousand.", "大约5.4万。"),
    ("A 22-billion-parameter model.", "一个220亿参数的模型。"),
    ("131,072 tokens.", "131072个词元。"),
])
def test_numbers_in_their_chinese_form_pass(en, zh):
    assert rules.missing_numbers(en, zh) == []


@pytest.mark.parametrize("en, zh, missing", [
    ("A window of 137k tokens.", "1.37万个词元的窗口。", ["137k"]),   # another value
    ("The weight is 0.50.", "权重为0.5。", ["0.50"]),                  # printed digits dropped
    ("A 4k context.", "4个词元的上下文。", ["4k"]),                    # the size word dropped
    ("Chapter 04 and 410.", "第4章和400。", ["410"]),
])
def test_numbers_of_another_value_fail(en, zh, missing):
    assert rules.missing_numbers(en, zh) == missing


@pytest.mark.parametrize("bad, rule", [
    ("位置信息（旋转位置编码（RoPE））。", "a gloss inside another bracket"),
    ("见[注意力（attention）](01_three_tokens.ipynb)。", "a gloss inside a link's text"),
    ("logit（logit）很大。", "a gloss identical to its term"),
])
def test_a_gloss_in_the_wrong_place_is_rejected(bad, rule):
    en = "Position (RoPE), see [attention](01_three_tokens.ipynb), logits."
    found = rules.form_problems(_unit(en if "ipynb" in bad else en.replace(
        ", see [attention](01_three_tokens.ipynb)", "")), bad)
    assert any(rule in f for f in found), found


def test_a_gloss_is_wanted_only_where_the_page_must_gloss():
    units = [Unit("p", "a", "The causal mask hides later keys.", "markdown")]
    bare = {"a": "因果掩码隐藏后面的键。"}
    assert rules.term_problems("p", units, bare, {}, glossed=set()) == []
    row = next(t.row for t in rules.glossary_terms() if "causal mask" in t.english)
    assert any("English in brackets" in m
               for m in rules.term_problems("p", units, bare, {}, glossed={row}))


def test_the_book_glosses_a_term_at_its_first_use_and_where_a_heading_names_it():
    from attnbook.i18n.check_terms import first_pages, must_gloss

    first = first_pages()
    row = next(t.row for t in rules.glossary_terms() if "causal mask" in t.english)
    assert first[row] != "chapters/13_rope"
    assert row in must_gloss(first[row])
    gqa = next(t.row for t in rules.glossary_terms() if "grouped-query attention" in t.english)
    assert gqa in must_gloss("chapters/15_grouped_query")          # its title names it
    assert row not in must_gloss("chapters/15_grouped_query")      # used there, introduced before
    attention = next(t.row for t in rules.glossary_terms() if t.english[0] == "attention")
    assert attention in must_gloss("chapters/01_three_tokens")
    for page in ("chapters/17_flash_attention", "chapters/18_attention_cost"):  # titles name it
        assert attention not in must_gloss(page)


def test_a_link_target_is_not_a_gloss():
    units = [Unit("p", "a", "Attention is a weighted average.", "markdown")]
    row = next(t.row for t in rules.glossary_terms() if t.english[0] == "attention")
    linked = {"a": "[注意力](17_flash_attention.ipynb)是一种加权平均。"}
    assert any("English in brackets" in m
               for m in rules.term_problems("p", units, linked, {}, glossed={row}))


def test_no_gloss_where_the_name_holds_the_english_or_the_word_is_everyday():
    from attnbook.i18n.check_terms import NEVER_GLOSSED, first_pages, must_gloss

    kv = next(t.row for t in rules.glossary_terms() if "kv cache" in t.english)
    units = [Unit("p", "a", "The KV cache grows.", "markdown")]
    assert rules.term_problems("p", units, {"a": "KV缓存变大。"}, {}, glossed={kv}) == []
    causal = next(t.row for t in rules.glossary_terms() if "causal mask" in t.english)
    units = [Unit("p", "a", "The causal mask hides.", "markdown")]
    assert rules.term_problems("p", units, {"a": "因果掩码隐藏。"}, {}, glossed={causal})
    assert set(NEVER_GLOSSED) <= set(first_pages())
    for row in NEVER_GLOSSED:
        assert row not in must_gloss(first_pages()[row])
