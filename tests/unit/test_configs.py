"""Every yaml under configs/ composes, and what it configures instantiates."""

import inspect
from pathlib import Path

import lightning as L
import pytest
import torch

from ffn_zoo.training.recipe.build import CONFIG_DIR, compose, model_config
from ffn_zoo.data import CORPORA, build_corpus
from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.errors import ConfigError
from ffn_zoo.training.recipe.optim import build_optimizer
from ffn_zoo.training.recipe.scale import trainer_kwargs
from ffn_zoo.training.reporting.loggers import build_loggers

OPTIONS = sorted(
    (p.parent.name, p.stem)
    for p in CONFIG_DIR.glob("*/*.yaml")
)
SMALL = ["model.d_model=32", "model.n_layers=1", "model.n_heads=2", "model.d_ff=64", "model.seq_len=16"]


def test_primary_config_composes() -> None:
    cfg = compose()
    assert (cfg.model.name, cfg.ffn.name, cfg.data.name, list(cfg.logger)) == ("bert_base", "gelu", "toy", ["tensorboard"])


@pytest.mark.parametrize("group, option", OPTIONS, ids=lambda v: str(v))
def test_option_composes_and_instantiates(group: str, option: str, tmp_path: Path) -> None:
    overrides = [f"{group}={option}"] + ([] if group in ("model", "experiment") else SMALL)
    cfg = compose(overrides)

    vocab = cfg.model.vocab_size or cfg.data.get("vocab_size") or 256
    model = TransformerLM(model_config(cfg, vocab_size=None if cfg.model.vocab_size else vocab))
    assert model(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, model.cfg.vocab_size)
    build_optimizer(model, cfg.optim)
    assert [type(lg).__name__ for lg in build_loggers(cfg.logger, tmp_path)] == [
        {"tensorboard": "TensorBoardLogger", "csv": "CSVLogger", "wandb": "WandbLogger"}[k] for k in cfg.logger]

    trainer_args = set(inspect.signature(L.Trainer).parameters)
    assert set(cfg.trainer) <= trainer_args, f"not Trainer arguments: {set(cfg.trainer) - trainer_args}"
    if cfg.trainer.accelerator in ("cpu", "auto") and group == "trainer":
        args = {**cfg.trainer, "logger": False, "default_root_dir": str(tmp_path)}
        if cfg.trainer.get("strategy") == "fsdp" and not torch.cuda.is_available():
            with pytest.raises(ConfigError, match="fsdp needs GPUs"):  # one line, not Lightning's traceback
                trainer_kwargs(args)
        else:
            L.Trainer(**trainer_kwargs(args))

    if group == "data" and cfg.data.name == "toy":
        small = {**cfg.data, "train_tokens": 4096, "val_tokens": 512}
        assert build_corpus(small).vocab_size == cfg.data.vocab_size
    if group == "data":
        assert cfg.data.name in CORPORA
