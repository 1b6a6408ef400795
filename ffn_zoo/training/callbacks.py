"""Lightning callbacks: training throughput and a step-based progress bar."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar


class ThroughputMonitor(L.Callback):
    """Logs ``train/tokens_per_s`` over the wall time of training steps, data fetch included and
    validation excluded; the run's mean skips the first ``skip`` steps (allocator and kernel warm-up)."""

    def __init__(self, tokens_per_step: int, skip: int = 5) -> None:
        self.tokens_per_step, self.skip = tokens_per_step, skip
        self._last: float | None = None
        self._window_tokens, self._window_time = 0, 0.0
        self.total_tokens, self.total_time = 0, 0.0

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        now = time.perf_counter()
        if self._last is not None:
            dt = now - self._last
            self._window_tokens += self.tokens_per_step
            self._window_time += dt
            if trainer.global_step > self.skip:
                self.total_tokens += self.tokens_per_step
                self.total_time += dt
        self._last = now
        if trainer.global_step % trainer.log_every_n_steps == 0 and self._window_time > 0:
            pl_module.log("train/tokens_per_s", self._window_tokens / self._window_time)
            self._window_tokens, self._window_time = 0, 0.0

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._last = None  # the next step's interval would include validation time

    @property
    def mean_tokens_per_s(self) -> float | None:
        return self.total_tokens / self.total_time if self.total_time > 0 else None


class StepProgressBar(TQDMProgressBar):
    """One bar over the whole step budget (the training stream is infinite, so Lightning's per-epoch
    bar would have no total), showing loss, perplexity, the last validation perplexity and the ETA."""

    def on_train_epoch_start(self, trainer: L.Trainer, *args: Any) -> None:
        super().on_train_epoch_start(trainer, *args)
        if trainer.max_steps and trainer.max_steps > 0:
            self.train_progress_bar.reset(total=trainer.max_steps)
            self.train_progress_bar.n = trainer.global_step
        self.train_progress_bar.set_description("train")

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        metrics = super().get_metrics(trainer, pl_module)
        metrics.pop("v_num", None)
        return metrics
