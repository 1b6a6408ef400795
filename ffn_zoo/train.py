"""Training entry point: config -> corpus -> model -> LightningModule -> Trainer -> fit -> run folder.

Each run folder holds the TensorBoard events, ``.hydra/`` (the exact config) and ``metrics.json``
(the numbers later tools read). ``python train.py --help`` lists the groups. The pieces live in
``ffn_zoo/training/`` (recipe, ladder, lifecycle, reporting); this file only puts them in order.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import hydra
import lightning as L
import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.data import build_corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.training.ladder.run import run_ladder
from ffn_zoo.training.lifecycle.checkpoint import check_checkpoint, must_match
from ffn_zoo.training.lifecycle.failures import JobFailures
from ffn_zoo.training.lifecycle.guards import build_guards
from ffn_zoo.training.lifecycle.jobs import failed_in_workers, job_threads
from ffn_zoo.training.lifecycle.runs import SWEPT_KEYS_ENV, register_resolvers, resume_point, swept_keys
from ffn_zoo.training.recipe.build import config_dir, model_config, validate_config
from ffn_zoo.training.recipe.denormals import denormals_flushed, flush_denormals
from ffn_zoo.training.recipe.module import LitLM
from ffn_zoo.training.recipe.objectives import model_vocab_size, prepare_objective
from ffn_zoo.training.recipe.precision import run_precision
from ffn_zoo.training.recipe.scale import trainer_kwargs
from ffn_zoo.training.reporting.instruments import build_activation_stats
from ffn_zoo.training.reporting.loggers import build_loggers, log_hparams, quiet_warnings, write_layouts
from ffn_zoo.training.reporting.progress import (StepProgressBar, ThroughputMonitor, TimeSplit, ValidationLines,
                                                 interactive, quiet_lightning, time_line)
from ffn_zoo.training.reporting.summary import DiskNote, print_banner, run_metrics, write_metrics

def run(cfg: DictConfig, run_dir: Path, callbacks: Sequence[L.Callback] = (),
        extra_metrics: Mapping[str, Any] | None = None, validate: bool = True,
        disk_note: DiskNote | None = None) -> dict[str, Any]:
    """Train one configuration; write ``metrics.json`` into ``run_dir`` and return it.

    ``callbacks`` run after the built-in ones and ``extra_metrics`` go into metrics.json (a ladder uses all four:
    ``validate=False`` trains without a single validation, for a ladder's trunk where no budget is scored;
    ``disk_note``: the banner's line on the caller's checkpoints, a ladder's whole plan).
    """
    started, clock = time.time(), time.perf_counter()  # clock: the time line's (reporting/progress.py, TimeSplit)
    validate_config(cfg)
    quiet_warnings()
    quiet_lightning()  # no "💡 Tip" lines
    # before the first parallel op: the intra-op threads inherit FTZ/DAZ when they start (recipe/denormals.py)
    flush_denormals(cfg.impl.flush_denormal)
    if threads := job_threads(cfg.impl.threads):  # auto: cores ÷ the jobs side by side (jobs.py)
        torch.set_num_threads(threads)
    flushed = denormals_flushed()  # what held: 1.0 unless threads started before it (banner and metrics.json)
    torch.set_float32_matmul_precision(cfg.impl.matmul_precision)
    precision = run_precision(cfg.impl.precision, cfg.trainer.accelerator)  # auto: bf16 where the hardware has it
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    corpus = build_corpus(OmegaConf.to_container(cfg.data, resolve=True))
    L.seed_everything(cfg.seed, workers=True, verbose=False)  # init depends on the seed only, not on data prep
    corpus, objective = prepare_objective(cfg.objective, cfg.mlm, corpus)  # clm (default) or mlm (adds [MASK])
    model = TransformerLM(model_config(cfg, vocab_size=model_vocab_size(objective.name, corpus.vocab_size)))
    module = LitLM(model, cfg.optim, cfg.trainer.max_steps, corpus.optimal_val_loss, corpus.val_bytes, objective,
                   val_sets=[(name, s.val_bytes) for name, s in corpus.extra_val.items()],  # data.extra_val
                   fused_loss=cfg.impl.fused_loss)
    datamodule = LMDataModule(corpus, cfg.data.batch_size, cfg.data.val_batch_size, cfg.seed, cfg.impl.num_workers)
    ckpt_path = resume_point(cfg.ckpt_path, Path(cfg.log_dir), run_dir)  # None: fresh (runs.py: where "last" looks)
    resume_step = check_checkpoint(ckpt_path, module, must_match(cfg)) if ckpt_path else None  # names a mismatch
    resolved = OmegaConf.to_container(cfg, resolve=True)  # stored in checkpoints, reported as hyperparameters
    guards = build_guards(cfg.checkpoint, cfg.faults, cfg.debug, run_dir, resolved)  # checkpoints, RNG, NaN, signals

    throughput = ThroughputMonitor(cfg.data.batch_size * cfg.data.seq_len)
    show_bar = bool(cfg.trainer.enable_progress_bar) and interactive()  # a log file gets one line per validation
    act_stats = build_activation_stats(cfg.instruments, corpus.val, objective.inputs)  # None when off
    reporting = [throughput, StepProgressBar(refresh_rate=5) if show_bar else ValidationLines(throughput),
                 *([act_stats] if act_stats else [])]
    timer = TimeSplit(lambda: guards.checkpoints.seconds)  # after the guards: the loop's span holds the last write
    trainer = L.Trainer(
        **(trainer_kwargs(OmegaConf.to_container(cfg.trainer, resolve=True)) | {"enable_progress_bar": show_bar}
           | ({} if validate else {"limit_val_batches": 0})),  # 0 batches: Lightning skips every validation
        precision=precision,
        gradient_clip_val=cfg.optim.grad_clip or None,
        logger=build_loggers(cfg.logger, run_dir, resume_step) or False,  # a resume drops the killed run's later steps
        callbacks=[*reporting, *guards.callbacks, timer, *callbacks],
        default_root_dir=str(run_dir),
        enable_checkpointing=False,
        use_distributed_sampler=False,  # our StepSampler shards the global batch itself
    )
    if trainer.is_global_zero:
        write_layouts(trainer.loggers)  # the Custom Scalars tab, in this run's own events
        print_banner(cfg, model, corpus.description, trainer.strategy.root_device, precision, ckpt_path, resume_step,
                     run_dir, flushed, disk_note)
        for name, held_out in corpus.extra_val.items():  # data.extra_val
            print(f"val set  {name}: {held_out.description}", flush=True)
    if cfg.impl.compile:
        # in place (nn.Module.compile): parameter names, hence checkpoints, are the same compiled or not, so a
        # run may resume with impl.compile flipped; torch.compile(model) would prefix every key with _orig_mod.
        module.model.compile()

    # weights_only: the checkpoint is read with torch.load(weights_only=True), which never runs pickled code
    with guards.stop.listening():  # SIGTERM/SIGINT from here on: finish the step, save, stop (guards.py)
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
    if guards.stop.interrupted(trainer):
        guards.stop.exit(trainer, run_dir)  # SIGTERM/SIGINT: metrics.json says so, prints the resume command, exits
    if validate and (int(cfg.trainer.max_steps) % int(cfg.trainer.val_check_interval) or not module.last_val):
        trainer.validate(module, datamodule=datamodule, verbose=False)  # always end on a full validation

    metrics = run_metrics(cfg, trainer, module, corpus.optimal_val_loss, throughput.mean_tokens_per_s, started, {
        "skipped_steps": guards.nonfinite.skipped,
        "resumed_from": str(ckpt_path) if ckpt_path else None,
        "objective": objective.name,
        "precision": precision,  # what ran (impl.precision=auto resolves per machine)
        "denormals_flushed": flushed,  # impl.flush_denormal as it held: the share of the threads flushing
        **(act_stats.final_metrics() if act_stats else {}),  # instruments.py
        **module.extra_val_metrics(),  # data.extra_val: val_<name>_loss, _ppl, _bpb
        **(extra_metrics or {}),
    })
    metrics["time_s"] = timer.split(clock, module.mask_seconds)  # where the wall time went, by phase
    if trainer.is_global_zero:
        log_hparams(trainer.loggers, resolved, metrics, module.last_val)
        write_metrics(run_dir, metrics)
        print(f"time     {time_line(metrics['time_s'])}", flush=True)
    guards.stop.after_a_finished_run()  # a signal during the last step or validation: finished, but stop the job
    return metrics


_failures = JobFailures()


def register_launcher() -> None:
    """hydra/launcher=parallel's class, named to Hydra: its plugin scan misses a package installed with ``pip -e``."""
    from hydra.core.plugins import Plugins
    from hydra_plugins.ffn_zoo_parallel.parallel_launcher import ParallelLauncher

    Plugins.instance().register(ParallelLauncher)


@hydra.main(version_base="1.3", config_path=str(config_dir()), config_name="train")
def _hydra_task(cfg: DictConfig) -> dict[str, Any] | None:
    """One job; returns its metrics (None when it failed: then its metrics.json says why)."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    sweep = hydra_cfg.mode == RunMode.MULTIRUN
    with _failures.recorded(run_dir, sweep, cfg.ckpt_path, Path(cfg.log_dir)):  # metrics.json says why
        if cfg.ladder.budgets:  # a loss-vs-budget ladder: one trunk, a cooldown branch per budget (ladder/run.py)
            return run_ladder(cfg, run_dir, run)
        return run(cfg, run_dir)
    return None


def main() -> None:
    os.environ[SWEPT_KEYS_ENV] = ",".join(swept_keys(sys.argv[1:]))  # a sweep's folders name what it sweeps
    register_resolvers()  # the ${ffnzoo_*:...} run-folder names in configs/train.yaml
    register_launcher()  # hydra/launcher=parallel
    _hydra_task()  # a full disk before the job starts: configs/train.yaml's hydra.callbacks (run_folder.py)
    _failures.run_dirs += failed_in_workers()  # hydra/launcher=parallel: jobs that failed in its workers
    _failures.exit_if_any()


if __name__ == "__main__":
    main()
