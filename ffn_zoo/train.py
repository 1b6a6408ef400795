"""Training entry point: Hydra config -> corpus, model, LightningModule, Trainer -> run folder.

Each run folder holds the TensorBoard events, ``.hydra/`` (the exact config) and
``metrics.json`` (the numbers later tools read). ``python train.py --help`` lists the groups.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import hydra
import warnings
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.build import config_dir, model_config
from ffn_zoo.callbacks import StepProgressBar, ThroughputMonitor
from ffn_zoo.data import build_corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.errors import ConfigError, FFNZooError, UnknownNameError, require_positive
from ffn_zoo.ffn import FFN_VARIANTS, FFNVariant
from ffn_zoo.flops import gemm_peak_flops, training_flops_per_token
from ffn_zoo.lit_module import LitLM
from ffn_zoo.model import TransformerLM


def _dirname(overrides: str) -> str:
    """A run folder name from Hydra's override string: no path separators, bounded length."""
    name = re.sub(r"[/\\]+", "_", overrides) or "default"
    return name if len(name) <= 120 else name[:110] + f"~{abs(hash(name)) % 10**8:08d}"


OmegaConf.register_new_resolver("ffnzoo_dirname", _dirname, replace=True)
warnings.filterwarnings("ignore", message=r".*(LeafSpec|litlogger|does not have many workers|GPU available).*")

LOGGERS = ("tensorboard", "csv")


def build_logger(cfg: DictConfig, run_dir: Path) -> Logger:
    name = cfg.logger.name
    if name == "tensorboard":
        # events straight into the run folder, so TensorBoard names the run by its folder
        return TensorBoardLogger(save_dir=str(run_dir), name="", version="", default_hp_metric=False)
    if name == "csv":
        return CSVLogger(save_dir=str(run_dir), name="", version="")
    raise UnknownNameError("logger", name, LOGGERS)


def describe(cfg: DictConfig, model: TransformerLM, corpus_desc: str, device: str) -> list[str]:
    """The startup facts, one line each."""
    mc = model.cfg
    variant = FFN_VARIANTS.get(cfg.ffn.name, FFNVariant(cfg.ffn.gated, cfg.ffn.activation, "custom"))
    width = f"{mc.ffn_hidden}" + (
        f" (parameter-matched to dense {cfg.model.d_ff})" if mc.ffn_gated and cfg.ffn.match_params else ""
    )
    return [
        f"ffn      {cfg.ffn.name}: {variant.form}, FFN(x) = {variant.formula()}  [{variant.paper}]",
        f"width    hidden {width}, bias={mc.ffn_bias}, dropout={mc.ffn_dropout}",
        f"params   FFN {model.num_params(ffn_only=True):,} ({model.num_params(ffn_only=True) // mc.n_layers:,}/layer), "
        f"total {model.num_params():,}",
        f"model    {cfg.model.name}: d_model {mc.d_model}, {mc.n_layers} layers, {mc.n_heads} heads, "
        f"{mc.norm}-LN, context {cfg.data.seq_len}, vocab {mc.vocab_size}",
        f"data     {corpus_desc}",
        f"budget   {cfg.trainer.max_steps} steps × {cfg.data.batch_size} × {cfg.data.seq_len} tokens, "
        f"{cfg.optim.name} lr {cfg.optim.lr}, seed {cfg.seed}",
        f"device   {device}, precision {cfg.impl.precision}, {torch.get_num_threads()} threads",
    ]


def estimate_cpu_time(model: TransformerLM, tokens: int, seq_len: int) -> str:
    """A rough wall-time estimate on this CPU: training FLOPs / (measured GEMM peak × 0.5 MFU)."""
    flops = training_flops_per_token(model, seq_len) * tokens
    peak = gemm_peak_flops(seconds=0.3)
    seconds = flops / (0.5 * peak)
    return f"estimate ~{seconds / 3600:.1f} h on this CPU ({peak / 1e9:.0f} GFLOP/s GEMM peak, assuming 50% MFU)"


def validate_config(cfg: DictConfig) -> None:
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


def run(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Train one configuration; write ``metrics.json`` into ``run_dir`` and return it."""
    started = time.time()
    validate_config(cfg)
    if cfg.impl.threads:
        torch.set_num_threads(int(cfg.impl.threads))
    torch.set_float32_matmul_precision(cfg.impl.matmul_precision)
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    corpus = build_corpus(OmegaConf.to_container(cfg.data, resolve=True))
    L.seed_everything(cfg.seed, workers=True, verbose=False)  # init depends on the seed only, not on data prep
    model = TransformerLM(model_config(cfg, vocab_size=corpus.vocab_size))
    module = LitLM(model, cfg.optim, cfg.trainer.max_steps, corpus.optimal_val_loss, corpus.val_bytes)
    datamodule = LMDataModule(corpus, cfg.data.batch_size, cfg.data.val_batch_size, cfg.seed, cfg.impl.num_workers)

    tokens_per_step = cfg.data.batch_size * cfg.data.seq_len
    throughput = ThroughputMonitor(tokens_per_step)
    trainer = L.Trainer(
        **OmegaConf.to_container(cfg.trainer, resolve=True),
        precision=cfg.impl.precision,
        gradient_clip_val=cfg.optim.grad_clip or None,
        logger=build_logger(cfg, run_dir),
        callbacks=[throughput, StepProgressBar(refresh_rate=5)],
        default_root_dir=str(run_dir),
        enable_checkpointing=False,
        use_distributed_sampler=False,  # our StepSampler shards the global batch itself
    )
    if trainer.is_global_zero:
        for line in describe(cfg, model, corpus.description, str(trainer.strategy.root_device)):
            print(line, flush=True)
        if cfg.model.name == "bert_base" and trainer.strategy.root_device.type == "cpu":
            tokens = cfg.trainer.max_steps * tokens_per_step
            print(f"note     BERT-base on a CPU: {estimate_cpu_time(model, tokens, cfg.data.seq_len)}; "
                  f"model=mini finishes in minutes", flush=True)
    if cfg.impl.compile:
        module.model = torch.compile(module.model)

    trainer.fit(module, datamodule=datamodule)
    if int(cfg.trainer.max_steps) % int(cfg.trainer.val_check_interval):
        trainer.validate(module, datamodule=datamodule, verbose=False)  # always end on a full validation

    val = module.last_val
    metrics: dict[str, Any] = {
        "status": "ok",
        "ffn": cfg.ffn.name,
        "activation": cfg.ffn.activation,
        "gated": bool(cfg.ffn.gated),
        "d_ff": model.cfg.ffn_hidden,
        "params_total": model.num_params(),
        "params_ffn": model.num_params(ffn_only=True),
        "val_loss": val.get("val/loss"),
        "val_ppl": val.get("val/ppl"),
        "val_bpb": val.get("val/bpb"),
        "optimal_val_ppl": math.exp(corpus.optimal_val_loss) if corpus.optimal_val_loss is not None else None,
        "tokens_seen": trainer.global_step * tokens_per_step,
        "train_tokens_per_s": throughput.mean_tokens_per_s,
        "flops_per_token": training_flops_per_token(model, cfg.data.seq_len),
        "steps": trainer.global_step,
        "seed": cfg.seed,
        "model": cfg.model.name,
        "data": cfg.data.name,
        "wall_s": time.time() - started,
    }
    if trainer.is_global_zero:
        log_hparams(trainer.logger, cfg, metrics)
        (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
        opt = f", optimum {metrics['optimal_val_ppl']:.2f}" if metrics["optimal_val_ppl"] else ""
        print(f"done     val/loss {metrics['val_loss']:.4f}, val/ppl {metrics['val_ppl']:.2f}{opt}; "
              f"{metrics['wall_s']:.0f} s -> {run_dir}", flush=True)
    return metrics


def log_hparams(logger: Logger | None, cfg: DictConfig, metrics: dict[str, Any]) -> None:
    """Hyperparameters with the final metrics, so TensorBoard's HParams tab compares runs."""
    if logger is None:
        return
    flat = {k: (v if isinstance(v, (int, float, str, bool)) else str(v))
            for k, v in _flatten(OmegaConf.to_container(cfg, resolve=True)).items()}
    finals = {f"hp/{k}": v for k, v in metrics.items() if k in ("val_loss", "val_ppl", "val_bpb") and v is not None}
    if isinstance(logger, TensorBoardLogger):
        logger.log_hyperparams(flat, metrics=finals)
    else:
        logger.log_hyperparams(flat)
    logger.save()


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(_flatten(v, key + ".") if isinstance(v, dict) else {key: v})
    return out


_failures: list[str] = []


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
def _hydra_task(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        run(cfg, run_dir)
    except FFNZooError as e:
        # the user's input, not a bug: one line, no traceback; recorded so a sweep goes on
        print(f"error: {e}", file=sys.stderr, flush=True)
        (run_dir / "metrics.json").write_text(json.dumps({"status": "failed", "error": str(e)}, indent=2) + "\n")
        _failures.append(str(run_dir))


def main() -> None:
    _hydra_task()
    if _failures:
        if len(_failures) > 1 or os.environ.get("FFNZOO_VERBOSE"):
            print(f"{len(_failures)} run(s) failed: {', '.join(_failures)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
