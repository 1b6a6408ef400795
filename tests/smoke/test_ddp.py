"""trainer=ddp with 2 CPU processes (gloo) trains the same model as one process at the same global batch.

Lightning re-launches ``sys.argv`` for its worker ranks, so DDP runs only as a ``train.py`` subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import TINY, run_train

pytestmark = pytest.mark.smoke

# Same global batch (data.batch_size=16: 8 per rank under DDP), same seed, same data order. The two runs
# differ only in float summation order (gradient all-reduce, validation sums split over ranks): measured
# |Δ val loss| = 2.4e-7 nats after 40 steps (2026-11-30). Another seed moves it by 5.4e-3, and a broken
# sharding (ranks training on the same half) or an un-reduced validation (one rank's half of the split)
# changes what is computed, not just the rounding; 1e-4 sits between the two.
TOLERANCE = 1e-4
ARGS = [*TINY, "trainer.accelerator=cpu", "logger=csv"]


def _metrics(root: Path) -> dict:
    found = sorted(root.rglob("metrics.json"))
    assert len(found) == 1, f"expected one run under {root}, found {found}"
    return json.loads(found[0].read_text())


def test_ddp_two_processes_match_one(tmp_path: Path) -> None:
    run_train(ARGS, tmp_path / "single", timeout=300)
    proc = run_train([*ARGS, "trainer=ddp", "trainer.devices=2"], tmp_path / "ddp", timeout=300)
    single, ddp = _metrics(tmp_path / "single"), _metrics(tmp_path / "ddp")

    assert single["world_size"] == 1 and ddp["world_size"] == 2, proc.stdout[-2000:]
    assert ddp["steps"] == single["steps"] == 40
    assert ddp["tokens_seen"] == single["tokens_seen"]  # global batch unchanged by the device count
    assert abs(ddp["val_loss"] - single["val_loss"]) < TOLERANCE, (single["val_loss"], ddp["val_loss"])
