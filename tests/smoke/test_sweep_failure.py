"""A sweep goes on when one of its jobs fails (NaN, crash); each failed job's folder says why; exit code 1."""

import json
from pathlib import Path

import pytest

from tests.helpers import run_train, tiny

pytestmark = pytest.mark.smoke


def test_failed_jobs_are_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    args = tiny("trainer.max_steps=4", "trainer.val_check_interval=4", "data.train_tokens=8192", "data.val_tokens=1024",
                "data.batch_size=4")
    proc = run_train(["-m", *args, "debug.crash_at_step=null,2", "debug.inject_nan_at_step=null,3"], tmp_path,
                     check=False)
    assert proc.returncode == 1
    jobs = {p.parent.name: json.loads(p.read_text()) for p in tmp_path.glob("multiruns/*/*/metrics.json")}
    assert len(jobs) == 4, sorted(jobs)
    ok = jobs["debug.crash_at_step=null,debug.inject_nan_at_step=null"]
    assert ok["status"] == "ok" and ok["steps"] == 4  # ran although the jobs around it failed
    nan = jobs["debug.crash_at_step=null,debug.inject_nan_at_step=3"]
    assert nan["status"] == "failed" and nan["error"].startswith("non-finite loss (nan) at step 3")
    crash = jobs["debug.crash_at_step=2,debug.inject_nan_at_step=null"]
    assert crash["status"] == "failed"
    assert crash["error"] == "RuntimeError: injected crash at step 2 (debug.crash_at_step)"
    (sweep,) = list(tmp_path.glob("multiruns/*"))
    traceback = (sweep / "debug.crash_at_step=2,debug.inject_nan_at_step=null" / "traceback.txt").read_text()
    assert "Traceback (most recent call last)" in traceback  # a bug keeps its traceback, in the job's folder
    assert not (sweep / "debug.crash_at_step=null,debug.inject_nan_at_step=3" / "traceback.txt").exists()  # a NaN is no bug
    # one line per failed job on stderr, then the summary; no traceback on the terminal
    assert "error: non-finite loss (nan) at step 3" in proc.stderr
    assert "error: job debug.crash_at_step=2,debug.inject_nan_at_step=null crashed (RuntimeError" in proc.stderr
    assert "3 run(s) failed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_crash_in_a_single_run_keeps_its_traceback(tmp_path: Path) -> None:
    proc = run_train(tiny("trainer.max_steps=3", "debug.crash_at_step=2"), tmp_path, check=False)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "RuntimeError: injected crash at step 2" in proc.stderr
    (m,) = list(tmp_path.glob("runs/*/metrics.json"))
    assert json.loads(m.read_text())["status"] == "failed" and (m.parent / "traceback.txt").is_file()
