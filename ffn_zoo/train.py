"""Training entry point: Hydra config -> corpus, model, LightningModule, Trainer -> run folder.

Each run folder holds the TensorBoard events, ``.hydra/`` (the exact config) and
``metrics.json`` (the numbers later tools read). ``python train.py --help`` lists the groups.
"""

from __future__ import annotations

import hashlib
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
from hydra.types import RunMode
from lightning.pytorch.loggers import CSVLogger, Logger, TensorBoardLogger
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.build import config_dir, model_config
from ffn_zoo.callbacks import StepProgressBar, ThroughputMonitor
from ffn_zoo.checkpoint import check_checkpoint, resolve_ckpt_path
from ffn_zoo.data import build_corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.errors import ConfigError, FFNZooError, UnknownNameError, require_positive
from ffn_zoo.faults import GracefulStop, NonFiniteGuard, record_failure, reliability_callbacks
from ffn_zoo.ffn import FFN_VARIANTS, FFNVariant
from ffn_zoo.flops import gemm_peak_flops, training_flops_per_token
from ffn_zoo.instruments import build_activation_stats
from ffn_zoo.lit_module import LitLM
from ffn_zoo.model import TransformerLM
from ffn_zoo.objectives import model_vocab_size, prepare_objective
from ffn_zoo.scale import trainer_kwargs


SWEPT_KEYS_ENV = "FFNZOO_SWEPT_KEYS"


def swept_keys(argv: list[str]) -> list[str]:
    """Keys a ``-m`` command line gives several values (``ffn=relu,gelu``, ``seed=range(3)``, ``glob(*)``)."""
    keys = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and not arg.startswith("-") and (re.search(r"^(glob|range|choice)\(", value) or
                                                   "," in re.sub(r"\[.*?\]|\(.*?\)", "", value)):
            keys.append(key.lstrip("+~"))
    return keys


def _dirname(overrides: str) -> str:
    """A run folder name from Hydra's override string: in a sweep only the swept keys (what differs between
    its jobs, e.g. ``ffn=geglu,seed=0``); no path separators; bounded length."""
    swept = [k for k in os.environ.get(SWEPT_KEYS_ENV, "").split(",") if k]
    if swept:
        parts = [p for p in overrides.split(",") if p.split("=", 1)[0] in swept]
        overrides = ",".join(parts) or overrides
    name = re.sub(r"[/\\]+", "_", overrides) or "default"
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return name if len(name) <= 120 else f"{name[:110]}~{digest}"


OmegaConf.register_new_resolver("ffnzoo_dirname", _dirname, replace=True)
warnings.filterwarnings("ignore", message=r".*(LeafSpec|litlogger|does not have many workers|GPU available|validated against ConfigStore schema).*")

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
    corpus, objective = prepare_objective(cfg, corpus)  # clm (default) or mlm; mlm adds the [MASK] id
    model = TransformerLM(model_config(cfg, vocab_size=model_vocab_size(objective.name, corpus.vocab_size)))
    module = LitLM(model, cfg.optim, cfg.trainer.max_steps, corpus.optimal_val_loss, corpus.val_bytes, objective)
    datamodule = LMDataModule(corpus, cfg.data.batch_size, cfg.data.val_batch_size, cfg.seed, cfg.impl.num_workers)
    ckpt_path = resolve_ckpt_path(cfg, run_dir)  # None: a fresh run (checkpoint.py says where "last" looks)
    resume_step = check_checkpoint(ckpt_path, module, cfg) if ckpt_path else None  # names the first mismatch
    safety = reliability_callbacks(cfg, run_dir)  # checkpoints, RNG stream, NaN guard, signals (faults.py)

    tokens_per_step = cfg.data.batch_size * cfg.data.seq_len
    throughput = ThroughputMonitor(tokens_per_step)
    act_stats = build_activation_stats(cfg, corpus.val, objective.inputs)  # None when off (instruments.py)
    trainer = L.Trainer(
        **trainer_kwargs(OmegaConf.to_container(cfg.trainer, resolve=True)),  # strategy by name (ffn_zoo.scale)
        precision=cfg.impl.precision,
        gradient_clip_val=cfg.optim.grad_clip or None,
        logger=build_logger(cfg, run_dir),
        callbacks=[throughput] + ([StepProgressBar(refresh_rate=5)] if cfg.trainer.enable_progress_bar else [])
        + ([act_stats] if act_stats else []) + safety,
        default_root_dir=str(run_dir),
        enable_checkpointing=False,
        use_distributed_sampler=False,  # our StepSampler shards the global batch itself
    )
    if trainer.is_global_zero:
        for line in describe(cfg, model, corpus.description, str(trainer.strategy.root_device)):
            print(line, flush=True)
        if ckpt_path:
            print(f"resume   {ckpt_path} at step {resume_step}", flush=True)
        if cfg.model.name == "bert_base" and trainer.strategy.root_device.type == "cpu":
            tokens = cfg.trainer.max_steps * tokens_per_step
            print(f"note     BERT-base on a CPU: {estimate_cpu_time(model, tokens, cfg.data.seq_len)}; "
                  f"model=mini finishes in minutes", flush=True)
    if cfg.impl.compile:
        # in place (nn.Module.compile): parameter names, hence checkpoints, are the same compiled or not, so a
        # run may resume with impl.compile flipped; torch.compile(model) would prefix every key with _orig_mod.
        module.model.compile()

    # weights_only: the checkpoint is read with torch.load(weights_only=True), which never runs pickled code
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    stop = next(cb for cb in safety if isinstance(cb, GracefulStop))
    if stop.interrupted(trainer):
        stop.exit(trainer, run_dir)  # SIGTERM/SIGINT: metrics.json says so, prints the resume command, exits
    if int(cfg.trainer.max_steps) % int(cfg.trainer.val_check_interval) or not module.last_val:
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
        "world_size": trainer.world_size,  # processes (devices × nodes) the global batch was split over
        "seed": cfg.seed,
        "model": cfg.model.name,
        "data": cfg.data.name,
        "wall_s": time.time() - started,
        "skipped_steps": next(cb for cb in safety if isinstance(cb, NonFiniteGuard)).skipped,
        "resumed_from": str(ckpt_path) if ckpt_path else None,
    }
    metrics.update(objective=objective.name, **(act_stats.final_metrics() if act_stats else {}))  # instruments.py
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
            for k, v in flatten_dict(OmegaConf.to_container(cfg, resolve=True)).items()}
    finals = {f"hp/{k}": v for k, v in metrics.items() if k in ("val_loss", "val_ppl", "val_bpb") and v is not None}
    if isinstance(logger, TensorBoardLogger):
        logger.log_hyperparams(flat, metrics=finals)
    else:
        logger.log_hyperparams(flat)
    logger.save()


def flatten_dict(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(flatten_dict(v, key + ".") if isinstance(v, dict) else {key: v})
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
        record_failure(run_dir, e, with_traceback=False)
        _failures.append(str(run_dir))
    except Exception as e:
        record_failure(run_dir, e, with_traceback=True)  # metrics.json + traceback.txt in the job's folder
        if HydraConfig.get().mode != RunMode.MULTIRUN:
            raise  # a single run: a bug keeps its traceback
        # a sweep goes on with its other jobs; main() exits non-zero at the end
        print(f"error: job {run_dir.name} crashed ({type(e).__name__}: {e}); traceback in {run_dir / 'traceback.txt'}",
              file=sys.stderr, flush=True)
        _failures.append(str(run_dir))


def main() -> None:
    os.environ[SWEPT_KEYS_ENV] = ",".join(swept_keys(sys.argv[1:]))
    _hydra_task()
    if _failures:
        if len(_failures) > 1 or os.environ.get("FFNZOO_VERBOSE"):
            print(f"{len(_failures)} run(s) failed: {', '.join(_failures)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
