"""README's generated blocks (the zoo table, the variant count, the dead-unit rules, the parameter/FLOP counts) match
the tables they are generated from."""

from ffn_zoo.analysis.report import GENERATED
from ffn_zoo.nn.activations import ACTIVATIONS
from ffn_zoo.nn.ffn import FFN_VARIANTS
from scripts.readme_tables import BLOCKS, render_readme
from tests.helpers import REPO


def test_readme_tables_are_current() -> None:
    text = (REPO / "README.md").read_text()
    assert {m["name"] for m in GENERATED.finditer(text)} == set(BLOCKS)
    assert render_readme(text) == text, "README.md is stale: run python scripts/readme_tables.py"


def first_cells(block: str) -> list[str]:
    """The first column of a generated table, header and rule skipped, backticks dropped."""
    text = render_readme(f"<!-- gen:{block} --><!-- /gen:{block} -->")
    return [line.split("|")[1].strip().strip("`") for line in text.splitlines()[3:-1]]


def test_zoo_table_has_a_row_per_variant() -> None:
    assert first_cells("zoo-table") == list(FFN_VARIANTS)


def test_dead_table_has_a_row_per_activation() -> None:
    assert first_cells("dead-table") == list(ACTIVATIONS)


def test_flop_table_has_a_row_per_variant() -> None:
    assert first_cells("flop-table") == list(FFN_VARIANTS)
