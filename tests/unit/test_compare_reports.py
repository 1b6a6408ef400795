"""A committed ladder comparison read back as its runs (ffn_zoo/analysis/compare/reports.py): it gives the same
deltas, trends and width axis as the run folders it was made from, merges with fresh run folders of the same
setting (seeds grown in another session), and ``--budgets`` fits every ladder over one range; each bad input is one
clear line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ffn_zoo.analysis.compare import compare
from ffn_zoo.analysis.compare.cli import main
from ffn_zoo.analysis.compare.reports import report_file
from ffn_zoo.errors import FFNZooError
from tests.helpers import SLOPE, U, V, ladder_sweep, widths_sweep


def c4(seed: int, x: float, ffn: str) -> dict[str, float]:
    return {"c4": 4.5 - 0.3 * x + 0.01 * seed + (0.05 * (x - 6.2) + U[seed] if ffn == "geglu" else 0.0)}


def delta(seed: int, x: float) -> float:
    return SLOPE * (x - 6.0) + U[seed] + V[seed] * (x - 6)


NUMBERS = ("delta", "delta_lo", "delta_hi", "paired_delta", "paired_lo", "paired_hi", "n_pairs", "multiplier")
TREND = ("slope_per_decade", "slope_lo", "slope_hi", "crossing_tokens", "crossing_lo", "crossing_hi", "seeds")


def same(a: list[dict], b: list[dict], keys: tuple[str, ...]) -> None:
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        for k in keys:
            assert (x[k] is None and y[k] is None) or x[k] == pytest.approx(y[k], rel=1e-9, abs=1e-12), k


def test_a_report_reads_back_as_its_runs(tmp_path: Path) -> None:
    first = compare(widths_sweep(tmp_path / "w"), out=tmp_path / "cmp", layout=False)
    assert report_file(tmp_path / "cmp") == tmp_path / "cmp" / "ladder.json"
    again = compare([tmp_path / "cmp"], out=tmp_path / "again", layout=False)
    same(first["delta_rows"], again["delta_rows"], NUMBERS)
    same(first["trends"], again["trends"], TREND)
    same(first["axis_rows"], again["axis_rows"], ("width", "params", "crossing_tokens", "crossing_lo", "common_delta"))
    assert again["axis"] == "model.d_model" and again["ladder_settings"] == first["ladder_settings"]


def test_extra_held_out_sets_read_back_too(tmp_path: Path) -> None:
    first = compare([ladder_sweep(tmp_path / "s", delta, extra=c4)], out=tmp_path / "cmp", layout=False)
    again = compare([tmp_path / "cmp" / "ladder.json"], out=tmp_path / "again", layout=False)
    same(first["extra_val"]["c4"]["trends"], again["extra_val"]["c4"]["trends"], TREND)
    assert again["extra_val"]["c4"]["trends"][0]["crossing_tokens"] == pytest.approx(10**6.2, rel=1e-9)


def test_a_report_and_fresh_folders_of_its_setting_pool_their_seeds(tmp_path: Path) -> None:
    """Seeds 0-1 committed in one session, seed 2 run in the next: the same as all three run folders."""
    whole = compare([ladder_sweep(tmp_path / "all", delta)], out=tmp_path / "whole", layout=False)
    compare([ladder_sweep(tmp_path / "early", delta, seeds=(0, 1))], out=tmp_path / "early_cmp", layout=False)
    late = ladder_sweep(tmp_path / "late", delta, seeds=(2,))
    pooled = compare([tmp_path / "early_cmp", late], out=tmp_path / "pooled", layout=False)
    assert {r["ladder_setting"] for r in pooled["budget_rows"]} == {1}  # one setting, not two
    same(whole["trends"], pooled["trends"], TREND)
    assert pooled["trends"][0]["seeds"] == 3


def test_a_seed_in_both_keeps_the_run_folder(tmp_path: Path) -> None:
    compare([ladder_sweep(tmp_path / "old", delta, seeds=(0, 1))], out=tmp_path / "old_cmp", layout=False)
    rerun = ladder_sweep(tmp_path / "new", lambda s, x: delta(s, x) + 0.5, seeds=(1,))
    report = compare([tmp_path / "old_cmp", rerun], out=tmp_path / "cmp", layout=False)
    top = [d for d in report["delta_rows"] if d["budget_tokens"] == 10**7][0]
    assert top["per_seed"][1] == pytest.approx(delta(1, 7) + 0.5)  # the rerun, not the report's seed 1
    assert any("seed 1 of geglu appears twice; using " + str(rerun) in w for w in report["warnings"])


def test_budgets_fit_every_ladder_over_one_range(tmp_path: Path) -> None:
    folders = widths_sweep(tmp_path)
    report = compare(folders, out=tmp_path / "cmp", layout=False, budgets=["100k", "1M"])
    assert {r["budget_tokens"] for r in report["budget_rows"]} == {10**5, 10**6}
    for r in report["axis_rows"]:
        assert (r["tokens_lo"], r["tokens_hi"], r["budgets"]) == (10**5, 10**6, 2)
    d128 = next(r for r in report["axis_rows"] if r["width"] == 128)  # crosses at 3.16M: past the range now
    assert d128["crossing_tokens"] is None and "no crossing within the fitted range (100k–1M tokens)" in d128["verdict"]


@pytest.mark.parametrize("args, message", [
    (["--budgets", "3M"], "error: --budgets: no ladder has a branch at 3,000,000 tokens; they have 100k (100,000), "
                          "1M (1,000,000), 10M (10,000,000)"),
    (["--budgets", "lots"], "error: --budgets='lots' is not a token count"),
    (["--set", "model.d_model"], "error: --set 'model.d_model': give key=value"),
    (["--set", "model.d_model=128"], "error: --set adds config to committed ladder reports, and none was given"),
])
def test_bad_budgets_and_sets_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str],
                                           message: str) -> None:
    sweep = ladder_sweep(tmp_path / "s", delta)
    assert main([str(sweep), "--out", str(tmp_path / "cmp"), "--no-layout", *args]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message)


def _strip_settings(folder: Path) -> Path:
    """A report as compare wrote it before it recorded ladder_settings."""
    file = folder / "ladder.json"
    report = json.loads(file.read_text())
    del report["ladder_settings"], report["ladder_ffn"]
    file.write_text(json.dumps(report))
    return folder


def test_an_old_report_takes_its_settings_from_set(tmp_path: Path) -> None:
    for d in (128, 512):
        compare([ladder_sweep(tmp_path / f"d{d}", lambda s, x, d=d: SLOPE * (x - math.log10(d * 4000)) + U[s])],
                out=tmp_path / f"r{d}", layout=False)
        _strip_settings(tmp_path / f"r{d}")
    # the same variant config without the report's ffn.*: still one variant per budget
    one = compare([tmp_path / "r128"], out=tmp_path / "one", layout=False)
    assert one["trends"][0]["crossing_tokens"] == pytest.approx(128 * 4000, rel=1e-9)
    with pytest.raises(FFNZooError, match="needs ladders of >= 2 settings"):  # two reports, nothing tells them apart
        compare([tmp_path / "r128", tmp_path / "r512"], out=tmp_path / "cmp", layout=False, axis="model.d_model")
    assert main([str(tmp_path / "r512"), "--set", "model.d_model=512", "--out", str(tmp_path / "cmp"),
                 "--no-layout"]) == 0
    report = json.loads((tmp_path / "cmp" / "ladder.json").read_text())
    assert report["ladder_settings"][0]["model.d_model"] == 512


def test_an_old_report_of_several_settings_is_refused(tmp_path: Path) -> None:
    compare(widths_sweep(tmp_path / "w"), out=tmp_path / "cmp", layout=False)
    _strip_settings(tmp_path / "cmp")
    with pytest.raises(FFNZooError, match="3 ladder settings .* but no ladder_settings to tell them apart"):
        compare([tmp_path / "cmp"], out=tmp_path / "again", layout=False)


def test_a_ladder_manifest_is_not_a_report(tmp_path: Path) -> None:
    """A ladder's own folder also holds a ladder.json (its manifest): it is read as run folders, never as a report."""
    sweep = ladder_sweep(tmp_path / "s", delta)
    job = next(sweep.glob("ffn=*"))
    assert (job / "ladder.json").is_file() and report_file(job) is None and report_file(sweep) is None
    assert compare([sweep], out=tmp_path / "cmp", layout=False)["trends"][0]["seeds"] == 3


def test_non_finite_runs_a_report_left_out_are_named(tmp_path: Path) -> None:
    sweep = ladder_sweep(tmp_path / "s", lambda s, x: math.nan if (s, x) == (2, 7.0) else delta(s, x))
    first = compare([sweep], out=tmp_path / "cmp", layout=False)
    assert first["trends"][0]["seeds_dropped"] == [2]
    again = compare([tmp_path / "cmp"], out=tmp_path / "again", layout=False)
    assert any("1 run(s) it left out for a non-finite loss stay out" in w and "seed 2: nan" in w
               for w in again["warnings"])
    same(first["trends"], again["trends"], TREND)



def test_settings_are_numbered_in_the_order_given_reports_included(tmp_path: Path) -> None:
    ladder_sweep(tmp_path / "a", delta, model={"init_std": 0.02})
    compare([tmp_path / "a"], out=tmp_path / "a_cmp", layout=False)
    fresh = ladder_sweep(tmp_path / "b", lambda s, x: delta(s, x) - 0.03, model={"init_std": 0.035})
    for order, first in (([tmp_path / "a_cmp", fresh], "model.init_std=0.02"),
                         ([fresh, tmp_path / "a_cmp"], "model.init_std=0.035")):
        report = compare(order, out=tmp_path / "cmp", layout=False)
        assert next(r["setting_label"] for r in report["delta_rows"] if r["ladder_setting"] == 1) == first
    top = [d for d in report["delta_rows"] if d["ladder_setting"] == 2]
    assert all(d["vs_ref"] == pytest.approx(0.03) for d in top)  # the report's gap against the fresh folder's


def _record_numerics(sweep: Path, flushed: float) -> Path:
    """Each branch's metrics.json records its precision and denormal handling, as training writes them."""
    for metrics in sweep.glob("*/budget=*/metrics.json"):
        m = json.loads(metrics.read_text())
        metrics.write_text(json.dumps({**m, "precision": "32-true", "denormals_flushed": flushed}))
    return sweep


def test_each_seeds_numerics_survive_a_report(tmp_path: Path) -> None:
    """Seeds kept-denormal in one session's report, a flushed seed in the next: pooled, the warning still names
    both (a report that forgot them would pool silently); a report of one handling alone warns of nothing."""
    early = _record_numerics(ladder_sweep(tmp_path / "early", delta, seeds=(0, 1)), flushed=0.0)
    first = compare([early], out=tmp_path / "early_cmp", layout=False)
    assert {d for r in first["budget_rows"] for d in r["seed_denormals"]} == {"kept"}
    assert not any("mixed" in w for w in first["warnings"])
    late = _record_numerics(ladder_sweep(tmp_path / "late", delta, seeds=(2,)), flushed=1.0)
    pooled = compare([tmp_path / "early_cmp", late], out=tmp_path / "pooled", layout=False)
    (mixed,) = [w for w in pooled["warnings"] if "mixed denormals" in w]  # said once for the budgets it holds at
    assert mixed.startswith("budgets 100k, 1M, 10M: ") and "flushed (2) and kept (4)" in mixed
    assert not any("mixed precision" in w for w in pooled["warnings"])  # all 32-true
    again = compare([tmp_path / "pooled"], out=tmp_path / "again", layout=False)  # a pooled report read back
    assert sum("mixed denormals" in w for w in again["warnings"]) == 1
    header = (tmp_path / "pooled" / "ladder_budgets.csv").read_text().splitlines()[0]
    assert "seed_denormals" not in header and "seed_precision" not in header  # per-seed lists: JSON only
