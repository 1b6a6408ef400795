"""README's generated blocks (the zoo table, the variant count) match the tables they are generated from."""

from ffn_zoo.analysis.report import GENERATED, render_readme
from ffn_zoo.nn.ffn import FFN_VARIANTS
from tests.helpers import REPO


def test_readme_tables_are_current() -> None:
    text = (REPO / "README.md").read_text()
    assert {m["name"] for m in GENERATED.finditer(text)} == {"zoo-table", "zoo-count"}
    assert render_readme(text) == text, "README.md is stale: run python scripts/readme_tables.py"


def test_zoo_table_has_a_row_per_variant() -> None:
    text = render_readme("<!-- gen:zoo-table --><!-- /gen:zoo-table -->")
    assert [line.split("`")[1] for line in text.splitlines()[3:-1]] == list(FFN_VARIANTS)
