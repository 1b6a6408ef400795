"""Exact resume: a run SIGKILLed after step N's checkpoint and resumed to 2N ends bitwise where an
uninterrupted run ends; the same seed twice gives the same metrics.json. CPU, 1 thread, model=tiny."""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import (OLD_CKPT, OLD_CKPT_ARGS, REPO, TrainOnce, assert_same_state, only_run, results, run_train,
                           tiny)

pytestmark = pytest.mark.smoke

# dropout > 0 so that a resume is exact only if the training RNG stream is restored too
ARGS = tiny("trainer.max_steps=20", "trainer.val_check_interval=10", "checkpoint.every_n_steps=5", "model.dropout=0.1")


@pytest.fixture(scope="module")
def uninterrupted(train_once: TrainOnce) -> Path:
    return train_once("uninterrupted", ARGS)


def test_same_seed_twice_gives_identical_metrics(uninterrupted: Path, tmp_path: Path) -> None:
    run_train(ARGS, tmp_path)
    again = only_run(tmp_path)
    assert results(again) == results(uninterrupted)
    assert_same_state(uninterrupted / "checkpoints/last.ckpt", again / "checkpoints/last.ckpt")


def test_sigkill_then_resume_is_bitwise_exact(uninterrupted: Path, tmp_path: Path) -> None:
    killed = run_train([*ARGS, "debug.kill_at_step=10"], tmp_path, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    run_b = only_run(tmp_path)
    assert not (run_b / "metrics.json").exists()  # it really died mid-run
    assert torch.load(run_b / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 10

    resumed = run_train([*ARGS, "ckpt_path=last"], tmp_path)  # the newest run with the same overrides: run B
    assert f"resume   {run_b / 'checkpoints/last.ckpt'} at step 10" in resumed.stdout
    (run_c,) = [p for p in tmp_path.glob("runs/*") if p != run_b]
    assert results(run_c) == results(uninterrupted)  # val loss, tokens seen, steps, ... identical
    assert json.loads((run_c / "metrics.json").read_text())["resumed_from"] == str(run_b / "checkpoints/last.ckpt")
    assert_same_state(uninterrupted / "checkpoints/last.ckpt", run_c / "checkpoints/last.ckpt")


def test_a_requeued_job_reruns_the_same_command_in_its_fixed_folder(uninterrupted: Path, tmp_path: Path) -> None:
    """A cluster requeue: one folder per job (hydra.run.dir), the same command each time, ckpt_path=last."""
    job = tmp_path / "jobs" / "1234"
    command = [*ARGS, f"hydra.run.dir={job}", "ckpt_path=last", "debug.kill_at_step=10"]  # killed at 10, once
    first = run_train(command, tmp_path, check=False)
    assert first.returncode == -signal.SIGKILL, first.stderr[-2000:]
    assert f"resume   nothing to resume in {job} yet: a fresh start" in first.stdout
    again = run_train(command, tmp_path)  # the very same command line
    assert f"resume   {job / 'checkpoints/last.ckpt'} at step 10" in again.stdout
    assert results(job) == results(uninterrupted)
    assert_same_state(uninterrupted / "checkpoints/last.ckpt", job / "checkpoints/last.ckpt")
    assert not list(tmp_path.glob("runs/*"))  # nothing went to a timestamped folder


@pytest.mark.slow
def tensorboard_steps(run_dir: Path) -> dict[str, list[int]]:
    """Each scalar tag's steps as TensorBoard reads the run folder's event files (purges applied)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})  # 0: keep every point
    events.Reload()
    return {tag: [e.step for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_a_run_resumed_in_its_folder_leaves_one_tensorboard_line_per_tag(tmp_path: Path) -> None:
    """Killed at step 8, three steps after its checkpoint at 5, and resumed in the same folder: the steps the killed
    run logged after its checkpoint are purged, so TensorBoard reads each step once per tag."""
    job = tmp_path / "job"
    args = tiny("trainer.max_steps=12", "trainer.val_check_interval=5", "trainer.log_every_n_steps=1",
                "checkpoint.every_n_steps=5", f"hydra.run.dir={job}", "ckpt_path=last")
    assert run_train([*args, "debug.kill_at_step=8"], tmp_path, check=False).returncode == -signal.SIGKILL
    killed = tensorboard_steps(job)
    assert max(killed["train/loss"]) >= 5  # step k logs at index k - 1: it logged past its checkpoint at 5
    run_train(args, tmp_path)
    steps = tensorboard_steps(job)
    for tag, seen in steps.items():
        assert sorted(seen) == sorted(set(seen)), f"{tag}: steps {seen} appear twice"
    assert steps["train/loss"] == list(range(12))  # one line: the killed run's 0-4, the resumed run's 5-11
    assert steps["val/loss"][0] == 4  # the validation at step 5 ran before the checkpoint was taken: kept


@pytest.mark.slow
def test_external_sigkill_at_a_random_moment_then_resume(uninterrupted: Path, tmp_path: Path) -> None:
    """The kill comes from outside, whenever a checkpoint exists, possibly mid-write of the next one."""
    args = tiny("trainer.max_steps=20", "trainer.val_check_interval=10", "checkpoint.every_n_steps=1",
                "model.dropout=0.1")  # a checkpoint every step: a kill is likely to land mid-write
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), f"log_dir={tmp_path}", *args], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list(tmp_path.glob("runs/*/checkpoints/last.ckpt")) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_b = only_run(tmp_path)
    run_train([*args, f'ckpt_path="{run_b}"'], tmp_path)  # quoted: the folder name holds "," and "="
    (run_c,) = [p for p in tmp_path.glob("runs/*") if p != run_b]
    assert results(run_c) == results(uninterrupted)
    assert_same_state(uninterrupted / "checkpoints/last.ckpt", run_c / "checkpoints/last.ckpt")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_saves_a_checkpoint_and_prints_the_resume_command(sig: signal.Signals, tmp_path: Path) -> None:
    args = tiny("trainer.max_steps=100000", "checkpoint.every_n_steps=20", "data.train_tokens=8192",
                "data.val_tokens=1024", "data.batch_size=4")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(tmp_path / "stderr.txt", "w") as err:
        proc = subprocess.Popen([sys.executable, str(REPO / "train.py"), f"log_dir={tmp_path}", *args], cwd=REPO,
                                env=env, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.time() + 120
        while not list(tmp_path.glob("runs/*/checkpoints/last.ckpt")) and time.time() < deadline:
            time.sleep(0.05)  # a first checkpoint: training (and our signal handling) is under way
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == 128 + sig
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in stderr
    run_dir = only_run(tmp_path)
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "interrupted" and m["signal"] == sig.name
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    step = torch.load(ckpt, weights_only=True)["global_step"]
    assert step == m["steps"] and step >= 20
    assert f"stopped  {sig.name} at step {step}; checkpoint {ckpt}" in stderr
    command = stderr.split("resume   ")[1].splitlines()[0]
    assert command == m["resume"] and command.startswith("python train.py ") and "ckpt_path=" in command
    if sig == signal.SIGTERM:  # the printed command resumes (here for 2 more steps)
        resume = [a if not a.startswith("trainer.max_steps=") else f"trainer.max_steps={step + 2}"
                  for a in shlex.split(command)[2:] if not a.startswith("log_dir=")]
        proc = run_train(resume, tmp_path)
        assert f"resume   {ckpt} at step {step}" in proc.stdout
        (done,) = [p for p in tmp_path.glob("runs/*/metrics.json") if p.parent != run_dir]
        assert json.loads(done.read_text())["steps"] == step + 2


def test_sigterm_before_a_resumes_restore_is_heard_and_the_run_stays_exact(uninterrupted: Path, tmp_path: Path) -> None:
    """SIGTERM right after step 10's checkpoint stops at 11; SIGTERM in the resumed run's setup (before its restore,
    which takes seconds at BERT-base, and before Lightning's own handler) stops at 12 with last.ckpt, not killed
    and not later; the run then finishes bitwise where the uninterrupted one does."""
    first = run_train([*ARGS, "debug.sigterm_at=10"], tmp_path, check=False)
    assert first.returncode == 128 + signal.SIGTERM, first.stderr[-2000:]
    run_dir = only_run(tmp_path)
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    assert json.loads((run_dir / "metrics.json").read_text())["steps"] == 11
    again = [*ARGS, f'hydra.run.dir="{run_dir}"', f'ckpt_path="{ckpt}"']  # quoted: "," and "="
    second = run_train([*again, "debug.sigterm_at=setup"], tmp_path, check=False)
    assert second.returncode == 128 + signal.SIGTERM, second.stderr[-2000:]
    assert "Traceback" not in second.stderr
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "interrupted" and m["steps"] == 12
    assert torch.load(ckpt, weights_only=True)["global_step"] == 12
    run_train(again, tmp_path)
    assert results(run_dir) == results(uninterrupted)
    assert_same_state(uninterrupted / "checkpoints/last.ckpt", ckpt)


def test_sigterm_after_the_last_step_finishes_the_run_and_exits(tmp_path: Path) -> None:
    """A signal that comes after the last step's check: the run is recorded whole, and the process still exits
    128 + 15, so a ladder or sweep starts nothing more (tests/smoke/test_ladder.py checks the ladder)."""
    proc = run_train(tiny("trainer.max_steps=6", "debug.sigterm_at=6"), tmp_path, check=False)
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    assert "stopped  SIGTERM after the run's last step" in proc.stderr
    m = json.loads((only_run(tmp_path) / "metrics.json").read_text())
    assert m["status"] == "ok" and m["steps"] == 6 and "val_loss" in m


def test_a_checkpoint_from_before_the_refactor_resumes(tmp_path: Path) -> None:
    """The old code's checkpoint (step 4, tests/fixtures) resumes under today's train.py to step 6."""
    ckpt = tmp_path / "old.ckpt"
    ckpt.write_bytes(OLD_CKPT.read_bytes())  # a copy: the run must not touch the fixture
    proc = run_train([*OLD_CKPT_ARGS, "trainer.max_steps=6", f"ckpt_path={ckpt}"], tmp_path / "logs")
    assert f"resume   {ckpt} at step 4" in proc.stdout
    m = json.loads(only_run(tmp_path / "logs").joinpath("metrics.json").read_text())
    assert m["status"] == "ok" and m["steps"] == 6 and m["ffn"] == "swiglu" and m["resumed_from"] == str(ckpt)


@pytest.mark.slow
@pytest.mark.data
def test_resume_on_a_finite_text_corpus_is_exact(shared_data: Path, tmp_path: Path) -> None:
    """The same SIGKILL-and-resume on real text (Tiny Shakespeare, byte tokens, read back from the corpus cache)."""
    args = ["model=tiny", "data=tinyshakespeare", f"data.train={shared_data / 'tinyshakespeare/input.txt'}",
            "tokenizer=bytes", f"data.cache_dir={tmp_path / 'cache'}", "data.val_tokens=4096", "data.batch_size=8",
            "trainer.max_steps=12", "trainer.val_check_interval=6", "trainer.log_every_n_steps=3",
            "checkpoint.every_n_steps=3", "model.dropout=0.1", "trainer.enable_progress_bar=false", "impl.threads=1"]
    run_train(args, tmp_path / "a")
    run_a = only_run(tmp_path / "a")
    assert run_train([*args, "debug.kill_at_step=6"], tmp_path / "b", check=False).returncode == -signal.SIGKILL
    run_b = only_run(tmp_path / "b")
    run_train([*args, "ckpt_path=last"], tmp_path / "b")
    (run_c,) = [p for p in (tmp_path / "b").glob("runs/*") if p != run_b]
    assert results(run_c) == results(run_a)
    assert_same_state(run_a / "checkpoints/last.ckpt", run_c / "checkpoints/last.ckpt")
