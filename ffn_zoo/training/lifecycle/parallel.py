"""``hydra/launcher=parallel``: a sweep's jobs side by side on this machine, ``hydra.launcher.n_jobs`` at a time.

Each job runs in a process of its own, forked from the sweep's (the launcher class lives in
hydra_plugins/ffn_zoo_parallel, where Hydra looks for launchers): at most n_jobs at once, the next one started as
one ends. A process per job, not a pool, so a job killed outright (SIGKILL, as the OOM killer does) takes nothing
with it: a pool (joblib's loky, which this launcher used before) stops every running job when one of its workers
dies. What this adds, so a parallel sweep behaves as the serial one:

- each job gets ``impl.threads=auto`` (unless the sweep sets it): cores ÷ n_jobs (``jobs.py``);
- each job's console goes to ``<run folder>/console.log``; the terminal gets one line per finished or failed job;
- a failed job is recorded in its folder (train.py's JobFailures, in the job's process) and the others go on; a job
  whose process was killed is recorded by the launcher (metrics.json: the signal, the last good checkpoint, the
  resume command); the sweep's process exits non-zero at the end (``failed_in_workers``), and the same sweep with
  ``ckpt_path=last`` trains only what is missing;
- SIGINT/SIGTERM to the sweep is passed once to every running job, which finishes its step, writes ``last.ckpt``
  and stops; no new job starts; the sweep exits 128 + the signal. A second signal aborts the jobs at once.

The workers leave the terminal's process group, so a Ctrl-C reaches them only through the launcher, once.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import sys
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, open_dict

from ffn_zoo.atomic import write_json
from ffn_zoo.training.lifecycle.jobs import cores, record_failed, side_by_side
from ffn_zoo.training.lifecycle.failures import last_good_checkpoint
from ffn_zoo.training.lifecycle.runs import register_resolvers, resume_command

log = logging.getLogger(__name__)

CONSOLE_LOG = "console.log"  # in each job's run folder: what the job printed
THREADS_KEY = "impl.threads"


def with_auto_threads(overrides: Sequence[str]) -> list[str]:
    """A job's overrides with ``impl.threads=auto`` added, unless the sweep sets the threads itself."""
    given = any(o.split("=", 1)[0].lstrip("+~") == THREADS_KEY for o in overrides)
    return list(overrides) if given else [*overrides, f"{THREADS_KEY}=auto"]


# ---------------------------------------------------------------------------------------------- in the worker

_stop_requested: list[int] = []  # signals this worker got while no training loop was listening
_job_running = False


def _between_steps(signum: int, frame: Any) -> None:
    """A signal before a job's training loop started (or between a ladder's pieces): stop the job now; idle: noted."""
    _stop_requested.append(signum)
    if _job_running:
        raise KeyboardInterrupt


@contextmanager
def console_to(path: Path) -> Iterator[None]:
    """This process's stdout and stderr (file descriptors 1 and 2, so C code and subprocesses too) into ``path``."""
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as f:
        os.dup2(f.fileno(), 1), os.dup2(f.fileno(), 2)
    try:
        yield
    finally:
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        os.close(saved[0]), os.close(saved[1])


def outcome(run_dir: Path, value: Any) -> dict[str, Any]:
    """What the launcher prints of a job: its status and one line, from what it returned or its metrics.json."""
    metrics = value if isinstance(value, dict) and "status" in value else {}
    if not metrics and (run_dir / "metrics.json").is_file():
        try:
            metrics = json.loads((run_dir / "metrics.json").read_text())
        except (OSError, ValueError):
            metrics = {}
    status = metrics.get("status", "failed")
    if status == "ok":
        loss = metrics.get("val_loss")
        tps = metrics.get("train_tokens_per_s")
        detail = ", ".join(s for s in [f"val/loss {loss:.4f}" if loss is not None else "",
                                        f"{tps:,.0f} tok/s" if tps else "",
                                        f"{metrics.get('wall_s', 0):.3g} s"] if s)
    elif status == "interrupted":
        detail = f"{metrics.get('signal')} at step {metrics.get('steps')}; resume: {metrics.get('resume')}"
    else:
        detail = metrics.get("error") or f"no metrics.json; see {run_dir / CONSOLE_LOG}"
    return {"status": status, "detail": detail, "metrics": metrics}


def run_in_worker(idx: int, overrides: Sequence[str], hydra_context: HydraContext, config: DictConfig,
                  task_function: TaskFunction, singleton_state: dict[Any, Any],
                  started: Callable[[Path], None] = lambda run_dir: None) -> dict[str, Any]:
    """One job in its process, as Hydra's ``run_job`` runs it, with its console in its run folder; ``started`` is
    told the run folder before the job trains.

    Never raises: a failure, a stop by signal or an abort is returned, so the jobs beside go on.
    """
    global _job_running
    if os.getpgrp() != os.getpid():
        os.setpgrp()  # out of the terminal's group: a Ctrl-C reaches this job only through the launcher, once
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _between_steps)  # GracefulStop takes over while the training loop runs
    register_resolvers()  # the ${ffnzoo_*:} run-folder names are resolved here, in the worker
    setup_globals()
    Singleton.set_state(singleton_state)
    name = " ".join(filter_overrides(overrides))
    run_dir = None
    _stop_requested.clear()
    _job_running = True
    try:
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{idx}"
            sweep_config.hydra.job.num = idx
        HydraConfig.instance().set_config(sweep_config)
        run_dir = Path(str(sweep_config.hydra.sweep.dir)) / str(sweep_config.hydra.sweep.subdir)
        run_dir.mkdir(parents=True, exist_ok=True)
        started(run_dir)
        with console_to(run_dir / CONSOLE_LOG):
            try:
                ret = run_job(hydra_context=hydra_context, task_function=task_function, config=sweep_config,
                              job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
                value = ret._return_value
                if ret.status == JobStatus.FAILED:
                    value = {"status": "failed", "error": f"{type(value).__name__}: {value}"}
            except (SystemExit, KeyboardInterrupt) as e:  # GracefulStop.exit, or a signal before training began
                print(f"stopped  {type(e).__name__}({e})", flush=True)
                value = None
        result = outcome(run_dir, value)
        if result["status"] == "failed" and value is None and _stop_requested:
            result = {"status": "interrupted", "detail": "stopped before its first checkpoint", "metrics": {}}
    except BaseException as e:  # the job's config did not compose, its folder could not be made, ...
        result = {"status": "failed", "detail": f"{type(e).__name__}: {e}", "metrics": {}}
    finally:
        _job_running = False
    name = run_dir.name if run_dir else name  # the folder names what differs between jobs
    return {"idx": idx, "name": name, "run_dir": str(run_dir) if run_dir else None, **result}


def job_process(conn: Connection, *args: Any) -> None:
    """The body of a job's process: :func:`run_in_worker`, its run folder then its result sent over ``conn``."""
    result = run_in_worker(*args, started=lambda run_dir: conn.send(("started", str(run_dir))))
    conn.send(("done", result))
    conn.close()


# ---------------------------------------------------------------------------------------------- in the sweep


@dataclass
class Job:
    """A job's process as the sweep sees it: where its messages arrive, its run folder once it said."""

    idx: int
    overrides: list[str]
    process: Any  # multiprocessing.Process
    conn: Connection
    run_dir: Path | None = None
    result: dict[str, Any] | None = field(default=None)


def killed(job: Job, exitcode: int | None) -> dict[str, Any]:
    """The result of a job whose process ended without one (killed by a signal, or died): recorded in its folder
    (metrics.json: the signal, the last good checkpoint, the resume command), as a failed job's would be."""
    if exitcode is not None and exitcode < 0:
        how = f"killed by {signal.Signals(-exitcode).name}" + (" (the OOM killer, or kill -9)" if exitcode == -9 else "")
    else:
        how = f"its process exited with code {exitcode} before reporting"
    name = job.run_dir.name if job.run_dir else " ".join(filter_overrides(job.overrides))
    if job.run_dir is None:
        return {"idx": job.idx, "name": name, "run_dir": None, "status": "failed", "metrics": {},
                "detail": f"{how} before its run folder was made"}
    last, step = last_good_checkpoint(job.run_dir, None, job.run_dir) or (None, None)  # its last.ckpt, if it loads
    command = resume_command(last, job.overrides)
    where = f"last good checkpoint {last} (step {step})" if last else "no checkpoint was written"
    record = {"status": "failed", "error": f"{how}; {where}; resume: {command}, or the same sweep with ckpt_path=last",
              "checkpoint": str(last) if last else None, "checkpoint_step": step, "resume": command}
    try:
        write_json(job.run_dir / "metrics.json", record)
    except OSError:
        pass  # the terminal's line still says it
    return {"idx": job.idx, "name": name, "run_dir": str(job.run_dir), "status": "failed", "detail": record["error"],
            "metrics": record}


class SignalsToJobs:
    """While the sweep runs: SIGINT/SIGTERM stop dispatching and are passed to every worker (each job then writes
    ``last.ckpt`` and stops); a second signal is passed on too (the jobs abort) and stops the sweep at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        first = self.signum is None
        self.signum = self.signum or signum
        for worker in multiprocessing.active_children():  # joblib's loky workers are this process's children
            try:
                os.kill(worker.pid, signum)
            except (ProcessLookupError, TypeError):
                pass
        if not first:
            raise KeyboardInterrupt
        print(f"\n{signal.Signals(signum).name}: each running job finishes its step and saves last.ckpt; no new job "
              f"starts (send it again to abort at once)", file=sys.stderr, flush=True)

    def __enter__(self) -> "SignalsToJobs":
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def job_line(result: dict[str, Any], done: int, total: int) -> str:
    where = f" -> {result['run_dir']}" if result["run_dir"] and result["status"] == "ok" else ""
    return f"job {done}/{total}  {result['status']:<11} {result['name']}: {result['detail']}{where}"


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
    """The jobs of one batch of the sweep, ``launcher.settings["n_jobs"]`` at a time; -> a JobReturn per job, in order.

    ``launcher`` is hydra_plugins/ffn_zoo_parallel's ParallelLauncher, set up by Hydra.
    """
    setup_globals()
    assert launcher.config is not None and launcher.task_function is not None and launcher.hydra_context is not None
    config = launcher.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    n_jobs = side_by_side(launcher.settings.get("n_jobs", 1))
    total = len(job_overrides)
    log.info(f"Launching {total} jobs, {n_jobs} at a time on {cores()} cores (impl.threads=auto: "
             f"{max(1, cores() // n_jobs)} each); each job's console in its folder's {CONSOLE_LOG}")
    for idx, overrides in enumerate(job_overrides):
        log.info(f"\t#{initial_job_idx + idx} : {' '.join(filter_overrides(overrides))}")
    singleton_state = Singleton.get_state()
    results: dict[int, dict[str, Any]] = {}
    fork = multiprocessing.get_context("fork")  # the job inherits the composed configs and task: nothing pickled
    waiting = deque((initial_job_idx + i, with_auto_threads(o)) for i, o in enumerate(job_overrides))
    running: dict[Connection, Job] = {}

    def finish(job: Job, result: dict[str, Any]) -> None:
        job.process.join()
        job.conn.close()
        results[result["idx"]] = result
        print(job_line(result, len(results), total), flush=True)

    with SignalsToJobs() as stop:
        while running or (waiting and stop.signum is None):  # no job starts after a signal
            while waiting and len(running) < n_jobs and stop.signum is None:
                idx, overrides = waiting.popleft()
                receive, send = fork.Pipe(duplex=False)
                process = fork.Process(target=job_process, name=f"job-{idx}", args=(
                    send, idx, overrides, launcher.hydra_context, config, launcher.task_function, singleton_state))
                process.start()
                send.close()  # the job's end: when its process ends, receive sees EOF
                running[receive] = Job(idx, overrides, process, receive)
            for conn in wait(list(running)):
                job = running[conn]
                try:
                    kind, value = conn.recv()
                except EOFError:  # the process ended without a result: killed outright, or died in C code
                    del running[conn]
                    job.process.join()
                    finish(job, killed(job, job.process.exitcode))
                    continue
                if kind == "started":
                    job.run_dir = Path(value)
                else:
                    del running[conn]
                    finish(job, value)
    record_failed([r["run_dir"] or r["name"] for r in results.values() if r["status"] == "failed"])
    if stop.signum is not None:
        print(f"stopped  {len(results)} of {total} jobs ran; the same command with ckpt_path=last resumes the "
              f"stopped ones", file=sys.stderr, flush=True)
        raise SystemExit(128 + stop.signum)  # as a serial sweep stops (GracefulStop.exit)
    return [JobReturn(overrides=list(o), status=JobStatus.COMPLETED, _return_value=results.get(initial_job_idx + i),
                      hydra_cfg=config, working_dir=str(sweep_dir))
            for i, o in enumerate(job_overrides)]
