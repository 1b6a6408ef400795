"""Checkpoints: what they hold, how they are written (atomically) and how a resume finds and checks one.

A checkpoint is Lightning's full training state (weights, optimizer, LR schedule, loop counters)
plus the training RNG stream and the run's config. The data position needs nothing extra: batch k
is a pure function of (seed, k) (``StepSampler``), and the sampler starts at the restored step.

Loading never runs pickled code: every load here and in ``trainer.fit`` uses ``torch.load(...,
weights_only=True)``, which only rebuilds tensors and plain containers.
"""

from __future__ import annotations

import json
import math
import os
import random
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import lightning as L
from lightning.pytorch.plugins.io import TorchCheckpointIO
from lightning.pytorch.trainer.states import TrainerFn
import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.atomic import atomic_write, atomic_write_bytes
from ffn_zoo.errors import FFNZooError
from ffn_zoo.training.runs import CKPT_DIR, fixed_run_dir, resolve_last

# settings a resumed run must share with its checkpoint: the network, the corpus and the data order
MUST_MATCH = ("model", "ffn", "data", "seed")
MAY_DIFFER = {"data.val_batch_size", "data.num_workers", "data.cache_dir",  # where or how fast, not what
              "data.extra_val", "data.extra_val_defaults"}  # extra held-out sets are scored, never trained on
# keys added after checkpoints had been written, with the value the older code behaved as: a checkpoint whose
# config lacks one was trained with that value (tests/fixtures holds such a checkpoint)
ADDED_KEYS = {"model.init": "gpt2"}


class CheckpointError(FFNZooError):
    """``ckpt_path`` is missing, unreadable, or from another model; the message names the file."""


# ---------------------------------------------------------------------------- writing


def write_json(path: Path, record: dict[str, Any]) -> None:
    """``metrics.json`` and other records, atomically: a full disk leaves the previous version, not half a file."""
    atomic_write_bytes(path, (json.dumps(record, indent=2) + "\n").encode())


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

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not isinstance(trainer.strategy.checkpoint_io, DirectCheckpointIO):
            trainer.strategy.checkpoint_io = DirectCheckpointIO()  # loads as TorchCheckpointIO does

    def save(self, trainer: L.Trainer, name: str) -> Path:
        path = self.dir / name
        bad = next((n for n, p in trainer.lightning_module.named_parameters() if not torch.isfinite(p).all()), None)
        if bad is not None:  # the guard stops NaN updates first; this is the last line of defence
            raise FFNZooError(f"not saving {path}: parameter {bad} is non-finite at step {trainer.global_step}; "
                              f"the last good checkpoint is {self.describe_last_good()}")
        trainer.save_checkpoint(path, weights_only=False)  # the full training state; every rank calls it, rank 0 writes
        trainer.strategy.barrier("ffnzoo-checkpoint")
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


# optimizer state kept per parameter, in copies of the weights: AdamW's two moments; Adafactor's factored second
# moment (a row and a column per matrix) is next to nothing
OPTIMIZER_STATE_COPIES = {"adamw": 2, "adafactor": 0}
BIG_CHECKPOINT = 100 * 2**20  # from this size on, the start-up banner says how much disk the checkpoints need


def checkpoint_bytes(model: torch.nn.Module, optim_name: str) -> int:
    """A checkpoint's size before one exists: weights and buffers, plus the optimizer's state (its moments)."""
    unique = {t.data_ptr(): t for t in model.state_dict().values()}  # tied weights are saved once
    weights = sum(t.numel() * t.element_size() for t in unique.values())
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    # an unknown name is refused later, with the valid ones, by build_optimizer; here it counts as AdamW
    return weights + OPTIMIZER_STATE_COPIES.get(optim_name, 2) * params


def disk_need(model: torch.nn.Module, checkpoint: DictConfig, optim_name: str, run_dir: Path) -> str | None:
    """The banner's ``disk`` line: checkpoint size, free space needed and free; None for small runs with room.

    The need: ``last.ckpt``, ``best.ckpt`` (``save_best``) and the temporary of the one being written.
    """
    size = checkpoint_bytes(model, optim_name)
    kept = [n for n, on in (("last", checkpoint.save_last), ("best", checkpoint.save_best)) if on]
    need = size * (len(kept) + 1) if kept else 0
    free = shutil.disk_usage(run_dir).free
    if size < BIG_CHECKPOINT and free >= need:
        return None
    hint = " or set checkpoint.save_best=false" if checkpoint.save_best else ""
    warn = f"; NOT ENOUGH: free space{hint}" if free < need else ""
    return (f"a checkpoint ~{_size(size)} (weights + {optim_name} state); {CKPT_DIR}/ needs ~{_size(need)} free "
            f"({' + '.join(kept)} + one being written), {_size(free)} free{warn}")


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


# ---------------------------------------------------------------------------- RNG


def rng_state(device: torch.device | None = None) -> dict[str, Any]:
    """torch, CUDA (``device``), numpy and python generator states, as tensors and plain containers."""
    _, key, pos, has_gauss, gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(), "python": random.getstate(),
        "numpy": {"key": key.tolist(), "pos": int(pos), "has_gauss": int(has_gauss), "gauss": float(gauss)},
    }
    if device is not None and device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: dict[str, Any], device: torch.device | None = None) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state(("MT19937", np.array(n["key"], dtype=np.uint32), n["pos"], n["has_gauss"], n["gauss"]))
    if "cuda" in state and device is not None and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


class TrainRNG(L.Callback):
    """Training steps draw from their own RNG stream (dropout masks, ...), saved in every checkpoint.

    Why a separate stream: DataLoader iterators and validation also draw from the global
    generators, at points that differ between an uninterrupted run and a resumed one; with the
    training draws isolated, the resumed run continues the exact same stream.
    """

    def __init__(self) -> None:
        self._train: dict[str, Any] | None = None
        self._outside: dict[str, Any] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._train is None:  # a fresh run continues from the seeded global state
            self._train = rng_state(pl_module.device)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._outside = rng_state(pl_module.device)
        set_rng_state(self._train, pl_module.device)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        self._train = rng_state(pl_module.device)
        set_rng_state(self._outside, pl_module.device)

    def state_dict(self) -> dict[str, Any]:
        return {"train_rng": self._train} if self._train is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._train = state.get("train_rng")


# ---------------------------------------------------------------------------- finding and checking


def resolve_ckpt_path(cfg: DictConfig, run_dir: Path) -> Path | None:
    """``ckpt_path``: null (fresh run), ``last``, a run folder or a file.

    ``last`` is this run folder's own ``last.ckpt`` when it has one (the same command run again in a
    fixed folder); else, with a fixed folder, nothing (a fresh start); else the newest run under
    ``log_dir`` with the same overrides.
    """
    value = cfg.ckpt_path
    if value is None or value == "":
        return None
    if str(value) == "last":
        try:
            return resolve_last(run_dir, Path(cfg.log_dir))
        except LookupError as e:
            raise CheckpointError(
                f"ckpt_path=last: no run under {cfg.log_dir} with the overrides '{e}' has {CKPT_DIR}/last.ckpt; "
                f"pass ckpt_path=<run folder or .ckpt file>, or drop ckpt_path to start afresh") from None
    path = Path(str(value)).expanduser()
    if path.is_dir():
        for candidate in (path / CKPT_DIR / "last.ckpt", path / "last.ckpt"):
            if candidate.is_file():
                return candidate
        raise CheckpointError(f"ckpt_path={value}: the folder holds no {CKPT_DIR}/last.ckpt")
    if not path.is_file():
        raise CheckpointError(f"ckpt_path={value}: no such file or folder; valid: last, a run folder, or a .ckpt file")
    return path


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


def _first_difference(saved: Any, current: Any, prefix: str) -> tuple[str, Any, Any] | None:
    if isinstance(saved, dict) and isinstance(current, dict):
        for key in sorted(set(saved) | set(current)):
            name = f"{prefix}.{key}" if prefix else key
            if name in MAY_DIFFER:
                continue
            diff = _first_difference(saved.get(key, "<unset>"), current.get(key, "<unset>"), name)
            if diff:
                return diff
        return None
    return None if saved == current else (prefix, saved, current)


def check_checkpoint(path: Path, module: L.LightningModule, cfg: DictConfig) -> int:
    """Check that ``path`` fits this model and run; return its step. Names the first mismatch."""
    ckpt = load_checkpoint(path)
    saved = ckpt["state_dict"]
    expected = module.state_dict()
    for key, tensor in expected.items():
        if key in saved and tuple(saved[key].shape) != tuple(tensor.shape):
            raise CheckpointError(
                f"ckpt_path={path} is from another model: {key} has shape {tuple(saved[key].shape)} in the checkpoint "
                f"but {tuple(tensor.shape)} in this model (model={cfg.model.name}, ffn={cfg.ffn.name})")
    missing = [k for k in expected if k not in saved]
    extra = [k for k in saved if k not in expected]
    this_run = f"(this run: model={cfg.model.name}, ffn={cfg.ffn.name})"
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
    current = OmegaConf.to_container(cfg, resolve=True)
    diff = _first_difference({k: config.get(k) for k in MUST_MATCH if k in config},
                             {k: current.get(k) for k in MUST_MATCH if k in config}, "")
    if diff:
        raise CheckpointError(f"ckpt_path={path} was trained with {diff[0]}={diff[1]} but this run has "
                              f"{diff[0]}={diff[2]}; resume with the checkpoint's settings")
    return int(ckpt["global_step"])


def resume_command(ckpt: Path | None) -> str:
    """The exact command line that resumes this run from ``ckpt`` (None: that runs it again from the start)."""
    from hydra.core.hydra_config import HydraConfig

    args: list[str] = []
    if HydraConfig.initialized():
        args = [a for a in HydraConfig.get().overrides.task if not a.split("=")[0].lstrip("+~") in
                ("ckpt_path", "debug.kill_at_step", "debug.disk_full_at_checkpoint")]
        if fixed_run_dir():  # the resumed run goes on in the same folder, as a requeued job would
            args.append(f'hydra.run.dir="{Path(HydraConfig.get().runtime.output_dir).resolve()}"')
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    # an installed entry point (ffn-zoo-train) is run by its name; anything else (train.py, python -c, pytest and its
    # xdist workers, which run as python -c) as the repo's train.py
    named = script and script != "-c" and not script.endswith(".py") and "pytest" not in script
    prog = [script] if named else ["python", "train.py"]
    # quoted for Hydra too: a run folder name holds "," and "=", which an unquoted override value may not
    return shlex.join([*prog, *args, *([f'ckpt_path="{ckpt.resolve()}"'] if ckpt else [])])
