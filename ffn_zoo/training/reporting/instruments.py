"""Activation statistics of the FFN hidden layer: dead units, mean/std, zeros, saturation, learned β.

Every ``every_n_steps`` training steps (and once at the end of training) the callback runs the model
in eval mode on one fixed validation batch with forward hooks on each layer's ``ffn.act`` (the
activation: the hidden of a dense FFN, the *gate* of a gated one) and ``ffn.w_out`` (its input is the
hidden the FFN writes out: act(W_in·x), or act(W_gate·x) ⊙ W_up·x). Hooks exist only during that one
forward, so training steps run untouched.

Per layer (``layer_00`` is the first), under the ``~act/`` prefix (:data:`ACT`):
- ``~act/dead_frac``: fraction of hidden units whose activation is ≤ ε for *every* token of the batch
  (what that means per activation: the ``dead`` rule of its entry in ``ACTIVATIONS``; gated variants: the gate).
- ``~act/zero_frac``: fraction of activation outputs that are exactly 0.
- ``~act/saturated_frac``: fraction of entries where |act′(pre-activation)| < ``sat_tol``: the unit
  passes (almost) no gradient there. For a gated FFN this is the gate's saturation.
- ``~act/mean``, ``~act/std``: of the hidden the FFN writes out (the product, for gated variants).
- ``~act/beta``: the learned β of ``swish_beta`` / ``learnable_gelu``.
"""

from __future__ import annotations

from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from torch import nn

from ffn_zoo.errors import ConfigError
from ffn_zoo.nn.activations import ACTIVATIONS

# The tag prefix of these statistics. "~" sorts after letters, so TensorBoard and W&B (which order tag groups
# by name) show train/ and val/ first and the activation statistics last; runs before it used "act".
ACT = "~act"
LEGACY_ACT = "act"


def act_tag(tags: Any, name: str) -> str | None:
    """The tag of statistic ``name`` (e.g. ``dead_frac/mean``) among a run's ``tags``, new or legacy prefix."""
    return next((t for t in (f"{ACT}/{name}", f"{LEGACY_ACT}/{name}") if t in tags), None)


def dead_units(act: torch.Tensor, eps: float = 1e-6, two_sided: bool = False) -> torch.Tensor:
    """Boolean (hidden,) mask of units whose activation is ≤ ``eps`` for every token of ``act`` (..., hidden).

    ``two_sided`` uses |act| ≤ eps (for activations without an off-region, e.g. identity).
    """
    flat = act.reshape(-1, act.shape[-1])  # (N, H)
    off = flat.abs() <= eps if two_sided else flat <= eps
    return off.all(dim=0)  # (H,)


def elementwise_derivative(act: nn.Module, pre: torch.Tensor) -> torch.Tensor:
    """act′(pre) for an elementwise activation, by autograd. Calls ``act.forward`` (not ``act(...)``)
    so the callback's own hooks do not fire again."""
    x = pre.detach().float().requires_grad_(True)
    with torch.enable_grad():
        (grad,) = torch.autograd.grad(act.forward(x).sum(), x)
    return grad


class ActivationStats(L.Callback):
    """Logs the statistics above to the run's logger every ``every_n_steps`` steps and at the end of
    training; :meth:`final_metrics` gives the last values for ``metrics.json``.

    ``inputs`` (B, T) is the fixed batch the model is run on: the same tokens at every step, so the
    curves move only because the model does.
    """

    def __init__(self, inputs: torch.Tensor, every_n_steps: int = 50, eps: float = 1e-6, sat_tol: float = 0.01,
                 histograms: bool = True) -> None:
        self.inputs, self.every_n_steps, self.eps, self.sat_tol = inputs, every_n_steps, eps, sat_tol
        self.histograms = histograms
        self.last: dict[str, float] = {}
        self._last_step = -1

    # --- measurement -------------------------------------------------------------------------------
    @torch.no_grad()
    def measure(self, model: nn.Module) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """Scalars {name/layer_XX: value} and histogram samples of one forward pass on ``self.inputs``."""
        blocks = list(model.blocks)
        scalars: dict[str, float] = {}
        hists: dict[str, torch.Tensor] = {}
        handles = []

        def on_act(i: int, gated: bool, two_sided: bool):
            def hook(module: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
                tag = f"layer_{i:02d}"
                out = out.float()  # (B, T, H): the hidden (dense) or the gate (gated)
                scalars[f"{ACT}/dead_frac/{tag}"] = dead_units(out, self.eps, two_sided).float().mean().item()
                scalars[f"{ACT}/zero_frac/{tag}"] = (out == 0).float().mean().item()
                deriv = elementwise_derivative(module, args[0])  # (B, T, H)
                scalars[f"{ACT}/saturated_frac/{tag}"] = (deriv.abs() < self.sat_tol).float().mean().item()
                if self.histograms:
                    hists[f"{ACT}/gate_hist/{tag}" if gated else f"{ACT}/hist/{tag}"] = out.flatten()

            return hook

        def on_hidden(i: int, gated: bool):
            def pre_hook(module: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
                tag = f"layer_{i:02d}"
                h = args[0].float()  # (B, T, H): what W_out reads
                scalars[f"{ACT}/mean/{tag}"] = h.mean().item()
                scalars[f"{ACT}/std/{tag}"] = h.std().item()
                if self.histograms and gated:
                    hists[f"{ACT}/hist/{tag}"] = h.flatten()

            return pre_hook

        was_training = model.training
        model.eval()
        try:
            for i, block in enumerate(blocks):
                ffn = block.ffn
                gated = hasattr(ffn, "w_gate")
                two_sided = ACTIVATIONS[ffn.activation].dead_two_sided  # e.g. bilinear: no off-region
                handles.append(ffn.act.register_forward_hook(on_act(i, gated, two_sided)))
                handles.append(ffn.w_out.register_forward_pre_hook(on_hidden(i, gated)))
                beta = getattr(ffn.act, "beta", None)
                if isinstance(beta, torch.Tensor):
                    scalars[f"{ACT}/beta/layer_{i:02d}"] = beta.item()
            device = next(model.parameters()).device
            model.forward(self.inputs.to(device))  # eager even under impl.compile (Module.compile wraps __call__)
        finally:
            for h in handles:
                h.remove()
            model.train(was_training)
        for key in ("dead_frac", "zero_frac", "saturated_frac"):
            values = [v for k, v in scalars.items() if k.startswith(f"{ACT}/{key}/")]
            scalars[f"{ACT}/{key}/mean"] = sum(values) / len(values)
        return scalars, hists

    # --- Lightning hooks ---------------------------------------------------------------------------
    def _record(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        step = trainer.global_step
        if step == self._last_step:
            return
        self._last_step = step
        scalars, hists = self.measure(pl_module.model)  # on every rank: a sharded (FSDP) forward needs them all
        self.last = scalars
        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            logger.log_metrics(scalars, step=step)
            if isinstance(logger, TensorBoardLogger):
                for tag, values in hists.items():
                    logger.experiment.add_histogram(tag, values.cpu(), global_step=step)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer, pl_module)  # the initialisation (or the resumed state) as the first point

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, *args: Any) -> None:
        if trainer.global_step % self.every_n_steps == 0:
            self._record(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer, pl_module)  # the final values, whatever every_n_steps is

    def final_metrics(self) -> dict[str, Any]:
        """The last measurement for ``metrics.json``: per-layer lists and means."""
        out: dict[str, Any] = {}
        for key in ("dead_frac", "zero_frac", "saturated_frac", "mean", "std", "beta"):
            layers = sorted(k for k in self.last if k.startswith(f"{ACT}/{key}/layer_"))
            if layers:
                out[f"act_{key}"] = [round(self.last[k], 6) for k in layers]
            if f"{ACT}/{key}/mean" in self.last:
                out[f"act_{key}_mean"] = round(self.last[f"{ACT}/{key}/mean"], 6)
        if out:
            out["act_stats_step"] = self._last_step
        return out


def build_activation_stats(inst: Any, val: np.ndarray, prepare: Any) -> ActivationStats | None:
    """The callback from the ``instruments`` config (None when off), on the first ``inst.batch_rows`` rows of
    the validation split ``val`` (M, seq_len + 1); ``prepare`` turns those rows into model inputs (B, T)."""
    if not inst.act_stats:
        return None
    every = int(inst.every_n_steps)
    if every <= 0:
        raise ConfigError(f"instruments.every_n_steps={every} must be > 0 (instruments.act_stats=false turns it off)")
    rows = torch.from_numpy(np.asarray(val[: int(inst.batch_rows)], dtype=np.int64))  # (B, seq_len + 1)
    return ActivationStats(prepare(rows), every, float(inst.dead_eps), float(inst.sat_tol), bool(inst.histograms))
