"""The GLU write-up's generated blocks (experiments/glu_variants/README.md and width/README.md) match the committed
reports they are generated from, each section table reads only the committed files its spec names, the headline is
the write-up's first screen, and every relative link in the experiments' READMEs resolves."""

import re
from pathlib import Path

import pytest

from ffn_zoo.analysis.report import GENERATED
from scripts import glu_section_tables as sections
from scripts import glu_tables, table_specs, width_tables
from scripts.glu_tables import BLOCKS, README, documents, main, nats, render
from tests.helpers import REPO


@pytest.mark.parametrize("path", list(documents()), ids=lambda p: p.parent.name)  # every generated document
def test_glu_readmes_are_current(path: Path) -> None:
    text = path.read_text()
    assert {m["name"] for m in GENERATED.finditer(text)} == set(documents()[path])
    assert render(text, path) == text, f"{path.relative_to(REPO)} is stale: run python scripts/glu_tables.py"


TABLES = {name: t for name, t in {**sections.SECTION_BLOCKS, **width_tables.WIDTH_BLOCKS}.items()
          if isinstance(t, table_specs.Table)}


def test_every_section_table_is_a_spec() -> None:
    assert set(TABLES) == set(sections.SECTION_BLOCKS) | set(width_tables.WIDTH_BLOCKS)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_table_reads_only_its_committed_sources(name: str) -> None:
    """Its sources exist and are the compare outputs (CSV/JSON), except the own-lr arm, whose only record is
    own_lr/vs_default.md; building it reads nothing else."""
    table = TABLES[name]
    for source in table.sources:
        assert (table_specs.GLU / source).is_file(), source
        assert source.endswith((".csv", ".json", ".jsonl")) or source == sections.VS_DEFAULT, source
    table_specs.READS.clear()
    table()
    assert table_specs.READS <= set(table.sources), table_specs.READS - set(table.sources)


def test_check_mode_names_a_stale_document_and_writes_nothing(tmp_path, monkeypatch, capsys) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("a <!-- gen:x -->old<!-- /gen:x --> b")
    monkeypatch.setattr(glu_tables, "documents", lambda: {doc: {"x": lambda: "new"}})
    assert main(["--check"]) == 1 and "stale" in capsys.readouterr().out
    assert "old" in doc.read_text()
    assert main([]) == 0 and doc.read_text() == "a <!-- gen:x -->new<!-- /gen:x --> b"
    assert main(["--check"]) == 0


def test_the_plan_counts_ladder_steps_as_the_ladder_does() -> None:
    """The width README's plan: 1,216 steps for 0.25-4 Mi, 602 for 0.25-2 Mi, 141 for 0.25-0.5 Mi, 269 for 0.25, 1."""
    steps = width_tables.ladder_steps
    assert (steps((0.25, 0.5, 1, 2, 4)), steps((0.25, 0.5, 1, 2)), steps((0.25, 0.5)), steps((0.25, 1))) == (
        1216, 602, 141, 269)
    assert steps((0.25,)) == 64


def test_hand_copied_numbers_that_disagreed_with_their_source() -> None:
    """Numbers the tables had typed differently from the committed reports, now read from them."""
    assert "| +0.024 [+0.009, +0.040] * |" in sections.RELU_GEGLU()  # GEGLU − ReLU, 1 Mi, Wikipedia (was +0.025)
    assert "| +0.048 [−0.001, +0.098] |" in sections.RELU_GEGLU()  # ReLU − GELU, 0.25 Mi, C4 (was +0.049)
    assert "7.071 / 6.302" in sections.RECIPE_TABLE()  # GELU at 1 Mi, fan-in + Adafactor (was 6.303)
    assert "**+0.116 [+0.023, +0.210]**" in width_tables.WIDTH_BLOCKS["width-mech-d768"]()  # C4 change (was +0.117)
    assert "line: 1.59 M" in width_tables.AXIS_1MI()  # d 512's line crossing (was 1.57 M)
    assert "| 30 min | 2.0 h |" in width_tables.PLAN()  # d 512 per ladder (was 31 min)


def test_three_significant_figures_keep_their_zeros() -> None:
    assert [table_specs.sig3(x) for x in (33.04, 103.8, 1.8525, 11.8, 561.6)] == ["33.0", "104", "1.85", "11.8", "562"]


def test_the_headline_is_the_first_table() -> None:
    text = README.read_text()
    assert text.index("<!-- gen:glu-headline -->") < text.index("\n|") + 1 < text.index("\n## ")


def test_the_three_audited_numbers() -> None:
    """Issue 39's mismatches, now read from the reports: d 512 seed 0 at 2 Mi, d 256 at 1 Mi, the slope's bound."""
    assert BLOCKS["n-d512-2Mi-seeds"]().startswith("+0.028")
    assert BLOCKS["n-clm-1Mi"]().startswith("+0.015")
    assert BLOCKS["n-clm-slope"]().endswith("−0.088]")


def test_one_rounding_rule() -> None:
    assert nats(0.01548) == "+0.015" and nats(-0.08846) == "−0.088" and nats(0.0277682) == "+0.028"


def test_experiment_links_resolve() -> None:
    """Relative links in experiments/**/README.md point at files that exist (folders moved since are caught)."""
    broken = []
    for md in (REPO / "experiments").rglob("README.md"):
        for target in re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", md.read_text()):
            if not (md.parent / target).exists():
                broken.append(f"{md.relative_to(REPO)}: {target}")
    assert not broken, broken
