"""The GLU write-up's generated blocks (experiments/glu_variants/README.md) match the committed reports they are
generated from, the headline is its first screen, and every relative link in the experiments' READMEs resolves."""

import re

from ffn_zoo.analysis.report import GENERATED
from scripts.glu_tables import BLOCKS, README, nats, render
from tests.helpers import REPO


def test_glu_readme_is_current() -> None:
    text = README.read_text()
    assert {m["name"] for m in GENERATED.finditer(text)} == set(BLOCKS)
    assert render(text) == text, "experiments/glu_variants/README.md is stale: run python scripts/glu_tables.py"


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
