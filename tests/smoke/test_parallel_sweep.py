"""hydra/launcher=parallel on model=tiny: the same results as the serial sweep at the same per-job threads, bitwise;
a failed job is recorded and the other goes on; a job killed outright (SIGKILL) is recorded with its resume command
while the other finishes, and the same sweep with ckpt_path=last trains only what is missing; SIGTERM stops every
job with its last.ckpt written; ladders run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, assert_same_state, run_train, tiny
from tests.helpers import results as metrics_without

pytestmark = pytest.mark.smoke

PARALLEL = ["hydra/launcher=parallel", "hydra.launcher.n_jobs=2"]
SMALL = ("trainer.max_steps=12", "trainer.val_check_interval=6", "data.train_tokens=16384", "data.val_tokens=2048",
         "data.batch_size=8", "model.dropout=0.1")  # dropout: the training RNG stream matters too


def auto_threads() -> int:
    """What impl.threads=auto gives each of 2 jobs side by side on this machine."""
    return max(1, len(os.sched_getaffinity(0)) // 2)


def without_threads(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("impl.threads=")]


def jobs(root: Path) -> dict[str, Path]:
    (sweep,) = list(root.glob("multiruns/*"))
    return {p.name: p for p in sweep.iterdir() if p.is_dir()}


def test_parallel_sweep_equals_the_serial_one_bitwise(tmp_path: Path) -> None:
    args = without_threads(tiny(*SMALL))
    run_train(["-m", *args, "seed=0,1", f"impl.threads={auto_threads()}"], tmp_path / "serial")
    proc = run_train(["-m", *args, "seed=0,1", *PARALLEL], tmp_path / "parallel")
    serial, parallel = jobs(tmp_path / "serial"), jobs(tmp_path / "parallel")
    assert sorted(serial) == sorted(parallel) == ["seed=0", "seed=1"]  # the same folder names
    for name in serial:
        assert metrics_without(parallel[name]) == metrics_without(serial[name])
        assert_same_state(serial[name] / "checkpoints/last.ckpt", parallel[name] / "checkpoints/last.ckpt")
        console = (parallel[name] / "console.log").read_text()  # the job's own output, in its folder
        assert f"{auto_threads()} threads (impl.threads=auto: " in console and "done     val/loss" in console
    # the terminal: one line per finished job, none of the jobs' own output
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("job ")]
    assert len(lines) == 2 and all(" ok " in ln for ln in lines), proc.stdout
    assert "val/ppl" not in proc.stdout and "step 6/12" not in proc.stdout


def test_a_failed_job_is_recorded_and_the_other_goes_on(tmp_path: Path) -> None:
    proc = run_train(["-m", *tiny(*SMALL), "debug.crash_at_step=null,2", *PARALLEL], tmp_path, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    folders = jobs(tmp_path)
    ok = json.loads((folders["debug.crash_at_step=null"] / "metrics.json").read_text())
    assert ok["status"] == "ok" and ok["steps"] == 12
    crashed = folders["debug.crash_at_step=2"]
    failed = json.loads((crashed / "metrics.json").read_text())
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: injected crash at step 2 (debug.crash_at_step)"
    assert "Traceback (most recent call last)" in (crashed / "traceback.txt").read_text()
    line = next(ln for ln in proc.stdout.splitlines() if "debug.crash_at_step=2" in ln and ln.startswith("job "))
    assert " failed " in line and "injected crash at step 2" in line
    assert "Traceback" not in proc.stdout + proc.stderr


def process_writing(console: Path) -> int | None:
    """The pid of the process whose stdout is ``console`` (a job's console.log), from /proc."""
    for fd in Path("/proc").glob("[0-9]*/fd/1"):
        try:
            if Path(os.readlink(fd)) == console:
                return int(fd.parts[2])
        except OSError:
            continue
    return None


@pytest.mark.skipif(not Path("/proc/self/fd/1").exists(), reason="finds the job's process in /proc")
def test_a_job_killed_outright_is_recorded_and_a_rerun_trains_only_what_is_missing(tmp_path: Path) -> None:
    args = tiny("trainer.max_steps=400", "trainer.val_check_interval=100", "checkpoint.every_n_steps=5",
                "data.train_tokens=16384", "data.val_tokens=2048", "data.batch_size=8")
    sweep = ["-m", f"log_dir={tmp_path}", f"hydra.sweep.dir={tmp_path / 'sweep'}", *args, "ffn=gelu,relu", *PARALLEL]
    proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), *sweep], cwd=REPO, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    relu = tmp_path / "sweep" / "ffn=relu"
    deadline, pid = time.time() + 240, None
    while time.time() < deadline and pid is None:  # relu has a checkpoint and is still training: kill it outright
        if (relu / "checkpoints/last.ckpt").is_file():
            pid = process_writing(relu / "console.log")
        time.sleep(0.02)
    if pid is None:
        proc.kill()
        pytest.fail(f"the relu job never had a checkpoint while running: {proc.communicate()}")
    os.kill(pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 1, err[-2000:]
    import torch

    gelu = json.loads((tmp_path / "sweep" / "ffn=gelu" / "metrics.json").read_text())
    assert gelu["status"] == "ok" and gelu["steps"] == 400  # the neighbour finished, with its last.ckpt
    assert torch.load(tmp_path / "sweep/ffn=gelu/checkpoints/last.ckpt", weights_only=True)["global_step"] == 400
    failed = json.loads((relu / "metrics.json").read_text())
    killed_at = failed["checkpoint_step"]
    assert failed["status"] == "failed" and failed["error"].startswith("killed by SIGKILL (the OOM killer, or kill -9); "
                                                                        f"last good checkpoint {relu / 'checkpoints/last.ckpt'} (step {killed_at})")
    assert 5 <= killed_at < 400 and "ffn=relu" in failed["resume"] and "ckpt_path=" in failed["resume"]
    (line,) = [ln for ln in out.splitlines() if ln.startswith("job ") and "ffn=relu" in ln]
    assert " failed " in line and "killed by SIGKILL" in line  # the sweep names it

    again = run_train([*sweep[2:], "-m", "ckpt_path=last"], tmp_path)  # the same sweep, resumed
    assert "job 2/2" in again.stdout
    done = json.loads((relu / "metrics.json").read_text())
    assert done["status"] == "ok" and done["steps"] == 400
    assert f"resume   {relu / 'checkpoints/last.ckpt'} at step {killed_at}" in (relu / "console.log").read_text()
    gelu_log = (tmp_path / "sweep" / "ffn=gelu" / "console.log").read_text().split("resume   ")
    assert len(gelu_log) == 2 and gelu_log[1].split("\n")[0].endswith("at step 400")  # nothing left to train


def test_sigterm_stops_every_job_with_its_checkpoint(tmp_path: Path) -> None:
    args = tiny("trainer.max_steps=100000", "trainer.val_check_interval=10", "checkpoint.every_n_steps=null",
                "data.train_tokens=16384", "data.val_tokens=2048", "data.batch_size=8")
    proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), "-m", f"log_dir={tmp_path}", *args, "ffn=gelu,relu",
                             *PARALLEL], cwd=REPO, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 240
    while time.time() < deadline:  # both jobs past their first validation: their training loops are running
        logs = list(tmp_path.glob("multiruns/*/*/console.log"))
        if len(logs) == 2 and all("step 10/" in p.read_text() for p in logs):
            break
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail(f"the jobs did not start training: {proc.communicate()}")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    import torch

    for name, folder in jobs(tmp_path).items():
        m = json.loads((folder / "metrics.json").read_text())
        assert m["status"] == "interrupted" and m["signal"] == "SIGTERM", (name, m)
        ckpt = torch.load(folder / "checkpoints/last.ckpt", map_location="cpu", weights_only=True)
        assert ckpt["global_step"] == m["steps"] >= 10
    assert sum(" interrupted " in ln for ln in out.splitlines() if ln.startswith("job ")) == 2, out


def test_ladders_run_side_by_side(tmp_path: Path) -> None:
    ladder = tiny("trainer.max_steps=20", "trainer.val_check_interval=5", "optim.schedule=wsd", "optim.warmup=0.2",
                  "data.train_tokens=16384", "data.val_tokens=2048", "data.batch_size=8", "ladder.budgets=[1280,2560]")
    run_train(["-m", *ladder, "ffn=gelu,swiglu", *PARALLEL], tmp_path)
    for name, folder in jobs(tmp_path).items():
        summary = json.loads((folder / "metrics.json").read_text())
        assert summary["status"] == "ok" and summary["ladder_role"] == "ladder", name
        assert [p["folder"] for p in summary["pieces"]] == ["trunk", "budget=1280", "budget=2560"]
