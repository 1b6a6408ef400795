"""Fault injection for the tests (``debug.*`` in configs/train.yaml): a NaN output, a crash, a SIGKILL, a SIGTERM,
a full disk, each at a chosen step or write. Wired by ``guards.build_guards``; never set in a research run."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path
from typing import Any, BinaryIO

import lightning as L
import torch

from ffn_zoo.atomic import atomic_write
from ffn_zoo.errors import ConfigError
from ffn_zoo.training.lifecycle.checkpoint import DirectCheckpointIO


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
    ENOSPC after 4 KiB; ``debug.sigterm_at``: SIGTERM to itself in the Trainer's ``setup`` (``setup``: before a
    resume's restore, where a pre-empted job may be) or right after step N's checkpoints (an int). For tests; never
    set in a research run."""

    def __init__(self, inject_nan_at_step: int | None, crash_at_step: int | None, kill_at_step: int | None,
                 disk_full_at_checkpoint: int | None = None, sigterm_at: int | str | None = None) -> None:
        self.nan_step, self.crash_step, self.kill_step = inject_nan_at_step, crash_at_step, kill_at_step
        self.disk_full_at = disk_full_at_checkpoint
        if sigterm_at is not None and sigterm_at != "setup" and not isinstance(sigterm_at, int):
            raise ConfigError(f"debug.sigterm_at={sigterm_at!r}; valid: null, setup, or a step number")
        self.sigterm_at = sigterm_at
        self._hook: Any = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.disk_full_at is not None:
            trainer.strategy.checkpoint_io = FullDiskIO(int(self.disk_full_at))
        if self.sigterm_at == "setup" and stage == "fit":
            os.kill(os.getpid(), signal.SIGTERM)

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
        if trainer.global_step == self.sigterm_at:
            os.kill(os.getpid(), signal.SIGTERM)
