"""scripts/train_rate.py: a run's train/tokens_per_s per window of steps, from its TensorBoard events."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

from tests.helpers import REPO

SCRIPT = REPO / "scripts" / "train_rate.py"


def test_windows_show_a_step_that_slows(tmp_path: Path) -> None:
    run = tmp_path / "ladder.budgets=[0.25Mi,2Mi]" / "trunk"  # a ladder's name: [ ] must not be read as a glob
    w = SummaryWriter(str(run))
    for step in range(0, 120, 10):
        w.add_scalar("train/tokens_per_s", 500.0 if step < 60 else 400.0, step)
        w.add_scalar("train/loss", 7.0, step)
    w.close()
    out = subprocess.run([sys.executable, str(SCRIPT), str(run), "--window", "60"], capture_output=True, text=True,
                         check=True).stdout
    assert "(12 points of train/tokens_per_s)" in out
    assert "steps    0-  59: n=  6 mean    500.0" in out and "steps   60- 119: n=  6 mean    400.0" in out
    assert "last window ÷ first: 0.800" in out


def test_a_folder_without_the_rate_exits_1_naming_it(tmp_path: Path) -> None:
    w = SummaryWriter(str(tmp_path / "run"))
    w.add_scalar("train/loss", 7.0, 0)
    w.close()
    proc = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "run")], capture_output=True, text=True)
    assert proc.returncode == 1 and "no train/tokens_per_s" in proc.stderr
