"""Multi-device training: ``trainer.strategy`` names (configs/trainer/{ddp,fsdp}.yaml) -> Lightning strategies.

The global batch is the config's ``data.batch_size`` whatever the device count: ``StepSampler`` gives each of
the world_size ranks its slice of the same step's batch, DDP/FSDP average the gradients of equal slices (so the
step equals the single-device step on the whole batch), and validation sums are all-reduced in ``LitLM``.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ffn_zoo.errors import ConfigError
from ffn_zoo.nn.model import Block


def build_strategy(name: Any) -> Any:
    """``fsdp`` shards at Transformer-block granularity (one FSDP unit per ``Block``, so one block's full
    parameters are gathered at a time); every other name (auto, ddp, ddp_spawn, ...) goes to Lightning as is."""
    if name == "fsdp":
        from lightning.pytorch.strategies import FSDPStrategy

        return FSDPStrategy(auto_wrap_policy={Block}, sharding_strategy="FULL_SHARD")
    return name


def trainer_kwargs(trainer_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``configs/trainer`` as ``lightning.Trainer`` keyword arguments, the strategy resolved by name."""
    kwargs = dict(trainer_cfg)
    accelerator = kwargs.get("accelerator", "auto")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    if kwargs.get("strategy") == "fsdp" and on_cpu:
        # Lightning's FSDPStrategy refuses a CPU accelerator; say so in one line instead of its traceback
        raise ConfigError("trainer=fsdp needs GPUs (Lightning's FSDP does not run on CPU); "
                          "on CPU use trainer=ddp trainer.accelerator=cpu trainer.devices=N")
    if "strategy" in kwargs:
        kwargs["strategy"] = build_strategy(kwargs["strategy"])
    return kwargs
