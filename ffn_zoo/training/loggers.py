"""The run's logger by name (``configs/logger``), its HParams record, and Lightning's noise turned down."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.errors import UnknownNameError
from ffn_zoo.training.runs import flatten_dict

LOGGERS = ("tensorboard", "csv")


def build_logger(logger: DictConfig, run_dir: Path) -> Logger:
    """The ``logger`` config's logger, writing straight into the run folder."""
    if logger.name == "tensorboard":
        # events straight into the run folder, so TensorBoard names the run by its folder
        return TensorBoardLogger(save_dir=str(run_dir), name="", version="", default_hp_metric=False)
    if logger.name == "csv":
        return CSVLogger(save_dir=str(run_dir), name="", version="")
    raise UnknownNameError("logger", logger.name, LOGGERS)


def log_hparams(logger: Logger | None, cfg: DictConfig, metrics: dict[str, Any]) -> None:
    """Hyperparameters with the final metrics, so TensorBoard's HParams tab compares runs."""
    if logger is None:
        return
    flat = {k: (v if isinstance(v, (int, float, str, bool)) else str(v))
            for k, v in flatten_dict(OmegaConf.to_container(cfg, resolve=True)).items()}
    finals = {f"hp/{k}": v for k, v in metrics.items() if k in ("val_loss", "val_ppl", "val_bpb") and v is not None}
    if isinstance(logger, TensorBoardLogger):
        logger.log_hyperparams(flat, metrics=finals)
    else:
        logger.log_hyperparams(flat)
    logger.save()


def quiet_warnings() -> None:
    """Lightning's and Hydra's warnings that say nothing about this run (called by ``run``, not at import)."""
    warnings.filterwarnings(
        "ignore", message=r".*(LeafSpec|litlogger|does not have many workers|GPU available|validated against "
                          r"ConfigStore schema).*")
