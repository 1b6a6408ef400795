"""impl.precision=bf16-mixed trains through train.py on CPU with the default fused AdamW and gradient clipping
(Lightning's mixed-precision plugin refuses to clip for a fused optimizer; LitLM clips itself when no grad
scaler is involved)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import TINY, run_train

pytestmark = pytest.mark.smoke


def test_bf16_mixed_trains_with_fused_adamw_and_clipping(tmp_path: Path) -> None:
    proc = run_train([*TINY, "impl.precision=bf16-mixed", "optim.fused=true", "optim.grad_clip=1.0", "logger=csv"],
                     tmp_path)
    assert "precision bf16-mixed" in proc.stdout
    assert "\nbf16     " in proc.stdout  # the banner names this CPU's bf16 support
    metrics = json.loads(next(tmp_path.rglob("metrics.json")).read_text())
    assert metrics["status"] == "ok" and metrics["steps"] == 40 and metrics["precision"] == "bf16-mixed"
    # learned something: below the uniform-guess loss ln(vocab) of the tiny run's corpus
    assert math.isfinite(metrics["val_loss"]) and metrics["val_loss"] < math.log(2048)
