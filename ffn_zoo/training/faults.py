"""Faults during training: non-finite loss or gradients, SIGTERM/SIGINT, a full disk, failed sweep jobs. The fault
injection (``debug.*``) the tests use to produce each of them on purpose lives in ``debug.py``."""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import traceback
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterator

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.atomic import atomic_write, os_error, write_json
from ffn_zoo.errors import CheckpointError, ConfigError, FFNZooError
from ffn_zoo.training.checkpoint import Checkpointing, load_checkpoint
from ffn_zoo.training.debug import FaultInjection
from ffn_zoo.training.rng import TrainRNG
from ffn_zoo.training.runs import CKPT_DIR, LAST_CKPT, resume_command, resume_point

NONFINITE_POLICIES = ("stop", "skip")


class NonFiniteError(FFNZooError):
    """A non-finite loss or gradient stopped the run; the message names the step and the last good checkpoint."""


def total_norm(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Global L2 norm: fused over all tensors on torch >= 2.6, one tensor at a time before."""
    if hasattr(torch.nn.utils, "get_total_norm"):
        return torch.nn.utils.get_total_norm(tensors)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in tensors]))


class NonFiniteGuard(L.Callback):
    """Checks the loss (before backward) and the gradients (before the optimizer step) of every step.

    ``stop``: raise :class:`NonFiniteError` before the weights change. ``skip``: drop the update
    (every ``.grad`` set to None, so the optimizer leaves weights and moments untouched), count it
    in ``train/skipped_steps``, and stop anyway after ``max_skipped_steps``. The step still counts,
    so the data position and the LR schedule stay those of an uninterrupted run.
    """

    def __init__(self, policy: str, checkpoints: Checkpointing | None, max_skipped_steps: int = 100) -> None:
        if policy not in NONFINITE_POLICIES:
            raise ConfigError(f"faults.on_nonfinite={policy!r}; valid: {', '.join(NONFINITE_POLICIES)}")
        self.policy, self.checkpoints, self.max_skipped_steps = policy, checkpoints, max_skipped_steps
        self.skipped = 0
        self._bad: str | None = None

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        self._bad = None if torch.isfinite(loss).all() else f"loss ({loss.item()})"

    def on_before_optimizer_step(self, trainer: L.Trainer, pl_module: L.LightningModule, optimizer: Any) -> None:
        bad, self._bad = self._bad, None
        if bad is None:
            grads = [(n, p.grad) for n, p in pl_module.named_parameters() if p.grad is not None]
            # one fused pass over all gradients and one sync per step; the culprit is looked up only on failure
            if grads and not torch.isfinite(total_norm([g for _, g in grads])):
                bad = "gradient of " + next(n for n, g in grads if not torch.isfinite(g).all())
        if bad is None:
            return
        step = trainer.global_step + 1
        last = self.checkpoints.describe_last_good() if self.checkpoints else "none (checkpointing is off)"
        if self.policy == "skip" and self.skipped < self.max_skipped_steps:
            self.skipped += 1
            for p in pl_module.parameters():
                p.grad = None
            pl_module.log("train/skipped_steps", float(self.skipped))
            if trainer.is_global_zero:
                print(f"warning  non-finite {bad} at step {step}: update skipped ({self.skipped} so far)", flush=True)
            return
        hint = (f"more than faults.max_skipped_steps={self.max_skipped_steps} skipped" if self.policy == "skip"
                else "the weights were not updated; faults.on_nonfinite=skip drops such steps instead")
        raise NonFiniteError(f"non-finite {bad} at step {step} ({hint}); last good checkpoint: {last}")

    def state_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.skipped = int(state.get("skipped", 0))


class GracefulStop(L.Callback):
    """SIGTERM (a cluster pre-empting the job) or SIGINT (Ctrl-C): finish the current step, write
    ``last.ckpt`` and stop; ``run`` then prints the command that resumes. A second signal aborts at once."""

    def __init__(self, checkpoints: Checkpointing) -> None:
        self.checkpoints = checkpoints
        self.signum: int | None = None
        self.saved: Path | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt  # asked twice: stop now, without a checkpoint
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: finishing this step and saving a checkpoint "
              f"(send it again to abort at once)", file=sys.stderr, flush=True)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # installed after Lightning's own SIGTERM handler (which would raise without saving), restored at the end
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handle)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        # all ranks decide together (any rank signalled), or one would wait alone in the checkpoint's barrier
        if self.saved is None and trainer.strategy.reduce_boolean_decision(self.signum is not None, all=False):
            self.signum = self.signum or signal.SIGTERM
            self.saved = self.checkpoints.save_last_now(trainer)
            trainer.should_stop = True

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._restore()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._restore()

    def interrupted(self, trainer: L.Trainer) -> bool:
        """True when a signal stopped training before its last step."""
        return self.signum is not None and trainer.global_step < (trainer.max_steps or 0)

    def exit(self, trainer: L.Trainer, run_dir: Path) -> None:
        """Record the interruption in ``metrics.json``, print how to resume, exit with 128 + signal number."""
        assert self.signum is not None
        ckpt = self.saved or self.checkpoints.save_last_now(trainer)
        command = resume_command(ckpt)
        if trainer.is_global_zero:
            record = {"status": "interrupted", "signal": signal.Signals(self.signum).name, "steps": trainer.global_step,
                      "checkpoint": str(ckpt), "resume": command}
            write_json(run_dir / "metrics.json", record)
            print(f"stopped  {record['signal']} at step {trainer.global_step}; checkpoint {ckpt}\n"
                  f"resume   {command}", file=sys.stderr, flush=True)
        raise SystemExit(128 + self.signum)  # SystemExit: a sweep stops here too (Hydra catches only Exception)


def reliability_callbacks(cfg: DictConfig, run_dir: Path) -> list[L.Callback]:
    """Checkpoints, the training RNG stream, the non-finite guard, signal handling and fault injection.

    Order matters: TrainRNG saves the step's RNG state before Checkpointing writes it, and the
    fault injection kills only after that step's checkpoint is on disk.
    """
    c = cfg.checkpoint
    every = c.every_n_steps
    if every is not None and int(every) <= 0:
        raise ConfigError(f"checkpoint.every_n_steps={every} must be > 0, or null (only at the end)")
    checkpoints = Checkpointing(run_dir / CKPT_DIR, every and int(every), bool(c.save_last), bool(c.save_best),
                                config=OmegaConf.to_container(cfg, resolve=True))
    d = cfg.debug
    return [
        TrainRNG(),
        NonFiniteGuard(cfg.faults.on_nonfinite, checkpoints, int(cfg.faults.max_skipped_steps)),
        checkpoints,
        GracefulStop(checkpoints),
        FaultInjection(d.inject_nan_at_step, d.crash_at_step, d.kill_at_step, d.disk_full_at_checkpoint),
    ]


# ---------------------------------------------------------------------------- a full disk


# the OS refusing a write: the disk, a quota, a file size limit, a read-only mount; never a read error
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


class WriteFailed(FFNZooError):
    """The OS refused a write; the message names the file, the last good checkpoint and the resume command.

    Not the user's input and not a bug, but reported like a user error: one line, and a sweep goes on.
    ``record`` holds the same facts for ``metrics.json``.
    """

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record


def last_good_checkpoint(run_dir: Path, ckpt_path: Any, log_dir: Path) -> tuple[Path, int] | None:
    """The newest ``last.ckpt`` that loads, of this run folder or the one it resumes from (``ckpt_path``, looked
    up under ``log_dir``), with its step."""
    candidates = [run_dir / LAST_CKPT]
    with suppress(FFNZooError):
        candidates.append(resume_point(ckpt_path, log_dir, run_dir))
    good = []
    for path in dict.fromkeys(c for c in candidates if c is not None and c.is_file()):
        with suppress(CheckpointError):
            good.append((path, int(load_checkpoint(path)["global_step"])))  # verified: it loads
    return max(good, key=lambda g: g[1]) if good else None


def _what_failed(error: BaseException, refused: OSError, run_dir: Path | None) -> str:
    """The file a refused write was for: its name when the OS gave one, else the writer, from the traceback."""
    if refused.filename:
        return str(refused.filename)
    frames = [f for e in (error, refused) for f, _ in traceback.walk_tb(e.__traceback__)]
    tensorboard = [f for f in frames if "tensorboard" in f.f_code.co_filename]
    if tensorboard:  # its writer thread appends to the events file; the innermost frame holds its name
        name = next((f.f_locals["filename"] for f in reversed(tensorboard) if "filename" in f.f_locals), None)
        return f"the TensorBoard events {name}" if name else f"the TensorBoard events in {run_dir}"
    # a buffered file reports its full disk nameless, on write or close: the innermost open file being written
    written = [v.name for f in reversed(frames) for v in f.f_locals.values()
               if isinstance(getattr(v, "name", None), str) and callable(getattr(v, "write", None))]
    if written:
        return written[0]
    return f"a file of the run in {run_dir} (the OS named none)" if run_dir else "a file (the OS named none)"


def _reason(refused: OSError) -> str:
    return f"{refused.strerror} ({errno.errorcode.get(refused.errno, refused.errno)})"


def write_failure(error: BaseException, run_dir: Path, ckpt_path: Any, log_dir: Path) -> WriteFailed | None:
    """``error`` as a one-line :class:`WriteFailed` when the OS refused a write (ENOSPC, ...), else None.

    ``ckpt_path`` and ``log_dir`` as the run has them: the last good checkpoint may be the one it resumed from.
    """
    refused = os_error(error)
    if refused is None or refused.errno not in WRITE_ERRNOS:
        return None
    last = last_good_checkpoint(run_dir, ckpt_path, log_dir)
    command = resume_command(last[0] if last else None)
    record: dict[str, Any] = {"checkpoint": str(last[0]) if last else None, "checkpoint_step": last and last[1],
                              "resume": command}
    if last:
        where = f"last good checkpoint {last[0]} (step {last[1]}, loads); free space, then resume: {command}"
    else:
        where = f"no checkpoint was written; free space, then run again: {command}"
    return WriteFailed(f"could not write {_what_failed(error, refused, run_dir)}: {_reason(refused)}; {where}", record)


@contextmanager
def write_failures_as_errors(run_dir: Path, ckpt_path: Any, log_dir: Path) -> Iterator[None]:
    """Turn an OS-refused write anywhere in the run (checkpoint, logger, metrics.json) into a WriteFailed.

    A writer thread (TensorBoard's) that dies of it stays quiet: the main thread re-raises its error and reports it.
    """
    previous = threading.excepthook

    def quiet_refused_write(args: Any) -> None:
        if not (isinstance(args.exc_value, OSError) and args.exc_value.errno in WRITE_ERRNOS):
            previous(args)

    threading.excepthook = quiet_refused_write
    try:
        yield
    except Exception as e:
        failed = write_failure(e, run_dir, ckpt_path, log_dir)
        if failed is None:
            threading.excepthook = previous
            raise
        raise failed from e  # the hook stays: the dying writer thread may print after this
    threading.excepthook = previous


@contextmanager
def refused_writes_before_the_job() -> Iterator[None]:
    """Hydra makes the run folder and writes ``.hydra/`` before the job starts, outside :class:`JobFailures`,
    and would report a full disk there with its own traceback; inside this, it is the project's one line (exit 1).

    Wraps the function Hydra's entry point reports errors with (``hydra._internal.utils.run_and_report``; no
    public hook sees them): refused writes are reported here, every other error as Hydra reports it.
    """
    import hydra._internal.utils as hydra_internal

    report = hydra_internal.run_and_report

    def run_and_report(func: Any) -> Any:
        def refused_write_as_one_line() -> Any:
            try:
                return func()
            except Exception as e:
                refused = os_error(e)
                if refused is None or refused.errno not in WRITE_ERRNOS:
                    raise
                print(f"error: could not write {_what_failed(e, refused, None)}: {_reason(refused)}, before training "
                      f"started; free space, then run the same command again", file=sys.stderr, flush=True)
                raise SystemExit(1) from None  # SystemExit: Hydra's reporter catches only Exception
        return report(refused_write_as_one_line)

    hydra_internal.run_and_report = run_and_report
    try:
        yield
    finally:
        hydra_internal.run_and_report = report


def record_failure(run_dir: Path, error: BaseException, with_traceback: bool) -> bool:
    """A failed job's folder says so: ``metrics.json`` with the message, ``traceback.txt`` for a bug.

    Returns False when the folder could not be written (a full disk): the previous files stay whole.
    """
    record: dict[str, Any] = {"status": "failed", "error": str(error) or type(error).__name__,
                              **getattr(error, "record", {})}
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if with_traceback:
            record["error"] = f"{type(error).__name__}: {error}"
            record["traceback"] = "traceback.txt"
            tb = "".join(traceback.format_exception(error)).encode()
            atomic_write(run_dir / "traceback.txt", lambda f: f.write(tb))
        write_json(run_dir / "metrics.json", record)
    except OSError:
        return False
    return True


class JobFailures:
    """The failed jobs of this process (one run, or a sweep's jobs): each recorded in its folder, counted so
    ``main`` exits non-zero at the end. A user's mistake is one line; a bug keeps its traceback, and in a
    sweep is recorded and passed over so the other jobs still run."""

    def __init__(self) -> None:
        self.run_dirs: list[str] = []

    @contextmanager
    def recorded(self, run_dir: Path, sweep: bool, ckpt_path: Any, log_dir: Path) -> Iterator[None]:
        """Run the job's body; a failure is recorded in ``run_dir`` (``ckpt_path``, ``log_dir``: write_failure's)."""
        try:
            with write_failures_as_errors(run_dir, ckpt_path, log_dir):  # a full disk: a one-line WriteFailed
                yield
        except FFNZooError as e:
            # the user's input or a full disk, not a bug: one line, no traceback; recorded so a sweep goes on
            recorded = record_failure(run_dir, e, with_traceback=False)
            print(f"error: {e}" + ("" if recorded else f" ({run_dir / 'metrics.json'} could not be updated)"),
                  file=sys.stderr, flush=True)
            self.run_dirs.append(str(run_dir))
        except Exception as e:
            record_failure(run_dir, e, with_traceback=True)  # metrics.json + traceback.txt in the job's folder
            if not sweep:
                raise  # a single run: a bug keeps its traceback
            # a sweep goes on with its other jobs; main() exits non-zero at the end
            print(f"error: job {run_dir.name} crashed ({type(e).__name__}: {e}); traceback in "
                  f"{run_dir / 'traceback.txt'}", file=sys.stderr, flush=True)
            self.run_dirs.append(str(run_dir))

    def exit_if_any(self) -> None:
        if self.run_dirs:
            if len(self.run_dirs) > 1 or os.environ.get("FFNZOO_VERBOSE"):
                print(f"{len(self.run_dirs)} run(s) failed: {', '.join(self.run_dirs)}", file=sys.stderr)
            sys.exit(1)
