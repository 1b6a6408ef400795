"""Guards while training: the non-finite loss/gradient check, SIGTERM/SIGINT handling, and the record of a run's
reliability callbacks (checkpoints, the RNG stream, the guards, the tests' fault injection) in the order they run."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException
from omegaconf import DictConfig

from ffn_zoo.atomic import write_json
from ffn_zoo.errors import ConfigError, FFNZooError
from ffn_zoo.training.lifecycle.checkpoint import Checkpointing
from ffn_zoo.training.lifecycle.injection import FaultInjection
from ffn_zoo.training.lifecycle.rng import TrainRNG
from ffn_zoo.training.lifecycle.runs import CKPT_DIR, resume_command

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
    ``last.ckpt`` and stop; ``run`` then prints the command that resumes. A second signal aborts at once.

    Heard from :meth:`listening`'s start (before a resume's restore, which takes seconds at BERT-base) to its end;
    Lightning puts its own SIGTERM handler in front of ours just before training (it would raise without saving),
    so ``on_train_start`` takes the signals back."""

    def __init__(self, checkpoints: Checkpointing) -> None:
        self.checkpoints = checkpoints
        self.signum: int | None = None
        self.saved: Path | None = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            raise KeyboardInterrupt  # asked twice: stop now, without a checkpoint
        self.signum = signum
        print(f"\n{signal.Signals(signum).name}: finishing this step and saving a checkpoint "
              f"(send it again to abort at once)", file=sys.stderr, flush=True)

    def _install(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, self._handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    @contextmanager
    def listening(self) -> Iterator[None]:
        """Our handlers while the block runs (``trainer.fit``), the previous ones after it, however it ends."""
        previous = self._install()
        try:
            yield
        except SIGTERMException:
            # Lightning's handler heard the signal before on_train_start (ours, composed behind it, did too):
            # it raises at the end of that step, after on_train_batch_end saved last.ckpt; run's stop path follows
            if self.signum is None:
                raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._install()  # displaces Lightning's handler; listening() restores what was there before the fit

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        # all ranks decide together (any rank signalled), or one would wait alone in the checkpoint's barrier
        if self.saved is None and trainer.strategy.reduce_boolean_decision(self.signum is not None, all=False):
            self.signum = self.signum or signal.SIGTERM
            self.saved = self.checkpoints.save_last_now(trainer)
            trainer.should_stop = True

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

    def after_a_finished_run(self) -> None:
        """A signal that came after the last step's check: the run is whole (its metrics.json written), but the job
        was asked to stop, so a ladder or sweep must not start its next piece. Exits with 128 + signal number."""
        if self.signum is not None:
            print(f"stopped  {signal.Signals(self.signum).name} after the run's last step: it is finished; "
                  f"the rest of the job does not start", file=sys.stderr, flush=True)
            raise SystemExit(128 + self.signum)


@dataclass(frozen=True)
class Guards:
    """A run's reliability callbacks by role, so ``train.run`` asks the stop and the skip count by name."""

    rng: TrainRNG
    nonfinite: NonFiniteGuard
    checkpoints: Checkpointing
    stop: GracefulStop
    injection: FaultInjection

    @property
    def callbacks(self) -> list[L.Callback]:
        """In the order they must run: TrainRNG saves the step's RNG state before Checkpointing writes it, and the
        fault injection kills only after that step's checkpoint is on disk."""
        return [self.rng, self.nonfinite, self.checkpoints, self.stop, self.injection]


def build_guards(checkpoint: DictConfig, faults: DictConfig, debug: DictConfig, run_dir: Path,
                 run_config: dict[str, Any]) -> Guards:
    """The ``checkpoint``, ``faults`` and ``debug`` groups -> :class:`Guards`; ``run_config`` (the whole resolved
    config) is stored in every checkpoint, so a resume can be checked against it."""
    every = checkpoint.every_n_steps
    if every is not None and int(every) <= 0:
        raise ConfigError(f"checkpoint.every_n_steps={every} must be > 0, or null (only at the end)")
    checkpoints = Checkpointing(run_dir / CKPT_DIR, every and int(every), bool(checkpoint.save_last),
                                bool(checkpoint.save_best), config=run_config)
    return Guards(
        rng=TrainRNG(),
        nonfinite=NonFiniteGuard(faults.on_nonfinite, checkpoints, int(faults.max_skipped_steps)),
        checkpoints=checkpoints,
        stop=GracefulStop(checkpoints),
        injection=FaultInjection(debug.inject_nan_at_step, debug.crash_at_step, debug.kill_at_step,
                                 debug.disk_full_at_checkpoint, debug.sigterm_at),
    )
