"""What a run prints while it trains: throughput, the progress bar in a terminal, one line per validation in a log.

A log file (a sweep's, CI's, ``> log``) gets no carriage-return redraws: tqdm bars written to a file
become dozens of lines per validation. There each validation prints
``step 120/240  val/loss 6.31  val/ppl 550  3.9k tok/s  ETA 2m``, and a run that has printed nothing for
``ValidationLines.quiet_s`` (a ladder piece validating only at its end) prints ``step 640/1638  train/loss 6.12  ...``.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any, Callable

import lightning as L
from lightning.pytorch.callbacks import TQDMProgressBar

# Lightning's rank-zero lines that say nothing the start-up banner does not: its advertisements (litlogger,
# litmodels), the accelerator inventory (the banner's `device` line says what is used) and the normal end of fit
# (metrics.json says how a run ended). Everything else it logs (warnings, other info) still prints.
DROPPED_PREFIXES = ("💡 Tip", "GPU available:", "TPU available:", "HPU available:", "`Trainer.fit` stopped: `max_steps=")


class _DropRedundant(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(DROPPED_PREFIXES)


def quiet_lightning() -> None:
    """Drop Lightning's rank-zero lines in DROPPED_PREFIXES (Tips, accelerator inventory, the normal end of fit)."""
    log = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    if not any(isinstance(f, _DropRedundant) for f in log.filters):
        log.addFilter(_DropRedundant())


def interactive() -> bool:
    """A terminal on stdout (where Lightning's tqdm bar writes)."""
    return sys.stdout.isatty()


def si(x: float) -> str:
    """3900 -> '3.9k', 12345 -> '12k', 2.5e6 -> '2.5M'."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            v = x / div
            return f"{v:.1f}{unit}" if v < 10 else f"{v:.0f}{unit}"
    return f"{x:.0f}"


def duration(seconds: float) -> str:
    """45 -> '45s', 130 -> '2m', 3900 -> '1h05m'."""
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def validation_line(step: int, max_steps: int, metrics: dict[str, Any], tokens_per_s: float | None,
                    elapsed: float, steps_done: int) -> str:
    """``step 120/240  val/loss 6.31  val/ppl 550  3.9k tok/s  ETA 2m`` (ETA from the wall time so far)."""
    parts = [f"step {step}/{max_steps}"]
    if "val/loss" not in metrics and "train/loss" in metrics:  # a progress line between validations
        parts.append(f"train/loss {float(metrics['train/loss']):.2f}")
    if "val/loss" in metrics:
        parts.append(f"val/loss {float(metrics['val/loss']):.2f}")
    if "val/ppl" in metrics:
        ppl = float(metrics["val/ppl"])
        parts.append(f"val/ppl {ppl:.0f}" if ppl >= 100 else f"val/ppl {ppl:.2f}")
    if tokens_per_s:
        parts.append(f"{si(tokens_per_s)} tok/s")
    if step < max_steps and steps_done > 0:
        parts.append(f"ETA {duration(elapsed / steps_done * (max_steps - step))}")
    else:
        parts.append(f"took {duration(elapsed)}")
    return "  ".join(parts)


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


class ValidationLines(L.Callback):
    """Prints :func:`validation_line` after each validation (not the sanity check), on rank zero, and a training
    line after a step when nothing was printed for ``quiet_s`` seconds. ``throughput`` gives the mean tokens/s."""

    def __init__(self, throughput: ThroughputMonitor, quiet_s: float = 120.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.throughput, self.quiet_s, self.clock = throughput, quiet_s, clock
        self._start = self._printed = clock()
        self._first_step = 0

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = self._printed = self.clock()
        self._first_step = trainer.global_step  # a resumed run counts from here

    def _print(self, trainer: L.Trainer, metrics: dict[str, Any]) -> None:
        now = self.clock()
        print(validation_line(trainer.global_step, trainer.max_steps, metrics, self.throughput.mean_tokens_per_s,
                              now - self._start, trainer.global_step - self._first_step), flush=True)
        self._printed = now

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if trainer.is_global_zero and self.clock() - self._printed >= self.quiet_s:
            loss = trainer.callback_metrics.get("train/loss")
            self._print(trainer, {} if loss is None else {"train/loss": float(loss)})

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        self._print(trainer, {k: v.item() if hasattr(v, "item") else v for k, v in trainer.callback_metrics.items()})


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


class TimeSplit(L.Callback):
    """Where a run's wall time goes: the training loop's span, every validation's (the sanity check, those inside the
    loop, the closing one) and the checkpoint writes inside each, read from ``checkpoint_seconds``.

    Goes after the checkpointing callback, so the loop's span holds its last write. :meth:`split` gives the
    ``time_s`` record of metrics.json; :func:`time_line` the one line a run ends with.
    """

    def __init__(self, checkpoint_seconds: Callable[[], float]) -> None:
        self.checkpoint_seconds = checkpoint_seconds
        self.loop: list[tuple[float, float]] = []  # (time, checkpoint seconds) at the loop's start, then its end
        self.validation = {"before": 0.0, "in": 0.0, "after": 0.0}  # the loop's: sanity check, inside, closing
        self._val_start: tuple[float, float] | None = None

    def _now(self) -> tuple[float, float]:
        return time.perf_counter(), self.checkpoint_seconds()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.loop = [self._now()]

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.loop.append(self._now())

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._val_start = self._now()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._val_start is not None:
            (t0, c0), (t1, c1) = self._val_start, self._now()
            where = ("before", "in", "after")[len(self.loop)]
            self.validation[where] += (t1 - t0) - (c1 - c0)  # best.ckpt is written at a validation's end
            self._val_start = None

    def split(self, started: float, masking_s: float) -> dict[str, float]:
        """The run's wall time by phase, in seconds; ``started``: ``time.perf_counter()`` at the run's start.

        train_steps: the loop less its validations and checkpoint writes (data fetch, optimizer, logging included);
        start_up: before the loop (data, model, a restore); other: after it, less the closing validation (metrics,
        logs). ``masking_s`` (inside validation): making validation inputs, the MLM masks.
        """
        total, checkpoints = self._now()
        (loop_start, ck_start), (loop_end, ck_end) = (self.loop + [(total, checkpoints)] * 2)[:2]
        val = self.validation
        parts = {"train_steps": (loop_end - loop_start) - val["in"] - (ck_end - ck_start),
                 "validation": sum(val.values()), "checkpoints": checkpoints,
                 "start_up": (loop_start - started) - val["before"] - ck_start}
        total -= started
        return {"total": total, **parts, "other": total - sum(parts.values()), "masking": masking_s}


def time_line(split: dict[str, float]) -> str:
    """``81% train steps, 12% validation (1% masking), 4% checkpoints, 3% start-up, 0% other (of 1.2 h)``."""
    total = split["total"] or 1.0
    pct = {k: 100 * v / total for k, v in split.items()}
    masking = f" ({pct['masking']:.0f}% masking)" if split.get("masking", 0) >= 0.005 * total else ""
    return (f"{pct['train_steps']:.0f}% train steps, {pct['validation']:.0f}% validation{masking}, "
            f"{pct['checkpoints']:.0f}% checkpoints, {pct['start_up']:.0f}% start-up, {pct['other']:.0f}% other "
            f"(of {duration(split['total'])})")
