"""figures/ holds exactly what `make figures` generates, byte for byte, in both languages:
the English diagrams in figures/, the Chinese ones in figures/zh/ (drawn in the served font)."""

import re
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def diagrams():
    """attnbook.diagrams imports matplotlib.pyplot: imported here, not at collection (every xdist
    worker collects every module)."""
    from attnbook import diagrams
    return diagrams


def test_figures_are_reproducible(tmp_path, diagrams):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        diagrams.main([str(tmp_path)])
    glyphs = [str(w.message) for w in caught if "Glyph" in str(w.message)]
    assert not glyphs, f"a diagram writes a character no font has: {glyphs[:3]}"
    for lang in diagrams.LANGS:
        where = "" if lang == "en" else f"{lang}/"
        for name in diagrams.DIAGRAMS:
            committed = ROOT / "figures" / where / name
            assert committed.exists(), f"figures/{where}{name} is missing: run `make figures`"
            assert (tmp_path / where / name).read_bytes() == committed.read_bytes(), (
                f"figures/{where}{name} differs from what attnbook.diagrams draws: run `make figures` and commit"
            )


def test_chinese_diagrams_need_no_font_and_differ_from_the_english(diagrams):
    """Text drawn as outlines (no <text>, no font-family): the SVG looks the same on a machine
    with no Chinese font. And every diagram's Chinese version has its own words."""
    for name in diagrams.DIAGRAMS:
        svg = (ROOT / "figures" / "zh" / name).read_text(encoding="utf-8")
        assert "<text" not in svg and "font-family" not in svg, name
        assert svg != (ROOT / "figures" / name).read_text(encoding="utf-8"), name
    for key, (en, zh) in diagrams.WORDS.items():
        assert re.findall(r"\{\w+\}", en) == re.findall(r"\{\w+\}", zh), key
        assert not re.search(r"[A-Za-z]{4,}", zh.replace("softmax", "")), f"English left in {key}: {zh}"


def test_every_character_of_the_chinese_diagrams_is_in_the_served_font(diagrams):
    """The Chinese diagrams are drawn from the site's font slices (_static/fonts); `make font`
    collects the diagrams' words (attnbook/i18n/font.py), so each character is there."""
    from attnbook.i18n import font

    chars = diagrams.chinese_characters()
    assert len(chars) > 50, "the Chinese diagrams lost their words"
    missing = chars - font.served_characters()
    assert not missing, (f"the Chinese diagrams use {''.join(sorted(missing))}, which the served font lacks: "
                         "`make font` (after `make book`), then `make figures`")


def test_chinese_pages_show_the_chinese_diagrams(diagrams):
    """The Chinese edition's image links point at figures/zh/ (attnbook/i18n/generate.py),
    the English edition's at figures/."""
    for name in diagrams.DIAGRAMS:
        en = [p for p in ROOT.glob("chapters/*.ipynb") if f"figures/{name}" in p.read_text(encoding="utf-8")]
        assert en, f"figures/{name} is not used by any English page"
        for page in en:
            zh = (ROOT / "zh" / "chapters" / page.name).read_text(encoding="utf-8")
            assert f"](../figures/zh/{name})" in zh and f"](../figures/{name})" not in zh, (page.name, name)


def test_every_figure_is_used_by_a_page(diagrams):
    pages = [p.read_text(encoding="utf-8") for p in ROOT.glob("chapters/*.ipynb")] + \
            [p.read_text(encoding="utf-8") for p in ROOT.glob("*.md")]
    for name in diagrams.DIAGRAMS:
        assert any(f"figures/{name}" in text for text in pages), f"figures/{name} is not used by any page"


def test_the_diagrams_font_does_not_change_when_the_slices_are_cut_anew(diagrams):
    """The SVGs name each glyph by its index in the font they are drawn with: that font holds
    the diagrams' Chinese characters only, in code point order, so a `make font` that adds the
    pages' new characters (and reorders the slices) leaves figures/zh byte for byte the same."""
    from fontTools.ttLib import TTFont

    font = TTFont(str(diagrams.served_font()))
    chars = sorted(diagrams.chinese_characters())
    assert font.getGlyphOrder() == [".notdef"] + [f"uni{ord(c):04X}" for c in chars]
    assert sorted(chr(c) for c in font.getBestCmap()) == chars
