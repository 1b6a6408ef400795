"""scripts/bench_denormals.py on a checkpoint a tiny run wrote: both arms in their own processes, FTZ/DAZ as asked,
the same losses, a profile when asked; fresh weights with --init."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import REPO, TrainOnce, tiny

if not torch.set_flush_denormal(False):
    pytest.skip("this CPU has no flush-to-zero mode", allow_module_level=True)


@pytest.mark.parametrize("init", [False, True])
def test_arms_flush_as_asked_and_train_the_same(tmp_path: Path, train_once: TrainOnce, init: bool) -> None:
    run = train_once("bench_denormals", tiny("trainer.max_steps=4", "trainer.val_check_interval=4", "logger=csv"))
    (ckpt,) = run.rglob("last.ckpt")  # one checkpoint for both cases; the bench only reads it
    tokens = tmp_path / "tokens.npy"
    np.save(tokens, np.random.default_rng(0).integers(0, 2048, size=16 * 33 * 3, dtype=np.uint16))
    out = tmp_path / "arms.jsonl"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_denormals.py"), "--ckpt", str(ckpt),
                           "--tokens", str(tokens), "--steps", "2", "--pairs", "1", "--threads", "1", "--profile",
                           "--json", str(out), *(["--init"] if init else [])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    off, on = [json.loads(line) for line in out.read_text().splitlines()]
    assert (off["on"], off["flushed"], on["on"], on["flushed"]) == (False, 0.0, True, 1.0)
    assert off["loss"] == on["loss"] and len(on["loss"]) == 2  # a tiny model makes no denormals: bitwise equal
    assert on["profile_ms"] and off["init"] is init
    assert "largest loss difference between arms: 0" in proc.stdout
