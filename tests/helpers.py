"""What tests share besides fixtures: the repo's paths, the model=tiny overrides and the two ways to train.
Fixtures live in conftest.py; test modules import from here, never from one another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
# a checkpoint the pre-refactor code wrote (tests/fixtures/README.md), and the overrides it was trained with
OLD_CKPT = REPO / "tests" / "fixtures" / "pre_house_tiny_swiglu.ckpt"
OLD_CKPT_ARGS = [
    "model=tiny", "ffn=swiglu", "model.d_ff=96", "model.seq_len=16", "data.vocab_size=64", "data.support=32",
    "data.n_states=16", "data.train_tokens=16384", "data.val_tokens=1024", "data.batch_size=8",
    "trainer.val_check_interval=4", "trainer.enable_progress_bar=false", "impl.threads=1", "instruments.act_stats=false",
]

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


# a few steps of model=tiny: every error below comes before or at the first optimizer step
FAST = ["model=tiny", "trainer.max_steps=2", "trainer.val_check_interval=2", "data.train_tokens=8192",
        "data.val_tokens=1024", "data.batch_size=4", "trainer.enable_progress_bar=false", "impl.threads=1",
        "checkpoint.every_n_steps=null"]


def train(overrides: list[str], tmp_path: Path, name: str = "run", base: list[str] = FAST) -> dict:
    """``run`` as train.py calls it, in a fresh folder under ``tmp_path``."""
    from ffn_zoo.train import run
    from ffn_zoo.training.build import compose

    cfg = compose([f"log_dir={tmp_path}", *base, *overrides])
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True)
    return run(cfg, run_dir)
