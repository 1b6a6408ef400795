"""Ladders of several widths (or any numeric setting) set against it, on synthetic ladders with known answers: the
crossing per width with its interval, "no crossing within range" with the sign, Δ at the common budget, the
multiplier at each width's largest budget, crossing_vs_width.csv and its plot; and one clear line for each bad
input (no common budget, an axis that is not a number, one seed)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from ffn_zoo.analysis.compare import compare
from ffn_zoo.analysis.compare.cli import main
from ffn_zoo.errors import FFNZooError
from tests.helpers import CROSS, SLOPE, U, ladder_sweep, widths_sweep


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_the_crossing_against_width_is_the_known_one(tmp_path: Path) -> None:
    report = compare(widths_sweep(tmp_path, flat=1024), out=tmp_path / "cmp", layout=False)
    assert report["axis"] == "model.d_model"
    rows = {r["width"]: r for r in report["axis_rows"]}
    assert list(rows) == [128, 256, 512, 1024]  # sorted along the axis
    for d, x0 in CROSS.items():
        r = rows[d]
        assert r["crossing_tokens"] == pytest.approx(10**x0, rel=1e-9)
        assert r["crossing_lo"] < r["crossing_tokens"] < r["crossing_hi"] and r["seeds"] == 3
        assert r["params"] == 1000 * d
        assert r["common_budget"] == 10**7  # the largest budget every ladder has
        assert r["common_delta"] == pytest.approx(SLOPE * (7 - x0), abs=1e-12)  # paired, seed noise is mean 0
        assert r["common_lo"] < r["common_delta"] < r["common_hi"] and r["common_pairs"] == 3
        # at 10M the baseline (0.3 nats/decade) needs 10^(−Δ/0.3) × the tokens: beyond its ladder when Δ < 0
        assert r["largest_budget"] == 10**7 and r["multiplier"] is None and "beyond the ladder (> 1×" in \
            r["multiplier_note"]
    flat = rows[1024]
    assert flat["crossing_tokens"] is None and flat["sign"] == "+"
    assert flat["verdict"].startswith("no crossing within the fitted range (100k–10M tokens): Δ > 0 throughout")
    assert flat["multiplier"] == pytest.approx(10 ** (-0.05 / 0.3), rel=1e-9)  # within the ladder: read off it
    on_file = read_csv(tmp_path / "cmp" / "crossing_vs_width.csv")
    assert [int(r["width"]) for r in on_file] == [128, 256, 512, 1024]
    assert {"width", "params", "crossing_tokens", "crossing_lo", "crossing_hi", "seeds", "multiplier",
            "multiplier_lo", "multiplier_hi", "verdict"} <= set(on_file[0])
    assert float(on_file[1]["crossing_tokens"]) == pytest.approx(1e6)
    assert len(read_csv(tmp_path / "cmp" / "delta_vs_width.csv")) == 4 * 3  # 4 widths × 3 common budgets
    assert (tmp_path / "cmp" / "crossing_vs_width.png").is_file()
    text = (tmp_path / "cmp" / "ladder.md").read_text()
    assert "## Crossing and Δ against model.d_model" in text
    assert "| geglu | 256 | 256,000 | 100k–10M (3) | 3 | 1M [" in text
    assert "| geglu | 1024 | 1,024,000 | 100k–10M (3) | 3 | no crossing within the fitted range" in text


def test_any_numeric_setting_is_an_axis(tmp_path: Path) -> None:
    """Settings that differ only in model.init_std: it is the axis, the files are named after it."""
    for std, x0 in [(0.0115, 5.5), (0.02, 6.0), (0.035, 6.5)]:
        ladder_sweep(tmp_path / f"s{std}", lambda s, x, x0=x0: SLOPE * (x - x0) + U[s], model={"init_std": std})
    report = compare(sorted(tmp_path.glob("s*")), out=tmp_path / "cmp", layout=False)
    assert report["axis"] == "model.init_std"
    assert [r["init_std"] for r in report["axis_rows"]] == [0.0115, 0.02, 0.035]
    assert [r["crossing_tokens"] for r in report["axis_rows"]] == pytest.approx([10**5.5, 1e6, 10**6.5], rel=1e-9)
    assert (tmp_path / "cmp" / "crossing_vs_init_std.csv").is_file()


def test_budgets_that_differ_by_width_use_the_common_ones(tmp_path: Path) -> None:
    folders = widths_sweep(tmp_path, budgets=lambda d: (10**5, 10**6, 10**7) if d < 512 else (10**6, 10**7, 10**8))
    report = compare(folders, out=tmp_path / "cmp", layout=False)
    assert {r["budget_tokens"] for r in report["axis_budget_rows"]} == {10**6, 10**7}
    wide = report["axis_rows"][-1]
    assert (wide["tokens_lo"], wide["tokens_hi"], wide["largest_budget"]) == (10**6, 10**8, 10**8)


def test_ladders_with_no_common_budget_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folders = widths_sweep(tmp_path, budgets=lambda d: (10**5, 10**6) if d == 128 else (10**7, 10**8))
    with pytest.raises(FFNZooError, match="ladders set against model.d_model share no budget"):
        compare(folders, out=tmp_path / "cmp", layout=False)
    assert main([*map(str, folders), "--out", str(tmp_path / "cmp"), "--no-layout"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ladders set against model.d_model share no budget")
    assert "setting 1 (" in err[0] and "100k, 1M" in err[0] and "10M, 100M" in err[0]


def test_one_seed_per_width_says_no_interval(tmp_path: Path) -> None:
    report = compare(widths_sweep(tmp_path, seeds=(0,)), out=tmp_path / "cmp", layout=False)
    for r in report["axis_rows"]:
        assert r["seeds"] == 1 and r["crossing_lo"] is None and r["common_lo"] is None
        assert r["verdict"].endswith("(1 seed: no interval)")
    text = (tmp_path / "cmp" / "ladder.md").read_text()
    assert "(1 pair: no interval)" in text and (tmp_path / "cmp" / "crossing_vs_width.png").is_file()


@pytest.mark.parametrize("axis, message", [
    ("model.n_layers", "--axis model.n_layers: the ladder settings do not differ in it; they differ in"),
    ("model.name", "--axis model.name: not a number in ladder setting 1 ('w128')"),
])
def test_a_bad_axis_is_one_clear_line(tmp_path: Path, axis: str, message: str) -> None:
    with pytest.raises(FFNZooError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compare(widths_sweep(tmp_path), out=tmp_path / "cmp", layout=False, axis=axis)


def test_an_axis_needs_ladders(tmp_path: Path) -> None:
    ladder_sweep(tmp_path / "one", lambda s, x: SLOPE * (x - 6) + U[s])
    with pytest.raises(FFNZooError, match="needs ladders of >= 2 settings"):
        compare([tmp_path / "one"], layout=False, axis="model.d_model")
    assert compare([tmp_path / "one"], layout=False)["axis"] is None  # one setting: no axis, no error
    assert not math.isnan(compare([tmp_path / "one"], layout=False)["trends"][0]["slope_per_decade"])


DEPTH_CROSS = {4: 6.0, 8: 6.4, 12: 6.8}  # log10 tokens of the crossing: later as the model deepens


def depths_sweep(root: Path, also: dict | None = None) -> list[Path]:
    """One ladder folder per depth, Δ = SLOPE·(x − DEPTH_CROSS[L]) + seed noise; ``also``: {L: model keys} that
    change with depth besides n_layers (a confound the report must name)."""
    return [ladder_sweep(root / f"l{n}", lambda s, x, x0=x0: SLOPE * (x - x0) + U[s],
                         model={"n_layers": n, **(also or {}).get(n, {})}, params_total=1000 * n)
            for n, x0 in DEPTH_CROSS.items()]


def test_the_crossing_against_depth_is_the_known_one(tmp_path: Path) -> None:
    report = compare(depths_sweep(tmp_path), out=tmp_path / "cmp", layout=False, axis="model.n_layers")
    rows = {r["depth"]: r for r in report["axis_rows"]}
    assert list(rows) == [4, 8, 12]
    for n, x0 in DEPTH_CROSS.items():
        assert rows[n]["crossing_tokens"] == pytest.approx(10**x0, rel=1e-9)
        assert rows[n]["crossing_lo"] < rows[n]["crossing_tokens"] < rows[n]["crossing_hi"]
    assert (tmp_path / "cmp" / "crossing_vs_depth.csv").is_file() and (tmp_path / "cmp" / "delta_vs_depth.csv").is_file()
    assert not any("also differ" in w for w in report["warnings"])


def test_depth_ladders_that_differ_in_more_name_it(tmp_path: Path) -> None:
    also = {4: {"residual_std": 0.007}, 8: {"residual_std": 0.005}, 12: {"residual_std": 0.004}}
    report = compare(depths_sweep(tmp_path, also), out=tmp_path / "cmp", layout=False, axis="model.n_layers")
    (line,) = [w for w in report["warnings"] if "also differ" in w]
    assert "model.residual_std (0.007, 0.005, 0.004)" in line and "model.n_layers" in line
