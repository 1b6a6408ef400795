"""The training RNG stream: dropout masks and other draws of the training steps, kept apart and saved in
every checkpoint, so a resumed run draws exactly what the uninterrupted one would have drawn."""

from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch


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
