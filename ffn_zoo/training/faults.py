"""Faults during training: non-finite loss or gradients, SIGTERM/SIGINT, a full disk, failed sweep jobs,
and the fault injection (``debug.*``) the tests use to produce each of them on purpose."""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import traceback
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.atomic import atomic_write, os_error
from ffn_zoo.errors import ConfigError, FFNZooError
from ffn_zoo.training.checkpoint import (CheckpointError, Checkpointing, DirectCheckpointIO, TrainRNG, load_checkpoint,
                                        resolve_ckpt_path, resume_command, write_json)
from ffn_zoo.training.runs import CKPT_DIR

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


class FullDisk:
    """A file that fills up: its writes fail with ENOSPC once ``room`` bytes are in, as on a full disk."""

    def __init__(self, f: BinaryIO, room: int) -> None:
        self.f, self.room = f, room

    def write(self, data: bytes) -> int:
        n = self.f.write(bytes(data[:max(self.room, 0)]))
        self.room -= len(data)
        if self.room < 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return n

    def flush(self) -> None:
        self.f.flush()


class FullDiskIO(DirectCheckpointIO):
    """The ``n``-th checkpoint write of this process (last.ckpt and best.ckpt alike) hits a full disk halfway."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n, self.writes = n, 0

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        self.writes += 1
        if self.writes != self.n:
            return super().save_checkpoint(checkpoint, path)
        atomic_write(Path(path), lambda f: torch.save(checkpoint, FullDisk(f, room=4096)))


class FaultInjection(L.Callback):
    """``debug.inject_nan_at_step``: the model's output is NaN in that step (1-based); ``debug.crash_at_step``:
    a RuntimeError (a bug, as far as train.py knows); ``debug.kill_at_step``: SIGKILL right after that
    step's checkpoints are written; ``debug.disk_full_at_checkpoint``: the n-th checkpoint write fails with
    ENOSPC after 4 KiB. For tests; never set in a research run."""

    def __init__(self, inject_nan_at_step: int | None, crash_at_step: int | None, kill_at_step: int | None,
                 disk_full_at_checkpoint: int | None = None) -> None:
        self.nan_step, self.crash_step, self.kill_step = inject_nan_at_step, crash_at_step, kill_at_step
        self.disk_full_at = disk_full_at_checkpoint
        self._hook: Any = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.disk_full_at is not None:
            trainer.strategy.checkpoint_io = FullDiskIO(int(self.disk_full_at))

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        step = trainer.global_step + 1
        if step == self.crash_step:
            raise RuntimeError(f"injected crash at step {step} (debug.crash_at_step)")
        if step == self.nan_step:
            net = getattr(pl_module, "model", pl_module)  # LitLM calls its network directly, not self()
            self._hook = net.register_forward_hook(lambda m, i, out: out * float("nan"))

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if trainer.global_step == self.kill_step:
            os.kill(os.getpid(), signal.SIGKILL)


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


def last_good_checkpoint(cfg: DictConfig, run_dir: Path) -> tuple[Path, int] | None:
    """The newest ``last.ckpt`` that loads, of this run folder or the one it resumed from, with its step."""
    candidates = [run_dir / CKPT_DIR / "last.ckpt"]
    with suppress(FFNZooError):
        candidates.append(resolve_ckpt_path(cfg, run_dir))
    good = []
    for path in dict.fromkeys(c for c in candidates if c is not None and c.is_file()):
        with suppress(CheckpointError):
            good.append((path, int(load_checkpoint(path)["global_step"])))  # verified: it loads
    return max(good, key=lambda g: g[1]) if good else None


def _what_failed(error: BaseException, refused: OSError, run_dir: Path) -> str:
    """The file a refused write was for: its name when the OS gave one, else the writer, from the traceback."""
    if refused.filename:
        return str(refused.filename)
    frames = [f for e in (error, refused) for f, _ in traceback.walk_tb(e.__traceback__)]
    tensorboard = [f for f in frames if "tensorboard" in f.f_code.co_filename]
    if tensorboard:  # its writer thread appends to the events file; the innermost frame holds its name
        name = next((f.f_locals["filename"] for f in reversed(tensorboard) if "filename" in f.f_locals), None)
        return f"the TensorBoard events {name}" if name else f"the TensorBoard events in {run_dir}"
    return f"a file of the run in {run_dir} (the OS named none)"


def write_failure(error: BaseException, cfg: DictConfig, run_dir: Path) -> WriteFailed | None:
    """``error`` as a one-line :class:`WriteFailed` when the OS refused a write (ENOSPC, ...), else None."""
    refused = os_error(error)
    if refused is None or refused.errno not in WRITE_ERRNOS:
        return None
    reason = f"{refused.strerror} ({errno.errorcode.get(refused.errno, refused.errno)})"
    last = last_good_checkpoint(cfg, run_dir)
    command = resume_command(last[0] if last else None)
    record: dict[str, Any] = {"checkpoint": str(last[0]) if last else None, "checkpoint_step": last and last[1],
                              "resume": command}
    if last:
        where = f"last good checkpoint {last[0]} (step {last[1]}, loads); free space, then resume: {command}"
    else:
        where = f"no checkpoint was written; free space, then run again: {command}"
    return WriteFailed(f"could not write {_what_failed(error, refused, run_dir)}: {reason}; {where}", record)


@contextmanager
def write_failures_as_errors(cfg: DictConfig, run_dir: Path) -> Iterator[None]:
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
        failed = write_failure(e, cfg, run_dir)
        if failed is None:
            threading.excepthook = previous
            raise
        raise failed from e  # the hook stays: the dying writer thread may print after this
    threading.excepthook = previous


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
    def recorded(self, run_dir: Path, sweep: bool, cfg: DictConfig) -> Iterator[None]:
        try:
            with write_failures_as_errors(cfg, run_dir):  # a full disk: a one-line WriteFailed
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
