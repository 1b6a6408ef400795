"""Shared test fixtures. Tests run on CPU with few threads: on a 2-core machine a busy neighbour
process slows torch many-fold, so nothing here times anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip: the real corpora are beside the checkout, never inside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA


# A model=tiny run small enough for the smoke tier (seconds on one core).
TINY = [
    "model=tiny", "trainer.max_steps=40", "trainer.val_check_interval=20", "trainer.log_every_n_steps=5",
    "data.train_tokens=65536", "data.val_tokens=4096", "data.batch_size=16", "trainer.enable_progress_bar=false",
    "impl.threads=1",
]


def tiny(*extra: str) -> list[str]:
    """TINY with ``extra`` overrides replacing the same keys (Hydra refuses a key given twice)."""
    keys = {e.split("=", 1)[0] for e in extra}
    return [a for a in TINY if a.split("=", 1)[0] not in keys] + list(extra)


def run_train(args: list[str], tmp_path: Path, timeout: int = 300, check: bool = True) -> subprocess.CompletedProcess:
    """``python train.py <args>`` in a subprocess, logging under ``tmp_path``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    flags = [a for a in args if a.startswith("-")]  # e.g. -m must come before the overrides
    overrides = [a for a in args if not a.startswith("-")]
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), *flags, f"log_dir={tmp_path}", *overrides],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc
