"""scripts/loss_trace.py: a seeded few-step training trace, written and compared (the "moves no result" check)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from tests.helpers import REPO

TINY = ["--model", "tiny", "--steps", "3", "--batch", "2", "--seq", "16", "--vocab", "64", "--threads", "1"]


def _main() -> object:
    return runpy.run_path(str(REPO / "scripts" / "loss_trace.py"), run_name="loss_trace")["main"]


def test_a_trace_matches_itself_and_a_moved_one_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main = _main()
    out = tmp_path / "before.json"
    assert main([*TINY, "--out", str(out)]) == 0
    losses = json.loads(out.read_text())["losses"]
    assert len(losses) == 3 and all(loss > 0 for loss in losses)
    assert main([*TINY, "--against", str(out)]) == 0  # seeded: the same code gives the same losses
    assert "max |Δloss| 0 at step" in capsys.readouterr().out
    moved = tmp_path / "moved.json"
    moved.write_text(json.dumps({"losses": [losses[0], losses[1] + 1e-3, losses[2]]}))
    assert main([*TINY, "--against", str(moved)]) == 1
    printed = capsys.readouterr().out
    assert "at step 2" in printed and "MOVED" in printed


def test_overrides_reach_the_step(tmp_path: Path) -> None:
    """impl.fused_loss=false is the plain path: within rounding of the fused one, but a trace of its own."""
    main = _main()
    fused = tmp_path / "fused.json"
    assert main([*TINY, "--out", str(fused)]) == 0
    assert main([*TINY, "--against", str(fused), "impl.fused_loss=false"]) == 0
    assert main([*TINY, "--against", str(fused), "--tol", "0", "objective=mlm"]) == 1  # another objective moves it
