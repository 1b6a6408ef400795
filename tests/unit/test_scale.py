"""Scale-out configs: trainer=ddp/fsdp resolve to Lightning strategies; the SLURM launcher config composes
without hydra-submitit-launcher installed and is read only when selected."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ffn_zoo.training.recipe.build import config_dir
from ffn_zoo.errors import ConfigError
from ffn_zoo.nn.model import Block
from ffn_zoo.training.recipe.scale import build_strategy, trainer_kwargs


def _compose(overrides: list[str]):
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def test_ddp_preset_passes_strategy_by_name() -> None:
    cfg = _compose(["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"])
    kwargs = trainer_kwargs(OmegaConf.to_container(cfg.trainer, resolve=True))
    assert kwargs["strategy"] == "ddp" and kwargs["devices"] == 2 and kwargs["max_steps"] == cfg.trainer.max_steps


def test_fsdp_wraps_each_block() -> None:
    from lightning.pytorch.strategies import FSDPStrategy

    strategy = build_strategy("fsdp")
    assert isinstance(strategy, FSDPStrategy)
    policy = strategy.kwargs["auto_wrap_policy"]  # Lightning turns the set into a ModuleWrapPolicy
    assert set(getattr(policy, "_module_classes", policy)) == {Block}
    assert strategy.kwargs["use_orig_params"]  # per-parameter weight-decay groups survive the flattening
    assert build_strategy("ddp") == "ddp" and build_strategy("auto") == "auto"


def test_fsdp_on_cpu_is_a_one_line_config_error() -> None:
    cfg = _compose(["trainer=fsdp", "trainer.accelerator=cpu"])
    with pytest.raises(ConfigError, match="trainer=ddp"):
        trainer_kwargs(OmegaConf.to_container(cfg.trainer, resolve=True))


def test_submitit_slurm_launcher_composes_only_when_selected() -> None:
    default = _compose([])
    assert "basic_launcher" in default.hydra.launcher._target_  # local sweeps stay sequential
    slurm = _compose(["hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu"])
    launcher = slurm.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.partition == "gpu" and launcher.gpus_per_node == 1 and launcher.timeout_min > 0
    assert str(OmegaConf.to_container(launcher)["submitit_folder"]).endswith(".submitit/%j")
