"""What a run says about itself: the startup banner (with a CPU-time estimate and the checkpoints' disk need) and
``metrics.json``."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any, Callable

import lightning as L
import torch
from omegaconf import DictConfig

from ffn_zoo.nn.ffn import FFN_VARIANTS, FFNVariant
from ffn_zoo.nn.flops import gemm_peak_flops, training_flops_per_token
from ffn_zoo.nn.model import INITS, TransformerLM
from ffn_zoo.atomic import write_json
from ffn_zoo.training.lifecycle.jobs import threads_note
from ffn_zoo.training.recipe.module import LitLM
from ffn_zoo.training.recipe.denormals import denormals_note
from ffn_zoo.training.recipe.optim import describe_optim
from ffn_zoo.training.recipe.precision import BF16_ON_CPU, bf16_support, cpu_flags, precision_used
from ffn_zoo.training.lifecycle.runs import CKPT_DIR


def describe(cfg: DictConfig, model: TransformerLM, corpus_desc: str, device: str, precision: str,
             flushed: float) -> list[str]:
    """The startup facts, one line each; ``precision`` is the one the run trains in (impl.precision=auto resolved),
    ``flushed`` the share of the intra-op threads that flush denormals (recipe/denormals.py)."""
    mc = model.cfg
    variant = FFN_VARIANTS.get(cfg.ffn.name, FFNVariant(cfg.ffn.gated, cfg.ffn.activation, "custom"))
    width = f"{mc.ffn.hidden}" + (
        f" (parameter-matched to dense {cfg.model.d_ff})" if mc.ffn.hidden != cfg.model.d_ff else ""
    )
    return [
        f"ffn      {cfg.ffn.name}: {variant.form}, FFN(x) = {variant.formula()}  [{variant.paper}]",
        f"width    hidden {width}, bias={mc.ffn.bias}, dropout={mc.ffn.dropout}",
        f"params   FFN {model.num_params(ffn_only=True):,} ({model.num_params(ffn_only=True) // mc.n_layers:,}/layer), "
        f"total {model.num_params():,}",
        f"model    {cfg.model.name}: d_model {mc.d_model}, {mc.n_layers} layers, {mc.n_heads} heads, "
        f"{mc.norm}-LN, context {cfg.data.seq_len}, vocab {mc.vocab_size}",
        f"init     {mc.init}: {INITS[mc.init].describe(mc)}",
        f"data     {corpus_desc}",
        f"budget   {cfg.trainer.max_steps} steps × {cfg.data.batch_size} × {cfg.data.seq_len} tokens, seed {cfg.seed}",
        describe_optim(cfg.optim, cfg.trainer.max_steps),
        f"device   {device}, precision {precision_used(cfg.impl.precision, precision)}, {torch.get_num_threads()} threads"
        + threads_note(cfg.impl.threads),
    ] + ([f"bf16     {BF16_ON_CPU[bf16_support(cpu_flags())]}",
          f"numerics {denormals_note(cfg.impl.flush_denormal, flushed)}"] if device == "cpu" else [])


def estimate_cpu_time(model: TransformerLM, tokens: int, seq_len: int) -> str:
    """A rough wall-time estimate on this CPU: training FLOPs / (measured GEMM peak × 0.5 MFU)."""
    flops = training_flops_per_token(model, seq_len) * tokens
    peak = gemm_peak_flops(seconds=0.3)
    seconds = flops / (0.5 * peak)
    return f"estimate ~{seconds / 3600:.1f} h on this CPU ({peak / 1e9:.0f} GFLOP/s GEMM peak, assuming 50% MFU)"


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
    return (f"a checkpoint ~{size_text(size)} (weights + {optim_name} state); {CKPT_DIR}/ needs ~{size_text(need)} "
            f"free ({' + '.join(kept)} + one being written), {size_text(free)} free{warn}")


def size_text(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


# a caller's own disk line (a ladder's: ladder/storage.py), from a checkpoint's size and the free space; None: quiet
DiskNote = Callable[[int, int], "str | None"]


def print_banner(cfg: DictConfig, model: TransformerLM, corpus_desc: str, device: torch.device, precision: str,
                 ckpt_path: Path | None, resume_step: int | None, run_dir: Path, flushed: float,
                 disk_note: DiskNote | None = None) -> None:
    for line in describe(cfg, model, corpus_desc, str(device), precision, flushed):
        print(line, flush=True)
    if ckpt_path:
        print(f"resume   {ckpt_path} at step {resume_step}", flush=True)
    elif cfg.ckpt_path == "last":  # a fixed run folder without a checkpoint yet (runs.resume_point)
        print(f"resume   nothing to resume in {run_dir} yet: a fresh start", flush=True)
    if note := disk_need(model, cfg.checkpoint, cfg.optim.name, run_dir):  # big checkpoints, or too little room
        print(f"disk     {note}", flush=True)
    if disk_note and (note := disk_note(checkpoint_bytes(model, cfg.optim.name), shutil.disk_usage(run_dir).free)):
        print(f"disk     {note}", flush=True)
    if cfg.model.name == "bert_base" and device.type == "cpu":
        tokens = cfg.trainer.max_steps * cfg.data.batch_size * cfg.data.seq_len
        print(f"note     BERT-base on a CPU: {estimate_cpu_time(model, tokens, cfg.data.seq_len)}; "
              f"model=mini finishes in minutes", flush=True)


def run_metrics(cfg: DictConfig, trainer: L.Trainer, module: LitLM, optimal_val_loss: float | None,
                tokens_per_s: float | None, started: float, extra: dict[str, Any]) -> dict[str, Any]:
    """``metrics.json`` of a finished run: what it was, what it reached, what it cost. ``extra``: the
    fields other parts own (skipped steps, resume, objective, activation statistics), appended."""
    model, val = module.model, module.last_val
    tokens_per_step = cfg.data.batch_size * cfg.data.seq_len
    metrics: dict[str, Any] = {
        "status": "ok",
        "ffn": cfg.ffn.name,
        "activation": cfg.ffn.activation,
        "gated": bool(cfg.ffn.gated),
        "d_ff": model.cfg.ffn.hidden,
        "params_total": model.num_params(),
        "params_ffn": model.num_params(ffn_only=True),
        "val_loss": val.get("val/loss"),
        "val_ppl": val.get("val/ppl"),
        "val_bpb": val.get("val/bpb"),
        "optimal_val_ppl": math.exp(optimal_val_loss) if optimal_val_loss is not None else None,
        "tokens_seen": trainer.global_step * tokens_per_step,
        "train_tokens_per_s": tokens_per_s,
        "flops_per_token": training_flops_per_token(model, cfg.data.seq_len),
        "steps": trainer.global_step,
        "world_size": trainer.world_size,  # processes (devices × nodes) the global batch was split over
        "seed": cfg.seed,
        "model": cfg.model.name,
        "data": cfg.data.name,
        "wall_s": time.time() - started,
    }
    metrics.update(extra)
    return metrics


def write_metrics(run_dir: Path, metrics: dict[str, Any]) -> None:
    """``metrics.json`` into the run folder, and the one-line result."""
    write_json(run_dir / "metrics.json", metrics)  # atomic: a full disk leaves the old file, not half a new one
    opt = f", optimum {metrics['optimal_val_ppl']:.2f}" if metrics["optimal_val_ppl"] else ""
    result = (f"val/loss {metrics['val_loss']:.4f}, val/ppl {metrics['val_ppl']:.2f}{opt}" if metrics["val_loss"]
              is not None else "not validated (a ladder's trunk: nothing is scored there)")
    print(f"done     {result}; {metrics['wall_s']:.0f} s -> {run_dir}", flush=True)
