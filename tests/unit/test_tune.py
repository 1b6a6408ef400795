"""lr tuning (ffn_zoo.tools.tune, ffn_zoo.analysis.compare.tuned): bad grids, the choice and its edge warning, the
train-loss criterion, and the shared-lr / own-lr table on synthetic run folders with known values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ffn_zoo.analysis.compare.tuned import compare_tuned, tail_train_loss
from ffn_zoo.analysis.compare import load_run
from ffn_zoo.tools.tune import choose, main
from tests.helpers import make_run

REQUIRED = ["--variants", "gelu,swiglu", "--tune-steps", "20", "--out"]


@pytest.mark.parametrize("args, message", [
    (["--lrs", "1e-3"], "--lrs='1e-3': an lr-tuning grid needs at least 2 distinct values"),
    (["--lrs", "1e-3,1e-3"], "needs at least 2 distinct values"),
    (["--lrs", "1e-3,0"], "--lrs='1e-3,0': every learning rate must be > 0"),
    (["--lrs=-1e-3,1e-3"], "every learning rate must be > 0"),
    (["--lrs", "1e-3,fast"], "--lrs='1e-3,fast': give comma-separated numbers"),
    (["--lrs", "1e-3,2e-3", "--variants", "gelu,swigl"], "unknown --variants entry 'swigl'; valid: bilinear"),
    (["--lrs", "1e-3,2e-3", "optim.lr=1e-3"], "override 'optim.lr=1e-3': optim.lr is set by the tool"),
    (["--lrs", "1e-3,2e-3", "--shared-lr", "0"], "--shared-lr must be > 0"),
    (["--lrs", "1e-3,2e-3", "--baseline", "relu"], "--baseline='relu' is not among --variants"),
    (["--lrs", "1e-3,2e-3", "experiment=glu_recipe_cpu"], "the tool tunes and seeds plain runs, not ladders; add "
                                                          "ladder.budgets=null trainer.max_steps=<budget in steps>"),
])
def test_bad_input_is_one_line(args: list[str], message: str, tmp_path: Path, capsys) -> None:
    assert main([*REQUIRED, str(tmp_path / "out"), *args]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
    assert not (tmp_path / "out").exists()  # refused before anything was written or launched


def test_choice_and_edge_warning() -> None:
    grid = [1e-3, 2e-3, 4e-3]
    assert choose(grid, {1e-3: 3.0, 2e-3: 2.9, 4e-3: 3.1}) == (2e-3, None)  # inside the grid: no warning
    best, edge = choose(grid, {1e-3: 3.0, 2e-3: 2.9, 4e-3: 2.8})
    assert best == 4e-3 and "largest of the grid" in edge and "upward" in edge
    best, edge = choose(grid, {1e-3: 2.7, 2e-3: 2.9, 4e-3: float("inf")})  # 4e-3 diverged
    assert best == 1e-3 and "smallest of the grid" in edge
    assert choose(grid, {1e-3: None, 2e-3: 2.95, 4e-3: float("inf")}) == (2e-3, None)  # failed/diverged never win
    assert choose(grid, {1e-3: None, 2e-3: float("inf")}) == (None, None)


def test_criterion_is_the_mean_train_loss_of_the_last_steps(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    path = make_run(tmp_path, "gelu", 0, 3.0)  # metrics: tokens_seen 409,600 = 100 steps x 32 x 128
    with SummaryWriter(str(path)) as w:
        for step in range(100):
            w.add_scalar("train/loss", float(step), global_step=step)
            w.add_scalar("val/loss", -1.0, global_step=step)  # the reported split must not enter
    run = load_run(path)
    assert tail_train_loss(run, 0.1) == pytest.approx(np.mean(range(90, 100)))  # steps 91..100 = indices 90..99
    assert tail_train_loss(run, 1.0) == pytest.approx(49.5)
    assert tail_train_loss(load_run(make_run(tmp_path / "bare", "gelu", 0, 3.0)), 0.1) is None  # nothing logged


SHARED = {"gelu": [3.00, 3.20, 3.10], "swiglu": [3.10, 3.25, 3.22]}  # both at lr 1e-3
OWN = {"gelu": (2e-3, [2.90, 3.05, 3.00]), "swiglu": (4e-3, [2.80, 2.95, 2.86])}


@pytest.fixture
def tuned_folder(tmp_path: Path) -> Path:
    arms: dict = {"shared": {}, "tuned": {}}
    for v, losses in SHARED.items():
        paths = [make_run(tmp_path / "seeds", v, s, x, optim__lr=1e-3) for s, x in enumerate(losses)]
        arms["shared"][v] = {"lr": 1e-3, "runs": [str(p.relative_to(tmp_path)) for p in paths]}
    for v, (lr, losses) in OWN.items():
        paths = [make_run(tmp_path / "seeds", v, s, x, optim__lr=lr) for s, x in enumerate(losses)]
        arms["tuned"][v] = {"lr": lr, "runs": [str(p.relative_to(tmp_path)) for p in paths]}
    tuning = {"criterion_text": "mean train/loss over the last 10%", "grid": [1e-3, 2e-3, 4e-3], "tune_steps": 20,
              "tune_seed": 0, "baseline": "gelu", "variants": {"gelu": {}, "swiglu": {}}, "arms": arms,
              "warnings": ["swiglu: the best lr 0.004 is the largest of the grid"]}
    (tmp_path / "tuning.json").write_text(json.dumps(tuning))
    return tmp_path


def test_shared_and_own_lr_side_by_side(tuned_folder: Path) -> None:
    report = compare_tuned(tuned_folder)
    rows = {r["variant"]: r for r in report["rows"]}
    for arm, losses in (("shared", SHARED), ("tuned", {v: x for v, (_, x) in OWN.items()})):
        sw, ge = rows["swiglu"][arm], rows["gelu"][arm]
        ci = stats.ttest_ind(losses["swiglu"], losses["gelu"], equal_var=False).confidence_interval(0.95)
        d = np.subtract(losses["swiglu"], losses["gelu"])  # paired by seed
        half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
        assert sw["delta"] == pytest.approx(np.mean(losses["swiglu"]) - np.mean(losses["gelu"]))
        assert (sw["delta_lo"], sw["delta_hi"]) == pytest.approx((ci.low, ci.high))
        assert (sw["paired_lo"], sw["paired_hi"]) == pytest.approx((d.mean() - half, d.mean() + half))
        assert ge["delta"] == 0 and sw["n"] == ge["n"] == 3
    assert rows["gelu"]["shared"]["lr"] == 1e-3 and rows["swiglu"]["tuned"]["lr"] == 4e-3
    gain = rows["swiglu"]["tuned_minus_shared"]
    assert gain["delta"] == pytest.approx(np.mean(OWN["swiglu"][1]) - np.mean(SHARED["swiglu"]))
    assert gain["lo"] < gain["delta"] < gain["hi"]
    assert not report["problems"] and not any("mixed settings" in w for w in report["warnings"])
    md = (tuned_folder / "compare" / "tuned.md").read_text()
    assert "| swiglu | 0.001 |" in md and "| 0.004 |" in md  # which lr each variant got
    assert "warning: swiglu: the best lr 0.004 is the largest of the grid" in md
    assert json.loads((tuned_folder / "compare" / "tuned.json").read_text())["baseline"] == "gelu"


def test_compare_cli_finds_a_tuned_folder(tuned_folder: Path, capsys) -> None:
    from ffn_zoo.analysis.compare import main as compare_main

    assert compare_main([str(tuned_folder), "--out", str(tuned_folder / "cmp")]) == 0
    assert "own lr" in capsys.readouterr().out and (tuned_folder / "cmp" / "tuned.md").is_file()
