"""impl.flush_denormal (training/recipe/denormals.py): FTZ/DAZ reaches every intra-op thread only when set before the
process's first parallel op, the probe tells the two apart, and a run records and prints what held. Each case runs in
a fresh interpreter: this process's intra-op threads are long started."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from ffn_zoo.training.recipe.denormals import denormals_note
from tests.helpers import TINY, only_run, run_train

if not torch.set_flush_denormal(False):  # False: no flush-to-zero mode on this CPU (e.g. not x86), nothing to test
    pytest.skip("this CPU has no flush-to-zero mode", allow_module_level=True)

PROBE = """
import torch
from ffn_zoo.training.recipe.denormals import denormals_flushed, flush_denormals
if {early}: flush_denormals({on})
torch.set_num_threads(2)
before = denormals_flushed()  # the first parallel op: the intra-op threads start here
flush_denormals({on})
print(before, denormals_flushed())
"""


def probe(early: bool, on: bool) -> tuple[float, float]:
    """(flushed share at the process's first parallel op, after setting the flag again), in a fresh process."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(early=early, on=on)], capture_output=True, text=True,
                         check=True, env={"OMP_NUM_THREADS": "2", "PATH": ""}, timeout=120)
    before, after = map(float, out.stdout.split())
    return before, after


def test_set_before_the_first_parallel_op_every_thread_flushes() -> None:
    assert probe(early=True, on=True) == (1.0, 1.0)


def test_set_after_it_only_the_calling_thread_flushes_and_the_probe_sees_it() -> None:
    before, after = probe(early=False, on=True)
    assert before == 0.0  # nothing set yet: denormals survive everywhere
    assert 0.0 < after < 1.0  # the main thread's share flushed, the worker started earlier keeps denormals


def test_off_keeps_denormals() -> None:
    assert probe(early=True, on=False) == (0.0, 0.0)


def test_the_note_says_what_holds() -> None:
    assert denormals_note(True, 1.0) == "denormals flushed (FTZ/DAZ)"
    assert "kept" in denormals_note(False, 0.0)
    assert "no flush-to-zero mode" in denormals_note(True, 0.0)
    assert "50% of the work" in denormals_note(True, 0.5) and "first parallel op" in denormals_note(True, 0.5)


@pytest.mark.parametrize("on", [True, False])
def test_a_run_prints_and_records_what_held(tmp_path, on: bool) -> None:
    proc = run_train([*TINY, f"impl.flush_denormal={str(on).lower()}", "logger=csv"], tmp_path)
    metrics = json.loads((only_run(tmp_path) / "metrics.json").read_text())
    assert metrics["denormals_flushed"] == (1.0 if on else 0.0)
    assert ("numerics denormals flushed (FTZ/DAZ)" if on else "numerics denormals kept") in proc.stdout
