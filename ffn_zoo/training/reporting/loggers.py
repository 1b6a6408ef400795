"""The run's loggers by name (``configs/logger``; ``logger=[tensorboard,csv]`` selects several), their HParams
record, and Lightning's noise turned down."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from omegaconf import DictConfig

from ffn_zoo.errors import ConfigError, UnknownNameError
from ffn_zoo.training.reporting.hparams import experiment_hparams, ladder_hparams, metric_tags, swept_hparams
from ffn_zoo.training.lifecycle.runs import SWEPT_KEYS_ENV, flatten_dict
from ffn_zoo.training.reporting.tb_views import write_custom_scalars, write_hparams


def without_epoch(cls: type[Logger]) -> type[Logger]:
    """``cls`` minus the ``epoch`` scalar Lightning adds to every log call: the training stream is one endless
    epoch, so it is a flat 0 that TensorBoard would show first (tag groups sort by name)."""
    class NoEpoch(cls):  # type: ignore[misc,valid-type]
        def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
            super().log_metrics({k: v for k, v in metrics.items() if k != "epoch"}, step)

    NoEpoch.__name__ = NoEpoch.__qualname__ = cls.__name__
    return NoEpoch


def _tensorboard(sub: DictConfig, run_dir: Path, resume_step: int | None) -> Logger:
    # events straight into the run folder, so TensorBoard names the run by its folder. A run resumed in its own
    # folder logs again from its checkpoint's step; purge_step (a SessionLog START at that step) tells TensorBoard
    # to drop what the killed run logged from there on, so each curve is one line (step k logs at index k - 1)
    return without_epoch(TensorBoardLogger)(save_dir=str(run_dir), name="", version="", default_hp_metric=False,
                                            purge_step=resume_step)


def _csv(sub: DictConfig, run_dir: Path, resume_step: int | None) -> Logger:
    return without_epoch(CSVLogger)(save_dir=str(run_dir), name="", version="")


def _wandb(sub: DictConfig, run_dir: Path, resume_step: int | None) -> Logger:
    try:
        from lightning.pytorch.loggers import WandbLogger
        import wandb  # noqa: F401  (an optional extra)
    except ImportError:
        raise ConfigError("logger=wandb needs the wandb package: pip install 'ffn-zoo[wandb]'") from None
    # named like the run folder (TensorBoard's run name), grouped by the sweep's folder
    return without_epoch(WandbLogger)(name=run_dir.name, group=run_dir.parent.name, save_dir=str(run_dir),
                                      project=sub.project, entity=sub.entity,
                                      **({"mode": sub.mode} if sub.mode else {}))


LOGGERS = {"tensorboard": _tensorboard, "csv": _csv, "wandb": _wandb}


def build_loggers(logger: DictConfig, run_dir: Path, resume_step: int | None = None) -> list[Logger]:
    """One logger per entry of the ``logger`` config, each writing into the run folder; ``resume_step``: the
    checkpoint's step when the run resumes (None: a fresh run)."""
    out = []
    for sub in logger.values():
        if sub.name not in LOGGERS:
            raise UnknownNameError("logger", sub.name, LOGGERS)
        out.append(LOGGERS[sub.name](sub, run_dir, resume_step))
    return out


def write_layouts(loggers: list[Logger]) -> None:
    """The Custom Scalars layout into each TensorBoard run's own events (at the start, so it shows while training)."""
    for logger in loggers:
        if isinstance(logger, TensorBoardLogger):
            write_custom_scalars(logger.experiment)


def log_hparams(loggers: list[Logger], config: dict[str, Any], metrics: dict[str, Any],
                last_val: dict[str, float]) -> None:
    """What defines the experiment, picked from ``config`` (the run's resolved config; ``hparams.py``, swept keys
    first), with the final metrics: every logger gets the same names; TensorBoard's HParams tab shows them as
    columns side by side."""
    swept = [k for k in os.environ.get(SWEPT_KEYS_ENV, "").split(",") if k]
    ladder = ladder_hparams(metrics)  # a ladder's trunk or branch: its role and budget, first like a swept key
    params = {**ladder, **experiment_hparams(flatten_dict(config), swept)}
    finals = {"train/mean_tokens_per_s": metrics["train_tokens_per_s"]} if metrics["train_tokens_per_s"] else {}
    tags = metric_tags(last_val, finals)
    for logger in loggers:
        logger.log_metrics(finals, step=max(metrics["steps"] - 1, 0))  # Lightning's step index of the last step
        if isinstance(logger, TensorBoardLogger):
            write_hparams(logger.experiment, params, [*ladder, *swept_hparams(swept, params)], tags)
        else:
            logger.log_hyperparams(params)
        logger.save()


def quiet_warnings() -> None:
    """Lightning's and Hydra's warnings that say nothing about this run (called by ``run``, not at import)."""
    warnings.filterwarnings(
        "ignore", message=r".*(LeafSpec|litlogger|does not have many workers|GPU available|validated against "
                          r"ConfigStore schema|Experiment logs directory .* exists and is not empty).*")
