"""Checkpoints: what they hold, how they are written (atomically), read back and checked against a run.

A checkpoint is Lightning's full training state (weights, optimizer, LR schedule, loop counters)
plus the training RNG stream and the run's config. The data position needs nothing extra: batch k
is a pure function of (seed, k) (``StepSampler``), and the sampler starts at the restored step.

Where ``ckpt_path`` finds one: ``runs.resume_point``; the RNG stream: ``rng.py``; the banner's disk estimate:
``reporting/summary.py``.

Loading never runs pickled code: every load here and in ``trainer.fit`` uses ``torch.load(...,
weights_only=True)``, which only rebuilds tensors and plain containers.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Mapping

import lightning as L
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn
import torch
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.atomic import atomic_write
from ffn_zoo.errors import CheckpointError, FFNZooError

# settings a resumed run must share with its checkpoint: the network, the corpus and the data order
MUST_MATCH = ("model", "ffn", "data", "seed")
MAY_DIFFER = {"data.val_batch_size", "data.num_workers", "data.cache_dir",  # where or how fast, not what
              "data.extra_val", "data.extra_val_defaults"}  # extra held-out sets are scored, never trained on
# keys added after checkpoints had been written, with the value the older code behaved as: a checkpoint whose
# config lacks one was trained with that value (tests/fixtures holds such a checkpoint)
ADDED_KEYS = {"model.init": "gpt2", "model.residual_std": "gpt2"}


# ---------------------------------------------------------------------------- writing


class DirectCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint IO, minus its staging: ``torch.save`` straight into ``atomic_write``'s temporary.

    Lightning's ``_atomic_save`` serialises the whole checkpoint into memory, writes that to a file in
    the system temp folder (fsspec's transaction) and copies it next to the target: the RAM and the
    free space in /tmp of one more checkpoint, and every byte written twice.
    """

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        atomic_write(Path(path), lambda f: torch.save(checkpoint, f))


class Checkpointing(L.Callback):
    """``last.ckpt`` every ``every_n_steps`` and at the end, ``best.ckpt`` at each new best ``val/loss``.

    Each write goes through :class:`DirectCheckpointIO` (installed on the strategy at setup): a
    temporary file in ``checkpoints/``, fsync, rename over the old one, so a crash or a full disk
    mid-write leaves the previous checkpoint intact; a state with non-finite weights is never written.
    """

    def __init__(self, ckpt_dir: Path, every_n_steps: int | None, save_last: bool = True, save_best: bool = True,
                 config: dict[str, Any] | None = None) -> None:
        self.dir, self.every_n_steps = Path(ckpt_dir), every_n_steps
        self.save_last, self.save_best = save_last, save_best
        self.config = config or {}
        self.best_val, self.best_step = math.inf, -1
        self.last_good: tuple[Path, int] | None = None  # (path, step) of the newest checkpoint written or resumed from
        self._saved_step = -1
        self.seconds = 0.0  # wall time spent writing checkpoints (the run's time line)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not isinstance(trainer.strategy.checkpoint_io, DirectCheckpointIO):
            trainer.strategy.checkpoint_io = DirectCheckpointIO()  # loads as TorchCheckpointIO does

    def save(self, trainer: L.Trainer, name: str) -> Path:
        start = time.perf_counter()
        path = self.dir / name
        bad = next((n for n, p in trainer.lightning_module.named_parameters() if not torch.isfinite(p).all()), None)
        if bad is not None:  # the guard stops NaN updates first; this is the last line of defence
            raise FFNZooError(f"not saving {path}: parameter {bad} is non-finite at step {trainer.global_step}; "
                              f"the last good checkpoint is {self.describe_last_good()}")
        trainer.save_checkpoint(path, weights_only=False)  # the full training state; every rank calls it, rank 0 writes
        trainer.strategy.barrier("ffnzoo-checkpoint")
        self.seconds += time.perf_counter() - start
        return path

    def save_last_now(self, trainer: L.Trainer) -> Path:
        if self._saved_step != trainer.global_step:
            self.save(trainer, "last.ckpt")
            self._saved_step = trainer.global_step
            self.last_good = (self.dir / "last.ckpt", trainer.global_step)
        return self.dir / "last.ckpt"

    def describe_last_good(self) -> str:
        if self.last_good is None:
            return "none (no checkpoint was written)"
        return f"{self.last_good[0]} (step {self.last_good[1]})"

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.ckpt_path:  # resumed: until a new one is written, that checkpoint is the last good one
            self.last_good = (Path(trainer.ckpt_path), trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if self.save_last and self.every_n_steps and trainer.global_step % self.every_n_steps == 0:
            self.save_last_now(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.save_last:
            self.save_last_now(trainer)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.save_best or trainer.sanity_checking or trainer.state.fn != TrainerFn.FITTING:
            return  # only validations inside fit: a stand-alone validate() has no optimizer state to save
        val = trainer.callback_metrics.get("val/loss")
        if val is not None and math.isfinite(float(val)) and float(val) < self.best_val:
            self.best_val, self.best_step = float(val), trainer.global_step
            self.save(trainer, "best.ckpt")

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        checkpoint["ffn_zoo"] = {"config": self.config}  # plain containers: loadable with weights_only=True

    def state_dict(self) -> dict[str, Any]:
        return {"best_val": self.best_val, "best_step": self.best_step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.best_val, self.best_step = state["best_val"], state["best_step"]


# ---------------------------------------------------------------------------- reading and checking


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint without running pickled code; a user-facing error if it is not a readable one."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # truncated zip, not a torch file, or objects weights_only refuses to rebuild
        first = (str(e).strip().splitlines() or [type(e).__name__])[0].split(". ")[0][:120]  # torch's first sentence
        if "Weights only load failed" in str(e):
            first = "it holds pickled objects that weights_only loading refuses to run"
        elif "mmap can only be used" in str(e):
            first = "not a zip-format torch file"
        raise CheckpointError(f"ckpt_path={path} is not a readable checkpoint ({first}); "
                              f"it may be truncated or another kind of file") from None
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt or "global_step" not in ckpt:
        raise CheckpointError(f"ckpt_path={path} is not an ffn-zoo training checkpoint (no state_dict/global_step)")
    return ckpt


def first_difference(saved: Any, current: Any, prefix: str = "") -> tuple[str, Any, Any] | None:
    """The first dotted key (sorted) where two nested configs differ, with both values; MAY_DIFFER keys are skipped."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for key in sorted(set(saved) | set(current)):
            name = f"{prefix}.{key}" if prefix else key
            if name in MAY_DIFFER:
                continue
            diff = first_difference(saved.get(key, "<unset>"), current.get(key, "<unset>"), name)
            if diff:
                return diff
        return None
    return None if saved == current else (prefix, saved, current)


def must_match(cfg: DictConfig) -> dict[str, Any]:
    """The run's MUST_MATCH settings, resolved to plain values: what :func:`check_checkpoint` compares."""
    return {k: OmegaConf.to_container(cfg[k], resolve=True) if isinstance(cfg[k], DictConfig) else cfg[k]
            for k in MUST_MATCH}


def check_checkpoint(path: Path, module: L.LightningModule, settings: Mapping[str, Any]) -> int:
    """Check that ``path`` fits this model and these settings (:func:`must_match`); return its step.

    Names the first mismatch: a parameter's shape, a missing or extra one, or a MUST_MATCH setting.
    """
    ckpt = load_checkpoint(path)
    saved = ckpt["state_dict"]
    expected = module.state_dict()
    names = f"model={settings['model']['name']}, ffn={settings['ffn']['name']}"
    this_run = f"(this run: {names})"
    for key, tensor in expected.items():
        if key in saved and tuple(saved[key].shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"ckpt_path={path} is from another model: {key} has shape {tuple(saved[key].shape)} in the checkpoint "
                f"but {tuple(tensor.shape)} in this model ({names})")
    missing = [k for k in expected if k not in saved]
    extra = [k for k in saved if k not in expected]
    if missing:
        instead = f"; it has {extra[0]} {tuple(saved[extra[0]].shape)} instead" if extra else ""
        raise CheckpointError(f"ckpt_path={path} is from another model: it lacks {missing[0]} "
                              f"{tuple(expected[missing[0]].shape)}{instead} {this_run}")
    if extra:
        raise CheckpointError(f"ckpt_path={path} is from another model: it has {extra[0]} "
                              f"{tuple(saved[extra[0]].shape)}, which this model lacks {this_run}")
    config = ckpt.get("ffn_zoo", {}).get("config") or {}
    for dotted, value in ADDED_KEYS.items():
        group, key = dotted.split(".")
        if group in config and key not in config[group]:
            config[group] = {**config[group], key: value}
    diff = first_difference({k: config.get(k) for k in MUST_MATCH if k in config},
                            {k: settings.get(k) for k in MUST_MATCH if k in config})
    if diff:
        raise CheckpointError(f"ckpt_path={path} was trained with {diff[0]}={diff[1]} but this run has "
                              f"{diff[0]}={diff[2]}; resume with the checkpoint's settings")
    return int(ckpt["global_step"])
