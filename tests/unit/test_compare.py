"""ffn_zoo.analysis.compare on synthetic run folders: known values -> known table, intervals, failures, mixed settings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ffn_zoo.analysis import compare as C
from tests.helpers import make_run

GELU, GEGLU = [3.00, 3.20, 3.10], [2.90, 3.00, 2.95]


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    for seed, (a, b) in enumerate(zip(GELU, GEGLU)):
        make_run(tmp_path, "gelu", seed, a, curve=[5.0, 4.0, a], impl__threads=seed + 1)  # impl must not split
        make_run(tmp_path, "geglu", seed, b, curve=[4.9, 3.9, b])
    return tmp_path


def test_known_values_give_known_table(sweep: Path) -> None:
    report = C.compare([sweep], layout=False)
    rows = {r["variant"]: r for r in report["rows"]}
    assert set(rows) == {"gelu", "geglu"} and not report["warnings"] and not report["problems"]
    g, b = rows["gelu"], rows["geglu"]
    assert g["n"] == 3 and sorted(g["seeds"]) == [0, 1, 2]
    assert g["val_loss_mean"] == pytest.approx(3.1) and g["val_loss_std"] == pytest.approx(0.1)
    assert b["val_ppl"] == pytest.approx(math.exp(np.mean(GEGLU)))
    assert b["hidden"] == 680 and b["form"] == "gated" and g["form"] == "dense"
    # Δ and its interval agree with scipy's own Welch test
    ci = stats.ttest_ind(GEGLU, GELU, equal_var=False).confidence_interval(0.95)
    assert b["delta"] == pytest.approx(np.mean(GEGLU) - np.mean(GELU))
    assert (b["delta_lo"], b["delta_hi"]) == pytest.approx((ci.low, ci.high))
    assert g["delta"] == 0 and g["delta_lo"] is None  # the baseline has no interval against itself
    md = (sweep / "compare" / "table.md").read_text()
    assert f"{b['delta']:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]" in md and "(baseline)" in md
    assert (sweep / "compare" / "table.csv").read_text().count("\n") == 3
    assert json.loads((sweep / "compare" / "table.json").read_text())["rows"][0]["n"] == 3


def test_welch_interval() -> None:
    assert C.welch_interval([1.0], [2.0, 3.0]) is None  # n < 2: no interval, not a fake one
    assert C.welch_interval([1.0, 1.0], [2.0, 2.0]) == (-1.0, -1.0, -1.0)
    a, b = [1.0, 1.2, 1.1, 1.3], [1.5, 1.4]
    d, lo, hi = C.welch_interval(a, b)
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    assert (d, lo, hi) == pytest.approx((np.mean(a) - np.mean(b), ci.low, ci.high))
    assert lo < d < hi


def test_interval_excluding_zero_is_marked(tmp_path: Path) -> None:
    for seed, (a, b) in enumerate(zip([3.0, 3.01, 3.02], [2.80, 2.81, 2.82])):
        make_run(tmp_path, "gelu", seed, a)
        make_run(tmp_path, "swiglu", seed, b)
    report = C.compare([tmp_path], layout=False)
    sw = next(r for r in report["rows"] if r["variant"] == "swiglu")
    assert sw["delta_hi"] < 0
    assert " *" in (tmp_path / "compare" / "table.md").read_text()


def test_failed_and_unfinished_runs_are_listed(sweep: Path) -> None:
    make_run(sweep, "swiglu", 0, None, status="failed")
    make_run(sweep, "swiglu", 1, None, status="unfinished")
    report = C.compare([sweep], layout=False)
    statuses = sorted(p["status"] for p in report["problems"])
    assert statuses == ["failed", "unfinished"]
    assert "swiglu" not in {r["variant"] for r in report["rows"]}
    md = (sweep / "compare" / "table.md").read_text()
    assert "Runs not in the table" in md and "data.seq_len must be > 0" in md and "unfinished" in md


def test_mixed_settings_are_reported_not_averaged(tmp_path: Path) -> None:
    for seed in range(2):
        make_run(tmp_path, "gelu", seed, 3.0 + seed / 10)
        make_run(tmp_path, "geglu", seed, 2.9 + seed / 10)
        make_run(tmp_path, "gelu", seed, 5.0 + seed / 10, trainer__max_steps=200)
    report = C.compare([tmp_path], layout=False)
    assert any("mixed settings" in w and "trainer.max_steps" in w for w in report["warnings"])
    gelus = [r for r in report["rows"] if r["variant"] == "gelu"]
    assert sorted(r["val_loss_mean"] for r in gelus) == pytest.approx([3.05, 5.05])  # two rows, not one mean
    assert {r["setting"] for r in gelus} == {1, 2}
    geglu = next(r for r in report["rows"] if r["variant"] == "geglu")
    assert geglu["delta"] == pytest.approx(-0.1)  # against the gelu of its own setting
    assert "warning: mixed settings" in (tmp_path / "compare" / "table.md").read_text()


def test_duplicate_seed_keeps_one_and_warns(tmp_path: Path) -> None:
    make_run(tmp_path, "gelu", 0, 3.0)
    make_run(tmp_path / "rerun", "gelu", 0, 3.2)
    make_run(tmp_path, "gelu", 1, 3.1)
    report = C.compare([tmp_path], layout=False)
    assert report["rows"][0]["n"] == 2
    assert any("appears twice" in w for w in report["warnings"])


def test_pngs_and_tensorboard_layout(sweep: Path) -> None:
    report = C.compare([sweep], paper=True)
    names = sorted(Path(p).name for p in report["pngs"])
    assert names == ["delta.png", "delta_curves.png", "loss_curves.png"]
    for p in report["pngs"]:
        assert Path(p).read_bytes()[:4] == b"\x89PNG"
    md = (sweep / "compare" / "table.md").read_text()
    assert "Shazeer'20" in md and "1.942" in md and "-0.041" in md
    # the layout lives in a run's folder, never in the sweep's (TensorBoard would list the sweep as a run ".")
    assert not list(sweep.glob("events.out.tfevents.*"))
    layouts = list(sweep.glob(f"*/events.out.tfevents.*{C.LAYOUT_SUFFIX}"))
    C.compare([sweep])  # a second compare replaces the layout instead of adding one
    assert len(list(sweep.glob(f"*/events.out.tfevents.*{C.LAYOUT_SUFFIX}"))) == len(layouts) == 1
    run = C.load_run(sweep / "ffn=geglu,seed=0")
    tokens, values = C.val_curve(run)
    assert tokens.tolist() == [25 * 4096, 50 * 4096, 75 * 4096] and values[-1] == pytest.approx(2.90)


def test_layout_left_at_the_sweep_root_by_older_versions_is_removed(sweep: Path) -> None:
    (sweep / f"events.out.tfevents.0.host.1{C.LAYOUT_SUFFIX}").write_bytes(b"")
    C.compare([sweep])
    assert not list(sweep.glob("events.out.tfevents.*"))


def test_delta_over_training_has_known_values(sweep: Path) -> None:
    """Δ at each validation point: −0.1 nats at the first two (every seed), then the final-table value."""
    report = C.compare([sweep], layout=False)
    gaps = report["delta_curves"]
    assert [(r["variant"], r["tokens"]) for r in gaps] == [("geglu", 25 * 4096), ("geglu", 50 * 4096),
                                                           ("geglu", 75 * 4096)]
    assert [r["delta"] for r in gaps] == pytest.approx([-0.1, -0.1, np.mean(GEGLU) - np.mean(GELU)])
    assert gaps[0]["paired_lo"] == pytest.approx(-0.1) and gaps[0]["paired_hi"] == pytest.approx(-0.1)
    final = next(r for r in report["rows"] if r["variant"] == "geglu")
    # the same interval as the final table (curves are float32 in TensorBoard, metrics.json float64)
    assert (gaps[-1]["delta_lo"], gaps[-1]["delta_hi"]) == pytest.approx((final["delta_lo"], final["delta_hi"]),
                                                                         abs=1e-5)
    saved = json.loads((sweep / "compare" / "table.json").read_text())["delta_curves"]
    assert [(r["tokens"], r["delta"]) for r in saved] == [(r["tokens"], pytest.approx(r["delta"])) for r in gaps]
    csv_lines = (sweep / "compare" / "delta_curves.csv").read_text().splitlines()
    assert csv_lines[0].startswith("setting,variant,baseline,tokens") and len(csv_lines) == 4


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert C.main([str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    assert C.main([str(tmp_path / "empty")]) == 1
    assert "no run folders" in capsys.readouterr().err


def test_missing_baseline_warns(sweep: Path) -> None:
    report = C.compare([sweep], baseline="relu", layout=False)
    assert all(r["delta"] is None for r in report["rows"])
    assert any("no finished 'relu' runs" in w for w in report["warnings"])


def test_paired_interval_uses_common_seeds(sweep: Path) -> None:
    assert C.paired_interval({0: 1.0}, {0: 2.0}) is None
    d, lo, hi = C.paired_interval({0: 2.9, 1: 3.0, 2: 2.95, 3: 9.9}, {0: 3.0, 1: 3.2, 2: 3.1})  # seed 3 unpaired
    ci = stats.ttest_rel([2.9, 3.0, 2.95], [3.0, 3.2, 3.1]).confidence_interval(0.95)
    assert (d, lo, hi) == pytest.approx((-0.15, ci.low, ci.high))
    geglu = next(r for r in C.compare([sweep], layout=False)["rows"] if r["variant"] == "geglu")
    assert (geglu["paired_lo"], geglu["paired_hi"]) == pytest.approx((ci.low, ci.high))


def test_a_setting_added_at_its_old_value_splits_nothing(tmp_path) -> None:
    """model.residual_std came after runs were committed: gpt2 (the default) groups with runs that lack the key;
    another value is a setting of its own."""
    from ffn_zoo.analysis.compare.runs import group_runs, load_run

    old = [load_run(make_run(tmp_path / "old", f, 0, 5.0)) for f in ("gelu", "swiglu")]
    new = [load_run(make_run(tmp_path / "new", f, 1, 5.1, model__residual_std="gpt2")) for f in ("gelu", "swiglu")]
    moved = [load_run(make_run(tmp_path / "moved", f, 0, 5.2, model__residual_std=0.004)) for f in ("gelu", "swiglu")]
    assert len(group_runs(old + new)[1]) == 1
    assert len(group_runs(old + moved)[1]) == 2


@pytest.mark.parametrize("key", ["ladder.validate", "trainer.val_check_interval"])
def test_where_a_run_validates_is_not_a_setting(key: str) -> None:
    """Validating at every interval or only where a budget is scored trains the same run and scores the same
    points, so ladders run either way pool into one setting (a depth axis pools committed and new ladders)."""
    from ffn_zoo.analysis.compare.runs import experiment_key

    base = {"ffn.name": "gelu", "model.n_layers": 12, "seed": 0}
    assert experiment_key({**base, key: "every"}) == experiment_key({**base, key: "ends"}) == experiment_key(base)
    assert experiment_key({**base, "model.n_layers": 4}) != experiment_key(base)  # a real setting still splits


def test_pooled_precisions_are_named_and_an_unrecorded_one_is_not_counted() -> None:
    """fp32 and bf16 runs in one setting get a warning; fp32 runs beside runs read back from an older report (no
    precision recorded) do not: unknown is not another precision."""
    from types import SimpleNamespace

    from ffn_zoo.analysis.compare.runs import Run, numerics_warnings

    def runs(*precisions: str | None) -> list[Run]:
        return [Run(Path(f"r{i}"), "ok", {}, {"precision": p} if p else {}) for i, p in enumerate(precisions)]

    mixed = [SimpleNamespace(setting=0, runs=runs("32-true", "bf16-mixed"))]
    (warning,) = numerics_warnings(mixed)
    assert "setting 1 pools runs trained in 32-true (1) and bf16-mixed (1)" in warning
    assert numerics_warnings([SimpleNamespace(setting=0, runs=runs("32-true", None, None))]) == []


def test_pooled_denormal_handlings_are_named_and_an_unrecorded_one_is_not_counted() -> None:
    """A flushed run beside one that kept denormals (recorded, or a run folder from before impl.flush_denormal) gets a
    warning; runs read back from a report (no impl settings) are unknown, not another handling."""
    from types import SimpleNamespace

    from ffn_zoo.analysis.compare.runs import Run, denormals_of, numerics_warnings

    flushed = Run(Path("a"), "ok", {"impl.flush_denormal": True}, {"denormals_flushed": 1.0})
    kept = Run(Path("b"), "ok", {"impl.flush_denormal": False}, {"denormals_flushed": 0.0})
    older = Run(Path("c"), "ok", {"impl.precision": "32-true"}, {})  # before the flag: kept
    report = Run(Path("d"), "ok", {"ffn.name": "gelu"}, {"val_loss": 6.0})
    assert [denormals_of(r) for r in (flushed, kept, older, report)] == ["flushed", "kept", "kept", None]
    for other in (kept, older):
        pooled = [SimpleNamespace(setting=0, runs=[flushed]), SimpleNamespace(setting=0, runs=[other])]
        (warning,) = numerics_warnings(pooled)
        assert "mixed denormals: setting 1 pools runs with denormals flushed (1) and kept (1)" in warning
    assert numerics_warnings([SimpleNamespace(setting=0, runs=[flushed, report])]) == []
    apart = [SimpleNamespace(setting=0, runs=[flushed]), SimpleNamespace(setting=1, runs=[kept])]
    assert numerics_warnings(apart) == []  # separate settings are never pooled
