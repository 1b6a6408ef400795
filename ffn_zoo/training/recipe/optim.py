"""Optimizers and learning-rate schedules by name (``configs/optim/*.yaml``)."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ffn_zoo.errors import ConfigError, UnknownNameError, require_positive


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices (linear and embedding weights); never biases, norms or scalar activation parameters."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _adamw(model: nn.Module, cfg: Mapping[str, Any]) -> torch.optim.Optimizer:
    # fused AdamW: one kernel over all parameters (~3x faster than the per-tensor loop at BERT-base on CPU)
    return torch.optim.AdamW(
        param_groups(model, cfg["weight_decay"]), lr=cfg["lr"], betas=tuple(cfg["betas"]), eps=cfg["eps"],
        fused=cfg["fused"],
    )


class Adafactor(torch.optim.Optimizer):
    """Adafactor as mesh-tensorflow's ``AdafactorOptimizer`` computes it, the optimizer T5 and Shazeer 2020 trained
    with (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory Cost").

    For each parameter W at step t = 1, 2, ... with gradient G:

        V_t = β_t·V_{t-1} + (1 - β_t)·(G² + eps1),   β_t = 1 - t^-decay_exponent   (no bias correction needed)
        U_t = G / √V_t,  then U_t /= max(1, RMS(U_t) / clip_threshold)             (update clipping)
        W  -= ρ_t · max(eps2, RMS(W)) · U_t,          ρ_t = min(lr_t, 1/√t)          (relative step)

    No momentum (mesh-tf's beta1 = 0). A matrix whose dims are both >= ``factor_min_dim`` keeps only the row and
    column means R, C of V (V ≈ R·Cᵀ / mean(R)); smaller matrices and vectors keep the full V. ``lr_t`` is the
    scheduled lr (T5: inverse_sqrt, 1e-2 held for 10⁴ steps, so ρ_t = 1/√max(t, 10⁴)).

    How ``torch.optim.Adafactor`` (torch 2.13) differs, and why this class exists:
    - it factors every matrix; mesh-tf/T5 (``min_dim_size_to_factor = 128``) keeps a full V for a matrix with a
      dim < 128: the two agree for d_model >= 128 (model=mini, bert_base), not for model=tiny;
    - it clamps √V at eps1 (default: float32 machine eps) instead of adding eps1 = 1e-30 to G²;
    - its lr is also the decoupled weight-decay coefficient; mesh-tf has no weight decay (ours: lr·weight_decay,
      as torch, 0 in configs/optim/adafactor.yaml).
    The relative step, the RMS(W) scaling (eps2 1e-3), the 1 - t^-0.8 decay and update clipping are the same.
    """

    def __init__(self, params: Any, *, lr: float, decay_exponent: float, eps1: float, eps2: float,
                 clip_threshold: float, factor_min_dim: int, scale_by_param_rms: bool, weight_decay: float) -> None:
        defaults = dict(lr=lr, decay_exponent=decay_exponent, eps1=eps1, eps2=eps2, clip_threshold=clip_threshold,
                        factor_min_dim=factor_min_dim, scale_by_param_rms=scale_by_param_rms,
                        weight_decay=weight_decay)
        super().__init__(params, defaults)

    @staticmethod
    def _rms(x: torch.Tensor) -> torch.Tensor:
        return x.square().mean().sqrt()

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad.float()  # (n, m) or (n,)
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    if g.dim() == 2 and min(g.shape) >= group["factor_min_dim"]:
                        state["row"] = g.new_zeros(g.shape[0])  # (n,) mean of V over columns
                        state["col"] = g.new_zeros(g.shape[1])  # (m,) mean of V over rows
                    else:
                        state["v"] = torch.zeros_like(g)
                state["step"] += 1
                t = state["step"].item()
                mix = t ** -group["decay_exponent"]  # 1 - β_t: 1 at the first step
                g2 = g.square() + group["eps1"]
                if "row" in state:
                    row, col = state["row"].lerp_(g2.mean(1), mix), state["col"].lerp_(g2.mean(0), mix)
                    u = g * (row / row.mean()).rsqrt()[:, None] * col.rsqrt()[None, :]  # (n, m)
                else:
                    u = g * state["v"].lerp_(g2, mix).rsqrt()
                u /= (self._rms(u) / group["clip_threshold"]).clamp(min=1.0)
                rho = min(group["lr"], t ** -0.5)
                scale = rho * self._rms(p.float()).clamp(min=group["eps2"]) if group["scale_by_param_rms"] else rho
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                p.sub_((u * scale).to(p.dtype))
        return loss


def _adafactor(model: nn.Module, cfg: Mapping[str, Any]) -> torch.optim.Optimizer:
    return Adafactor(
        param_groups(model, cfg["weight_decay"]), lr=cfg["lr"], decay_exponent=cfg["decay_exponent"],
        eps1=cfg["eps1"], eps2=cfg["eps2"], clip_threshold=cfg["clip_threshold"],
        factor_min_dim=cfg["factor_min_dim"], scale_by_param_rms=cfg["scale_by_param_rms"],
        weight_decay=cfg["weight_decay"],
    )


OPTIMIZERS: dict[str, Callable[[nn.Module, Mapping[str, Any]], torch.optim.Optimizer]] = {
    "adamw": _adamw,
    "adafactor": _adafactor,
}


def build_optimizer(model: nn.Module, cfg: Mapping[str, Any]) -> torch.optim.Optimizer:
    if cfg["name"] not in OPTIMIZERS:
        raise UnknownNameError("optim", cfg["name"], OPTIMIZERS)
    require_positive(**{"optim.lr": cfg["lr"]})
    if cfg["weight_decay"] < 0:
        raise ConfigError(f"optim.weight_decay={cfg['weight_decay']} must be >= 0")
    return OPTIMIZERS[cfg["name"]](model, cfg)


SCHEDULES = ("cosine", "linear", "constant", "inverse_sqrt", "wsd")
# WSD cooldown shapes (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training
# Durations"): decay progress p in (0, 1] -> the share of (peak − min) lr still left
DECAY_SHAPES: dict[str, Callable[[float], float]] = {
    "linear": lambda p: 1.0 - p,
    "1-sqrt": lambda p: 1.0 - math.sqrt(p),
}


def lr_multiplier(step: int, *, schedule: str, warmup_steps: int, total_steps: int, min_lr_ratio: float,
                  decay_steps: int | None = None, decay_shape: str | None = None) -> float:
    """Factor on the peak lr at ``step``: linear warm-up over ``warmup_steps``, then the named decay.

    ``inverse_sqrt`` is T5's schedule: constant through warm-up, then 1/√(step/warmup).
    ``wsd`` (warmup-stable-decay) holds the peak until its last ``decay_steps`` steps, which decay with
    ``decay_shape`` to ``min_lr_ratio`` at the final step. Before its decay it *is* ``constant``, float for
    float, which is what lets a ladder branch every budget's cooldown from one constant-lr trunk.
    """
    if schedule not in SCHEDULES:
        raise UnknownNameError("lr schedule", schedule, SCHEDULES)
    if schedule == "inverse_sqrt":
        return 1.0 / math.sqrt(max(step + 1, warmup_steps) / max(warmup_steps, 1))
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    if schedule == "wsd":
        decay_start = total_steps - decay_steps
        if step < decay_start:
            return 1.0
        progress = min(1.0, (step - decay_start + 1) / decay_steps)  # the last step reaches min_lr_ratio
        return min_lr_ratio + (1 - min_lr_ratio) * DECAY_SHAPES[decay_shape](progress)
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    shape = 0.5 * (1 + math.cos(math.pi * progress)) if schedule == "cosine" else 1.0 - progress
    return min_lr_ratio + (1 - min_lr_ratio) * shape


def warmup_steps_of(cfg: Mapping[str, Any], total_steps: int) -> int:
    """``optim.warmup`` is a step count (int >= 1) or a fraction of the budget (float < 1)."""
    w = cfg["warmup"]
    if w < 0:
        raise ConfigError(f"optim.warmup={w} must be >= 0 (steps, or a fraction of trainer.max_steps if < 1)")
    return int(round(w * total_steps)) if w < 1 else int(w)


def decay_steps_of(cfg: Mapping[str, Any], total_steps: int) -> int:
    """WSD's cooldown: the last round(``optim.decay_fraction`` × steps) steps of the run."""
    f = cfg["decay_fraction"]
    if not 0 < f <= 1:
        raise ConfigError(f"optim.decay_fraction={f} must be in (0, 1]: the share of the run's steps spent decaying")
    if cfg["decay_shape"] not in DECAY_SHAPES:
        raise UnknownNameError("optim.decay_shape", cfg["decay_shape"], DECAY_SHAPES)
    return int(round(f * total_steps))


def lr_schedule(cfg: Mapping[str, Any], total_steps: int) -> Callable[[int], float]:
    """step -> lr factor for a run of ``total_steps`` (what LambdaLR calls); the settings are checked here."""
    warmup = warmup_steps_of(cfg, total_steps)
    decay, shape = None, None
    if cfg["schedule"] == "wsd":  # the decay_* keys are read only by the schedule that uses them
        decay, shape = decay_steps_of(cfg, total_steps), cfg["decay_shape"]
        if not (decay >= 1 and warmup <= total_steps - decay):
            raise ConfigError(
                f"optim.schedule=wsd: warm-up {warmup} + cooldown {decay} steps (optim.warmup, optim.decay_fraction="
                f"{cfg['decay_fraction']}) do not fit in trainer.max_steps={total_steps}; the cooldown needs >= 1 "
                f"step and must start after the warm-up")

    def factor(step: int) -> float:  # a plain function: LambdaLR keeps no state of it in checkpoints
        return lr_multiplier(step, schedule=cfg["schedule"], warmup_steps=warmup, total_steps=total_steps,
                             min_lr_ratio=cfg["min_lr_ratio"], decay_steps=decay, decay_shape=shape)

    return factor


def describe_optim(cfg: Mapping[str, Any], total_steps: int) -> str:
    """The effective optimizer settings as one start-up line (what a preset or the command line left in force)."""
    warmup = warmup_steps_of(cfg, total_steps)
    lr = f"relative step lr {cfg['lr']:g} (× RMS of each parameter)" if cfg["name"] == "adafactor" else f"lr {cfg['lr']:g}"
    if cfg["schedule"] == "inverse_sqrt":
        schedule = f"inverse_sqrt: held {warmup} steps, then × √({warmup}/t)"
    elif cfg["schedule"] == "constant":
        schedule = f"constant after {warmup} warm-up steps"
    elif cfg["schedule"] == "wsd":
        schedule = (f"wsd: constant after {warmup} warm-up steps, the last {decay_steps_of(cfg, total_steps)} steps "
                    f"decay ({cfg['decay_shape']}) to {cfg['min_lr_ratio']:g}·lr")
    else:
        schedule = f"{cfg['schedule']} to {cfg['min_lr_ratio']:g}·lr after {warmup} warm-up steps"
    return f"optim    {cfg['name']}, {lr}, {schedule}, grad clip {cfg['grad_clip'] or 'off'}"
