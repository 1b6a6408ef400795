"""A full disk while checkpointing: one line naming the file, the last good checkpoint and the resume command;
exit code 1; metrics.json says failed; the printed command resumes; a sweep goes on. The disk fills up on purpose
(``debug.disk_full_at_checkpoint``), and, where the machine lets us mount one, on a real 12 MB tmpfs."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers import REPO, run_train, tiny

pytestmark = pytest.mark.smoke

# last.ckpt at 5, at 10, best.ckpt at 10 (the 3rd write: the disk is full), ...
ARGS = tiny("trainer.max_steps=20", "trainer.val_check_interval=10", "checkpoint.every_n_steps=5")


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_full_disk_is_one_line_and_the_printed_command_resumes(tmp_path: Path) -> None:
    proc = run_train([*ARGS, "debug.disk_full_at_checkpoint=3"], tmp_path, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    (run_dir,) = list(tmp_path.glob("runs/*"))
    last = run_dir / "checkpoints" / "last.ckpt"
    assert line.startswith(f"error: could not write {run_dir / 'checkpoints' / 'best.ckpt'}: No space left on device "
                           f"(ENOSPC); last good checkpoint {last} (step 10, loads); free space, then resume: ")
    assert torch.load(last, weights_only=True)["global_step"] == 10
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["last.ckpt"]  # no half file, no temporary
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "failed" and m["error"] == line.removeprefix("error: ") and m["checkpoint_step"] == 10
    command = line.split("free space, then resume: ")[1]
    assert command == m["resume"] and "disk_full_at_checkpoint" not in command

    resume = [a for a in shlex.split(command)[2:] if not a.startswith("log_dir=")]  # the disk has room again
    done = run_train(resume, tmp_path)
    assert f"resume   {last} at step 10" in done.stdout
    (finished,) = [p for p in tmp_path.glob("runs/*/metrics.json") if p.parent != run_dir]
    assert json.loads(finished.read_text())["steps"] == 20


def test_a_sweep_records_the_full_disk_and_goes_on(tmp_path: Path) -> None:
    proc = run_train(["-m", *ARGS, "debug.disk_full_at_checkpoint=null,3"], tmp_path, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    jobs = {p.parent.name: json.loads(p.read_text()) for p in tmp_path.glob("multiruns/*/*/metrics.json")}
    assert jobs["debug.disk_full_at_checkpoint=null"]["status"] == "ok"
    full = jobs["debug.disk_full_at_checkpoint=3"]
    assert full["status"] == "failed" and full["error"].startswith("could not write ")
    assert error_lines(proc.stderr) == [f"error: {full['error']}"]


# train.py with the disk full from the start: every file opened for writing fails its first write, nameless, as a
# buffered write does; the run-folder check (lifecycle/run_folder.py, a Hydra callback) meets it before Hydra writes
HYDRA_ON_A_FULL_DISK = """
import errno, io, os, sys
import hydra.core.utils
import ffn_zoo.training.lifecycle.run_folder as run_folder

class FullFile(io.BytesIO):
    def __init__(self, name):
        super().__init__()
        self.name = name

    def write(self, s):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

run_folder.open = hydra.core.utils.open = lambda file, *args, **kwargs: FullFile(file)
from ffn_zoo.train import main
main()
"""


@pytest.mark.parametrize("sweep", [False, True], ids=["run", "sweep"])
def test_a_full_disk_before_hydra_writes_its_config_is_one_line(tmp_path: Path, sweep: bool) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    args = ["-m", "seed=0,1"] if sweep else []
    proc = subprocess.run([sys.executable, "-c", HYDRA_ON_A_FULL_DISK, *args, f"log_dir={tmp_path}", *tiny()],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (folder,) = list(tmp_path.glob("multiruns/*" if sweep else "runs/*"))
    assert error_lines(proc.stderr) == [
        f"error: could not write {folder}: No space left on device (ENOSPC), before training started; free space, "
        f"then run the same command again"]
    assert list(folder.iterdir()) == []  # Hydra wrote nothing: no .hydra/, no multirun.yaml, no job folder


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 12 MB tmpfs (needs root and a kernel that allows it; skipped otherwise)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(disk)], capture_output=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.slow
def test_a_real_full_disk_on_a_small_tmpfs(small_disk: Path) -> None:
    # d_model 128: a checkpoint is 6.4 MB, so last.ckpt (step 10) fits and the next write at step 20 does not
    args = tiny("model.d_model=128", "checkpoint.every_n_steps=10", "trainer.max_steps=40",
                "trainer.val_check_interval=20")
    proc = run_train(args, small_disk, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    (run_dir,) = list(small_disk.glob("runs/*"))
    last = run_dir / "checkpoints" / "last.ckpt"
    assert "No space left on device (ENOSPC); " in line and f"last good checkpoint {last} (step 10, loads)" in line
    assert re.search(r"disk     a checkpoint ~6\.\d MB .*NOT ENOUGH", proc.stdout)  # warned at start-up
    assert torch.load(last, weights_only=True)["global_step"] == 10
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["last.ckpt"]
    assert json.loads((run_dir / "metrics.json").read_text())["status"] == "failed"


@pytest.mark.slow
def test_a_real_full_disk_before_the_run_starts_is_one_line(small_disk: Path) -> None:
    fd = os.open(small_disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:  # fill the disk to the last byte
        while os.write(fd, b"\0" * 2**16):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    proc = run_train(tiny(), small_disk, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert re.fullmatch(rf"error: could not write {re.escape(str(small_disk))}/runs/.*: No space left on device "
                        rf"\(ENOSPC\), before training started; free space, then run the same command again", line)
