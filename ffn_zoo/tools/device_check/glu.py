"""Part glu: gelu, relu, geglu, swiglu x 2 seeds (the glu_variants_cpu recipe, model=mini) on Wikipedia shards.

Tokens per run are sized from part step's throughput; several training processes run at once on the one GPU;
then the compare table. Without a data folder the same recipe runs on the toy corpus (glu_variants_toy).
Part prep (BPE + packing, CPU only) builds the corpus once, in the background while the GPU parts run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ffn_zoo.tools.device_check.part import Part
from ffn_zoo.tools.device_check.procs import child_env, start, train_command, wait_all
from ffn_zoo.tools.device_check.sizes import CPU_RECIPE_TOKENS, Sizes
from ffn_zoo.tools.device_check.step import StepResult, mini_case

TRAIN_GLOB, VAL_GLOB = "train-*.jsonl.gz", "validation-*.jsonl.gz"


@dataclass
class PrepResult:
    corpus: str | None = None  # the corpus' description
    corpus_train_tokens: int = 0
    prep_s: float | None = None


@dataclass
class GluResult:
    prep: PrepResult | None = None
    step_tokens_per_s: float | None = None
    sized_from: str | None = None
    assumed_aggregate_tokens_per_s: float | None = None
    window_s: float | None = None
    tokens_per_run: int | None = None
    steps: int | None = None
    x_cpu_table: float | None = None
    meets_floor: bool = True
    groups: list[str] = field(default_factory=list)  # one training process each
    corpus_epochs: float | None = None
    command: str | None = None
    train_wall_s: float | None = None
    return_codes: list[int | None] = field(default_factory=list)
    measured_aggregate_tokens_per_s: float | None = None
    table_md: str | None = None
    rows: list[dict[str, Any]] = field(default_factory=list)  # compare's rows, as compare reports them
    problems: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    pngs: list[str] = field(default_factory=list)


def has_shards(folder: Path) -> bool:
    return bool(sorted(folder.glob(TRAIN_GLOB))) and bool(sorted(folder.glob(VAL_GLOB)))


def glu_data(s: Sizes, data: Path | None, cache: Path) -> list[str]:
    """Data overrides: data=wikipedia on the first ``glu_shards`` shards in ``data`` (the toy corpus when None).
    The files are named again because experiment=glu_variants_cpu sets its own C4 ones."""
    if data is None:
        return ["data=toy", f"data.val_tokens={s.glu_val_tokens}"]
    out = ["data=wikipedia", f"data.root={data}", f"data.train_files={data}/{TRAIN_GLOB}",
           f"data.val_files={data}/{VAL_GLOB}", f"data.train_shards={s.glu_shards}",
           f"data.cache_dir={cache}", f"data.val_tokens={s.glu_val_tokens}",
           f"tokenizer.train_docs={s.glu_tokenizer_docs}", f"tokenizer.vocab_size={s.glu_tokenizer_vocab}"]
    return out + ([f"data.train_docs={s.glu_train_docs}"] if s.glu_train_docs else [])


def glu_base(s: Sizes, data: Path | None, root: Path) -> list[str]:
    """The overrides every run of part glu shares: the CPU recipe (its toy twin without data), bf16."""
    overrides = glu_data(s, data, root / "cache")
    preset = "glu_variants_toy" if data is None else "glu_variants_cpu"
    return [f"experiment={preset}", f"model={s.glu_model}", f"model.seq_len={s.glu_seq}",
            f"data.batch_size={s.glu_batch}", *overrides, "impl.precision=bf16-mixed",
            f"trainer.accelerator={'cpu' if s.dry_run else 'gpu'}", "trainer.enable_progress_bar=false",
            "impl.threads=2", f"log_dir={root}"]


def glu_budget(tokens_per_s: float, window_s: float, runs: int, concurrency: int, gain: float,
               s: Sizes) -> tuple[int, float]:
    """Steps per run (a multiple of 6: six whole-split validations) the window fits, and the aggregate tokens/s
    assumed behind it: one process trains at ``tokens_per_s`` (part step's bare mini step), ``concurrency`` of
    them together ``gain`` times faster (a guess; the report measures it). Capped at 50x the CPU table."""
    aggregate = tokens_per_s * (gain if concurrency > 1 else 1.0)
    tokens = min(aggregate * window_s / runs, s.glu_tokens_cap)
    return 6 * max(1, int(tokens // (6 * s.glu_batch * s.glu_seq))), aggregate


def job_groups(ffns: tuple[str, ...], seeds: tuple[int, ...], concurrency: int) -> list[tuple[list[str], int]]:
    """Split the ffn × seed jobs into ≤ ``concurrency`` Cartesian groups, each one ``-m`` training process."""
    per_seed = max(1, min(len(ffns), concurrency // len(seeds)))
    chunk = math.ceil(len(ffns) / per_seed)
    return [(list(ffns[i: i + chunk]), seed) for seed in seeds for i in range(0, len(ffns), chunk)]


def run_prep(p: Part[PrepResult]) -> None:
    """Part glu's corpus, tokenized and cached once for all its runs."""
    from omegaconf import OmegaConf

    from ffn_zoo.data import build_corpus
    from ffn_zoo.training.build import compose

    t0 = time.perf_counter()
    cfg = compose(glu_base(p.sizes, p.data, p.work / "glu"))
    corpus = build_corpus(OmegaConf.to_container(cfg.data, resolve=True))
    p.result.corpus = corpus.description
    p.result.corpus_train_tokens = int(len(corpus.train) * corpus.seq_len) if corpus.train is not None else 0
    p.result.prep_s = time.perf_counter() - t0
    p.save()


def run(p: Part[GluResult]) -> None:
    from ffn_zoo.analysis.compare import compare

    s, r = p.sizes, p.result
    root = p.work / "glu"
    base = glu_base(s, p.data, root)
    r.prep = p.prior("prep", PrepResult)
    if r.prep is None or not r.prep.corpus:  # the background prep failed or did not run: do it here
        prep = Part("prep", s, p.work, p.deadline, PrepResult(), p.data)
        run_prep(prep)
        r.prep = prep.result
    p.save()

    step = p.prior("step", StepResult)
    mini = step.row(mini_case(s, False)) if step else None
    mini = mini if mini and mini.batch == s.glu_batch else None
    tps = mini.tokens_per_s if mini else (2e5 if not s.dry_run else 1e4)  # a guess when part step failed
    groups = job_groups(s.glu_ffns, s.glu_seeds, s.glu_concurrency)
    r.window_s = p.left() - 35  # startup (~10 s), the last validation, compare, a margin
    r.steps, r.assumed_aggregate_tokens_per_s = glu_budget(tps, r.window_s, len(s.glu_ffns) * len(s.glu_seeds),
                                                           len(groups), s.glu_gain, s)
    vci, r.tokens_per_run = r.steps // 6, r.steps * s.glu_batch * s.glu_seq
    r.step_tokens_per_s, r.sized_from = tps, "part step, mini bf16 eager" if mini else "a guess (no step row)"
    r.x_cpu_table, r.meets_floor = r.tokens_per_run / CPU_RECIPE_TOKENS, r.tokens_per_run >= s.glu_tokens_floor
    r.groups = [f"ffn={','.join(f)} seed={sd}" for f, sd in groups]
    r.corpus_epochs = r.tokens_per_run / max(r.prep.corpus_train_tokens, 1)
    p.log(f"{len(groups)} processes, {r.steps} steps x {s.glu_batch} x {s.glu_seq} = {r.tokens_per_run / 1e6:.2f} M "
          f"tokens per run ({r.x_cpu_table:.1f}x the CPU table)")
    p.save()

    t0 = time.perf_counter()
    procs = []
    for k, (ffns, seed) in enumerate(groups):
        cmd = train_command(["-m", *base, f"ffn={','.join(ffns)}", f"seed={seed}", f"trainer.max_steps={r.steps}",
                             f"trainer.val_check_interval={vci}", f"hydra.sweep.dir={root / f'g{k}'}"])
        procs.append(start(cmd, child_env(), log=p.work / f"glu_g{k}.log"))
        r.command = "ffn-zoo-train " + " ".join(cmd[3:])
    r.return_codes = wait_all(procs, until=time.time() + p.left() - 15, grace=10)
    r.train_wall_s = time.perf_counter() - t0
    r.measured_aggregate_tokens_per_s = len(s.glu_ffns) * len(s.glu_seeds) * r.tokens_per_run / r.train_wall_s
    p.save()
    report = compare([root / f"g{k}" for k in range(len(groups))], out=root / "compare", layout=False)
    r.table_md = (root / "compare" / "table.md").read_text()
    r.rows, r.problems, r.warnings, r.pngs = report["rows"], report["problems"], report["warnings"], \
        report.get("pngs", [])
    p.save()
