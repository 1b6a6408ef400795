"""End to end: ffn_zoo.tools.tune on model=tiny with a tiny grid -> an lr per variant, the seeds at that lr
(checked in each run's composed .hydra config), the side-by-side table, and a second invocation that reuses
every run instead of launching one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.helpers import REPO, tiny

pytestmark = pytest.mark.smoke

GRID = [1e-3, 3e-3, 1e-2]


def tune(out: Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "ffn_zoo.tools.tune", *tiny(), "--variants", "gelu,swiglu",
           "--lrs", ",".join(map(str, GRID)), "--tune-steps", "20", "--seeds", "0,1", "--shared-lr", "3e-3",
           "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def composed(run: Path) -> dict:
    return OmegaConf.to_container(OmegaConf.load(run / ".hydra" / "config.yaml"))


def test_tune_then_compare_and_reuse(tmp_path: Path) -> None:
    out = tmp_path / "tuned"
    first = tune(out)
    t = json.loads((out / "tuning.json").read_text())
    assert t["criterion"] == "train_loss_tail" and t["grid"] == GRID and t["shared_lr"] == 3e-3
    for v in ("gelu", "swiglu"):
        entries = t["variants"][v]["runs"]
        assert [e["lr"] for e in entries] == GRID and all(e["status"] == "ok" for e in entries)
        best = min(entries, key=lambda e: e["criterion"])["lr"]  # the lowest train-loss tail, not val/loss
        assert t["variants"][v]["best_lr"] == best
        assert (t["variants"][v]["edge_warning"] is not None) == (best in (GRID[0], GRID[-1]))
        for e in entries:  # tuning runs: the short budget, one seed, the grid's lr
            cfg = composed(out / e["path"])
            assert (cfg["ffn"]["name"], cfg["optim"]["lr"], cfg["seed"]) == (v, e["lr"], 0)
            assert cfg["trainer"]["max_steps"] == 20
        for arm, lr in (("tuned", best), ("shared", 3e-3)):  # seed runs: the full budget at the arm's lr
            runs = t["arms"][arm][v]["runs"]
            cfgs = [composed(out / p) for p in runs]
            assert sorted(c["seed"] for c in cfgs) == [0, 1]
            assert all((c["ffn"]["name"], c["optim"]["lr"], c["trainer"]["max_steps"]) == (v, lr, 40) for c in cfgs)
    assert t["launched"]["tune"] == 6 and t["reused"]["tune"] == 0
    for w in t["warnings"]:  # an edge-of-grid choice is said where the user reads it
        assert f"warning: {w}" in first.stdout
    report = json.loads((out / "compare" / "tuned.json").read_text())
    rows = {r["variant"]: r for r in report["rows"]}
    assert rows["swiglu"]["tuned"]["lr"] == t["variants"]["swiglu"]["best_lr"]
    assert rows["swiglu"]["shared"]["n"] == rows["swiglu"]["tuned"]["n"] == 2
    assert rows["swiglu"]["tuned"]["delta_lo"] < rows["swiglu"]["tuned"]["delta"] < rows["swiglu"]["tuned"]["delta_hi"]
    assert "own lr" in (out / "compare" / "tuned.md").read_text()

    folders = sorted(p for p in out.rglob("metrics.json"))
    second = tune(out)  # the same command again: every run is found, none launched
    t2 = json.loads((out / "tuning.json").read_text())
    assert t2["launched"] == {"tune": 0, "seeds": 0} and t2["reused"]["tune"] == 6
    assert "launch   " not in second.stdout and sorted(out.rglob("metrics.json")) == folders
    assert {v: r["best_lr"] for v, r in t2["variants"].items()} == {v: r["best_lr"] for v, r in t["variants"].items()}
