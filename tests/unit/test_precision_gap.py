"""scripts/precision_gap.py (issue 42): bf16 ladders paired seed by seed with fp32 ones, from run folders or from a
committed ladder report; on synthetic ladders with known offsets it returns each variant's cost and the interaction."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

from ffn_zoo.analysis.compare import compare
from tests.helpers import REPO, ladder_baseline_loss, ladder_sweep


def load_script():
    spec = importlib.util.spec_from_file_location("precision_gap", REPO / "scripts" / "precision_gap.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("fp32_as", ["folders", "report"])
def test_costs_and_interaction_are_the_known_offsets(tmp_path: Path, fp32_as: str) -> None:
    gap = lambda seed, x: 0.05 - 0.01 * x + 0.003 * seed  # noqa: E731  swiglu − gelu in fp32
    fp32 = ladder_sweep(tmp_path / "fp32", gap, variant="swiglu")
    # bf16: gelu 0.01 worse, swiglu 0.03 worse, the same for every seed: cost 0.01 / 0.03, interaction +0.02
    bf16 = ladder_sweep(tmp_path / "bf16", lambda seed, x: gap(seed, x) + 0.02, variant="swiglu",
                        base=lambda seed, tokens: ladder_baseline_loss(seed, tokens) + 0.01)
    if fp32_as == "report":
        compare([fp32], out=tmp_path / "report", layout=False)
        fp32 = tmp_path / "report"
    load_script().main([str(bf16), "--fp32", str(fp32), "--out", str(tmp_path / "out")])
    rows = list(csv.DictReader((tmp_path / "out" / "precision_gap.csv").open()))
    assert len(rows) == 3 and {r["val"] for r in rows} == {"wikipedia"}  # one row per budget
    for r in rows:
        assert float(r["gelu_mean"]) == pytest.approx(0.01, abs=1e-9)
        assert float(r["swiglu_mean"]) == pytest.approx(0.03, abs=1e-9)
        assert float(r["interaction_mean"]) == pytest.approx(0.02, abs=1e-9)
        assert float(r["gap_bf16"]) - float(r["gap_fp32"]) == pytest.approx(0.02, abs=1e-9)
        assert r["seeds"] == "0 1 2"
    assert "interaction" in (tmp_path / "out" / "precision_gap.md").read_text()
