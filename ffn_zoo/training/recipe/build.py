"""From configs to objects: the one path both ``train.py`` and :func:`build_model` take.

Configs hold names and values; this module resolves them through the tables in
``ffn_zoo.nn.ffn`` and ``ffn_zoo.nn.model``, so a reader can follow the imports from the
entry point to the network (no ``_target_`` strings).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ffn_zoo.errors import ConfigError, require_positive
from ffn_zoo.nn.ffn import FFNSpec, check_variant_spec, hidden_width
from ffn_zoo.nn.model import ModelConfig, TransformerLM
from ffn_zoo.training.recipe.optim import lr_schedule
from ffn_zoo.training.recipe.precision import check_precision
from ffn_zoo.training.lifecycle.runs import register_resolvers

PACKAGE = Path(__file__).resolve().parents[2]  # ffn_zoo/
# where configs/ is: shipped inside an installed package (pyproject maps configs/ to ffn_zoo/configs), or at
# the top of a source checkout (an editable install, a worktree on PYTHONPATH)
CONFIG_DIRS = (PACKAGE / "configs", PACKAGE.parent / "configs")
CONFIG_DIR = next((d for d in CONFIG_DIRS if (d / "train.yaml").is_file()), CONFIG_DIRS[-1])


def config_dir() -> Path:
    if not (CONFIG_DIR / "train.yaml").is_file():
        raise ConfigError(f"configs not found in {' or '.join(map(str, CONFIG_DIRS))}; reinstall ffn-zoo "
                          f"(pip install .) or run from its source tree")
    return CONFIG_DIR


def validate_config(cfg: DictConfig) -> None:
    """The checks no single module owns: budgets > 0, a context that fits the position table, the schedule's keys,
    the precision's name."""
    require_positive(**{
        "trainer.max_steps": cfg.trainer.max_steps, "data.batch_size": cfg.data.batch_size,
        "data.val_batch_size": cfg.data.val_batch_size, "data.seq_len": cfg.data.seq_len,
        "trainer.val_check_interval": cfg.trainer.val_check_interval, "model.d_ff": cfg.model.d_ff,
    })
    if cfg.data.seq_len > cfg.model.seq_len:
        raise ConfigError(
            f"data.seq_len={cfg.data.seq_len} is longer than the position table (model.seq_len={cfg.model.seq_len}); "
            f"set model.seq_len >= {cfg.data.seq_len}"
        )
    lr_schedule(cfg.optim, cfg.trainer.max_steps)  # the schedule's keys fail here, before anything is built
    check_precision(cfg.impl.precision)


def model_config(cfg: DictConfig, vocab_size: int | None = None) -> ModelConfig:
    """ModelConfig from the ``model`` and ``ffn`` groups; ``vocab_size`` comes from the corpus unless set."""
    m, f = cfg.model, cfg.ffn
    check_variant_spec(f.name, f.gated, f.activation)
    if m.vocab_size is not None and vocab_size is not None and m.vocab_size != vocab_size:
        raise ConfigError(
            f"model.vocab_size={m.vocab_size} but the corpus/tokenizer has {vocab_size} tokens; "
            f"set model.vocab_size={vocab_size} or null"
        )
    vocab = m.vocab_size if m.vocab_size is not None else vocab_size
    if vocab is None:
        raise ConfigError("model.vocab_size is null and no corpus gives it; set model.vocab_size")
    return ModelConfig(
        vocab_size=int(vocab), seq_len=m.seq_len, d_model=m.d_model, n_layers=m.n_layers, n_heads=m.n_heads,
        norm=m.norm, dropout=m.dropout, bias=m.bias, causal=cfg.objective != "mlm",
        init=m.init, init_std=m.init_std, residual_std=m.residual_std,
        ffn=FFNSpec(f.gated, f.activation, hidden_width(m.d_ff, gated=f.gated, match_params=f.match_params,
                                                        multiple_of=f.multiple_of), bias=f.bias, dropout=f.dropout),
    )


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The training config exactly as ``python train.py <overrides>`` would compose it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_resolvers()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        return hydra_compose(config_name="train", overrides=list(overrides or []))


def build_model(model: str = "bert_base", ffn: str = "geglu", **overrides: Any) -> TransformerLM:
    """The network ``python train.py model=<model> ffn=<ffn>`` trains: token ids (B, T) -> logits (B, T, vocab).

    ``overrides`` are keys of the ``model`` or ``ffn`` config, e.g. ``vocab_size=8192, seq_len=128,
    match_params=False``. With ``vocab_size`` unset, the default corpus's vocabulary is used.
    """
    cfg = compose([f"model={model}", f"ffn={ffn}"])
    for key, value in overrides.items():
        group = "model" if key in cfg.model else "ffn" if key in cfg.ffn else None
        if group is None:
            valid = sorted(set(cfg.model) | set(cfg.ffn))
            raise ConfigError(f"unknown build_model override {key!r}; valid: {', '.join(valid)}")
        OmegaConf.update(cfg, f"{group}.{key}", value)
    corpus_vocab = cfg.data.get("vocab_size") if cfg.model.vocab_size is None else None
    return TransformerLM(model_config(cfg, vocab_size=corpus_vocab))
