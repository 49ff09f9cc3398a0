"""figures/ holds exactly what `make figures` generates, byte for byte."""

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
    diagrams.main([str(tmp_path)])
    for name in diagrams.DIAGRAMS:
        committed = ROOT / "figures" / name
        assert committed.exists(), f"figures/{name} is missing: run `make figures`"
        assert (tmp_path / name).read_bytes() == committed.read_bytes(), (
            f"figures/{name} differs from what attnbook.diagrams draws: run `make figures` and commit"
        )


def test_every_figure_is_used_by_a_page(diagrams):
    pages = [p.read_text(encoding="utf-8") for p in ROOT.glob("chapters/*.ipynb")] + \
            [p.read_text(encoding="utf-8") for p in ROOT.glob("*.md")]
    for name in diagrams.DIAGRAMS:
        assert any(f"figures/{name}" in text for text in pages), f"figures/{name} is not used by any page"
