"""README's SLURM commands against a real one-node cluster (scripts/slurm_local.sh via the ``slurm`` fixture): a
submitit sweep equals the local one, the sbatch requeue recipe and submitit's requeue resume bit for bit, ``srun`` DDP
takes its ranks from SLURM, and a cancelled job leaves a loadable checkpoint. Run with ``pytest -m slurm -n0`` as root;
each test on model=tiny, impl.threads=1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tests.helpers import REPO, TINY, assert_same_state, results, run_train, tiny

pytestmark = pytest.mark.slurm

# what makes README's GPU settings fit a CPU node: no GPU, one core and 1 GB per job
CPU_JOBS = ["hydra/launcher=submitit_slurm", "hydra.launcher.gpus_per_node=0", "hydra.launcher.cpus_per_task=1",
            "hydra.launcher.mem_gb=1", "hydra.launcher.timeout_min=10"]
SMALL = tiny("trainer.max_steps=12", "trainer.val_check_interval=6", "data.train_tokens=16384", "data.val_tokens=2048",
             "data.batch_size=8", "model.dropout=0.1")  # dropout: the training RNG stream matters too
FINAL = {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def train_py(args: list[str], env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, **kwargs)


def sweep_jobs(root: Path) -> dict[str, Path]:
    (sweep,) = list(root.glob("multiruns/*"))
    return {p.name: p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith(".")}


def job_info(job_id: str, env: dict[str, str]) -> dict[str, str]:
    """``scontrol show job -o``'s Key=Value fields (a finished job stays listed for MinJobAge, 300 s)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def wait_for(what: str, ready, timeout: float, every: float = 0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if value := ready():
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def test_submitit_sweep_equals_the_local_sweep(slurm: dict[str, str], tmp_path: Path) -> None:
    sweep = ["-m", *SMALL, "ffn=gelu,swiglu", "seed=0,1"]
    run_train(sweep, tmp_path / "local")
    proc = train_py([sweep[0], f"log_dir={tmp_path / 'slurm'}", *sweep[1:], *CPU_JOBS], slurm, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    local, cluster = sweep_jobs(tmp_path / "local"), sweep_jobs(tmp_path / "slurm")
    assert sorted(cluster) == sorted(local) == ["ffn=gelu,seed=0", "ffn=gelu,seed=1", "ffn=swiglu,seed=0",
                                                "ffn=swiglu,seed=1"]
    for name, run_dir in cluster.items():
        assert results(run_dir) == results(local[name]), name
        assert results(run_dir)["status"] == "ok" and results(run_dir)["steps"] == 12
        assert_same_state(local[name] / "checkpoints/last.ckpt", run_dir / "checkpoints/last.ckpt")
    submitted = list((tmp_path / "slurm").glob("multiruns/*/.submitit/*_*/*_log.out"))
    assert len(submitted) == 4  # four SLURM array tasks ran them, their logs beside the sweep


def readme_requeue_script(args: list[str]) -> str:
    """README's requeue script with the GPU lines made CPU ones: no --gres, no trainer=gpu/bf16, model=tiny instead
    of bert_base on c4, and a 2-minute limit with SIGTERM 60 s before it. Everything else verbatim."""
    text = (REPO / "README.md").read_text()
    script = text.split("**Requeued jobs")[1].split("```bash\n")[1].split("```")[0]
    for old, new in [(" --gres=gpu:1", ""), ("--signal=TERM@120", "--signal=TERM@60"), ("--time=04:00:00", "--time=2"),
                     ("ffn=geglu model=bert_base data=c4", " ".join(args)), (" trainer=gpu impl.precision=bf16-mixed", "")]:
        assert old in script, f"README's requeue script no longer has {old!r}: update this test with it"
        script = script.replace(old, new)
    return script


@pytest.fixture(scope="module")
def long_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    """~80 s of model=tiny training on this machine (more than a 2-minute job's signal leaves it) and the folder of
    that run, uninterrupted: what a requeued job must end equal to."""
    tmp = tmp_path_factory.mktemp("long_run")
    run_train(tiny("checkpoint.every_n_steps=null"), tmp / "probe")  # this machine's steps per second
    rate = json.loads(next((tmp / "probe").glob("runs/*/metrics.json")).read_text())["train_tokens_per_s"] / 512
    steps = int(min(max(80 * rate, 200), 50_000))
    args = tiny(f"trainer.max_steps={steps}", f"trainer.val_check_interval={steps // 4}", "checkpoint.every_n_steps=50",
                f"trainer.log_every_n_steps={max(steps // 40, 1)}", "model.dropout=0.1")
    run_train([*args, f"hydra.run.dir={tmp / 'reference'}"], tmp, timeout=900)
    return args, tmp / "reference"


def test_the_readme_requeue_script_resumes_bit_for_bit(slurm: dict[str, str], long_run: tuple[list[str], Path],
                                                        tmp_path: Path) -> None:
    """SIGTERM 30-60 s into a 2-minute job (slurmctld checks limits every 30 s): last.ckpt, exit 143, the script
    requeues the job, it resumes in logs/jobs/$SLURM_JOB_ID, as often as it takes, and ends where an uninterrupted
    run ends, bitwise."""
    args, reference = long_run
    jobs = tmp_path / "jobs_cwd"
    jobs.mkdir()
    (jobs / "train.py").symlink_to(REPO / "train.py")  # the script says `python train.py`: run from this folder
    (jobs / "requeue.sh").write_text(readme_requeue_script(args))
    job_id = subprocess.run(["sbatch", "--parsable", "requeue.sh"], cwd=jobs, env=slurm, capture_output=True, text=True,
                            check=True).stdout.strip()
    info = wait_for(f"job {job_id} to end", lambda: (i := job_info(job_id, slurm)).get("JobState") in FINAL and i,
                    timeout=900, every=2)
    log = (jobs / f"slurm-{job_id}.out").read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", (info, log[-3000:])
    assert int(info["Restarts"]) >= 1, f"never requeued: training ran in under the limit?\n{log[-3000:]}"
    run_dir = jobs / "logs" / "jobs" / job_id
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    assert f"resume   nothing to resume in {run_dir} yet: a fresh start" in log  # the first run
    assert re.search(rf"stopped  SIGTERM at step \d+; checkpoint {re.escape(str(ckpt))}", log), log[-3000:]
    assert re.search(rf"resume   {re.escape(str(ckpt))} at step \d+", log), log[-3000:]  # a requeued run
    assert results(run_dir) == results(reference)
    assert_same_state(reference / "checkpoints/last.ckpt", ckpt)


def test_submitits_requeue_resumes_from_the_last_periodic_checkpoint(slurm: dict[str, str],
                                                                     long_run: tuple[list[str], Path],
                                                                     tmp_path: Path) -> None:
    """hydra.launcher.max_num_timeout: submitit's USR2 30-60 s into a 2-minute job requeues it and exits at once
    (train.py saves nothing then); the requeued job resumes from its last periodic checkpoint in the fixed sweep
    folder and ends where an uninterrupted run ends, bitwise; the sweep command returns when it is done."""
    args, reference = long_run
    proc = train_py(["-m", f"log_dir={tmp_path}", *args, f"hydra.sweep.dir={tmp_path / 'sweep'}", "ckpt_path=last",
                     *[a for a in CPU_JOBS if "timeout_min" not in a], "hydra.launcher.timeout_min=2",
                     "hydra.launcher.signal_delay_s=60", "hydra.launcher.max_num_timeout=3"], slurm, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (metrics,) = (tmp_path / "sweep").glob("*/metrics.json")
    (log,) = (tmp_path / "sweep" / ".submitit").glob("*/*_0_log.out")
    text = log.read_text() + log.with_name(log.name.replace(".out", ".err")).read_text()
    assert "Requeued job" in text and re.search(r"resume   \S+last\.ckpt at step \d+", text), text[-3000:]
    assert results(metrics.parent) == results(reference)
    assert_same_state(reference / "checkpoints/last.ckpt", metrics.parent / "checkpoints/last.ckpt")


def test_srun_ddp_takes_its_ranks_from_slurm(slurm: dict[str, str], tmp_path: Path) -> None:
    """2 tasks of one srun, gloo: the same as one process at the same global batch (tests/smoke/test_ddp.py)."""
    args = [*TINY, "trainer.accelerator=cpu", "logger=csv"]
    run_train([*args, f"hydra.run.dir={tmp_path / 'single'}"], tmp_path)
    ddp = [sys.executable, str(REPO / "train.py"), f"log_dir={tmp_path}", *args, "trainer=ddp", "trainer.devices=2"]
    refused = subprocess.run(["srun", "-n", "2", *ddp, f"hydra.run.dir={tmp_path / 'refused'}"], cwd=REPO, env=slurm,
                             capture_output=True, text=True, timeout=600)
    assert refused.returncode != 0 and "HINT: Use `--ntasks-per-node=2` instead" in refused.stdout + refused.stderr
    proc = subprocess.run(["srun", "--ntasks-per-node=2", *ddp, f"hydra.run.dir={tmp_path / 'ddp'}"], cwd=REPO,
                          env=slurm, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    single, ddp_run = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("single", "ddp"))
    assert single["world_size"] == 1 and ddp_run["world_size"] == 2
    assert ddp_run["steps"] == single["steps"] == 40 and ddp_run["tokens_seen"] == single["tokens_seen"]
    assert abs(ddp_run["val_loss"] - single["val_loss"]) < 1e-4, (single["val_loss"], ddp_run["val_loss"])


def test_a_cancelled_job_leaves_a_loadable_checkpoint_and_the_others_finish(slurm: dict[str, str],
                                                                           tmp_path: Path) -> None:
    args = tiny("trainer.max_steps=1000", "trainer.val_check_interval=500", "checkpoint.every_n_steps=10",
                "trainer.log_every_n_steps=50")
    with open(tmp_path / "driver.log", "w") as log:
        driver = subprocess.Popen([sys.executable, str(REPO / "train.py"), "-m", f"log_dir={tmp_path}", *args,
                                   "ffn=gelu,swiglu", *CPU_JOBS], cwd=REPO, env=slurm, stdout=log, stderr=log)
    try:
        ckpt = wait_for("ffn=gelu's first checkpoint",
                        lambda: next(iter(tmp_path.glob("multiruns/*/ffn=gelu/checkpoints/last.ckpt")), None),
                        timeout=300, every=0.05)
        (task,) = [p.name for p in ckpt.parents[2].glob(".submitit/*_0")]  # array task 0: the sweep's first job
        subprocess.run(["scancel", task], env=slurm, check=True)
        run_dir = ckpt.parents[1]
        jobs = wait_for("both jobs' metrics.json", lambda: all((run_dir.parent / j / "metrics.json").exists()
                                                                for j in ("ffn=gelu", "ffn=swiglu")), timeout=300)
        assert jobs
    finally:
        driver.kill()  # without slurmdbd (sacct) submitit never learns that the cancelled job ended: it would wait
        driver.wait()
    assert wait_for(f"{task} to be CANCELLED", lambda: job_info(task, slurm).get("JobState") == "CANCELLED", 60)
    cancelled = json.loads((run_dir / "metrics.json").read_text())
    assert cancelled["status"] == "interrupted" and cancelled["signal"] == "SIGTERM", cancelled
    state = torch.load(ckpt, map_location="cpu", weights_only=True)  # loads: written whole before the job exited
    assert 10 <= state["global_step"] == cancelled["steps"] < 1000
    other = json.loads((run_dir.parent / "ffn=swiglu" / "metrics.json").read_text())
    assert other["status"] == "ok" and other["steps"] == 1000
