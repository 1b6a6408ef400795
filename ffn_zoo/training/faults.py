"""Faults during training: non-finite loss or gradients, SIGTERM/SIGINT, failed runs and sweep jobs, and
the fault injection (``debug.*``) the tests use to produce each of them on purpose."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.training.checkpoint import Checkpointing, TrainRNG, resume_command
from ffn_zoo.errors import ConfigError, FFNZooError
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
            (run_dir / "metrics.json").write_text(json.dumps(record, indent=2) + "\n")
            print(f"stopped  {record['signal']} at step {trainer.global_step}; checkpoint {ckpt}\n"
                  f"resume   {command}", file=sys.stderr, flush=True)
        raise SystemExit(128 + self.signum)  # SystemExit: a sweep stops here too (Hydra catches only Exception)


class FaultInjection(L.Callback):
    """``debug.inject_nan_at_step``: the model's output is NaN in that step (1-based); ``debug.crash_at_step``:
    a RuntimeError (a bug, as far as train.py knows); ``debug.kill_at_step``: SIGKILL right after that
    step's checkpoints are written. For tests; never set in a research run."""

    def __init__(self, inject_nan_at_step: int | None, crash_at_step: int | None, kill_at_step: int | None) -> None:
        self.nan_step, self.crash_step, self.kill_step = inject_nan_at_step, crash_at_step, kill_at_step
        self._hook: Any = None

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
        FaultInjection(d.inject_nan_at_step, d.crash_at_step, d.kill_at_step),
    ]


def record_failure(run_dir: Path, error: BaseException, with_traceback: bool) -> None:
    """A failed job's folder says so: ``metrics.json`` with the message, ``traceback.txt`` for a bug."""
    run_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"status": "failed", "error": str(error) or type(error).__name__}
    if with_traceback:
        record["error"] = f"{type(error).__name__}: {error}"
        record["traceback"] = "traceback.txt"
        (run_dir / "traceback.txt").write_text("".join(traceback.format_exception(error)))
    (run_dir / "metrics.json").write_text(json.dumps(record, indent=2) + "\n")


class JobFailures:
    """The failed jobs of this process (one run, or a sweep's jobs): each recorded in its folder, counted so
    ``main`` exits non-zero at the end. A user's mistake is one line; a bug keeps its traceback, and in a
    sweep is recorded and passed over so the other jobs still run."""

    def __init__(self) -> None:
        self.run_dirs: list[str] = []

    @contextmanager
    def recorded(self, run_dir: Path, sweep: bool) -> Iterator[None]:
        try:
            yield
        except FFNZooError as e:
            # the user's input, not a bug: one line, no traceback; recorded so a sweep goes on
            print(f"error: {e}", file=sys.stderr, flush=True)
            record_failure(run_dir, e, with_traceback=False)
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
