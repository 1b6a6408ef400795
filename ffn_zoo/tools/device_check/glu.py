"""Part glu: the user's model itself. BERT-base's SwiGLU − GELU under both objectives (causal and masked LM), one
WSD ladder per (objective, variant), all at once on the one GPU, on Wikipedia shards; then the ladder comparison.

The recipe is the CPU map's (``experiment=glu_ladder_cpu``: AdamW 1e-3, 48 warm-up steps, a 20% cooldown per
budget) at part step's shape (seq 512, bf16-mixed, eager). The budgets are sized from part step's measured
tokens/s at that shape, at ``glu_safety`` of it, so the ladders end inside the window: the smallest rung is
``glu_min_steps`` steps and each doubling is added while the four ladders still fit, and no larger than the
carried corpus (no token is seen twice). A ladder stopped at the deadline keeps its finished branches, and the
comparison covers them. Without a data folder the same ladders run on the toy corpus. Part prep (BPE + packing,
CPU only) builds the corpus once, in the background while the GPU parts run.
"""

from __future__ import annotations

import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ffn_zoo.tools.device_check.part import Part
from ffn_zoo.tools.device_check.procs import child_env, start, train_command, wait_all
from ffn_zoo.tools.device_check.sizes import Sizes
from ffn_zoo.tools.device_check.step import StepResult, reference_case

TRAIN_GLOB, VAL_GLOB = "train-*.jsonl.gz", "validation-*.jsonl.gz"
TARBALL = "glu_ladders.tar.gz"  # the ladders' metrics, settings and comparison, without checkpoints
SHARD_TOKENS = 2_600_000  # BPE-8192 tokens in one Wikipedia train shard (52.4 M in 20): for the "needs N" line


@dataclass
class PrepResult:
    corpus: str | None = None  # the corpus' description
    corpus_train_tokens: int = 0
    shards: int = 0  # train shards read
    prep_s: float | None = None


@dataclass
class GluResult:
    prep: PrepResult | None = None
    step_tokens_per_s: float | None = None
    sized_from: str | None = None
    window_s: float | None = None
    tokens_per_step: int | None = None
    affordable_tokens: float | None = None  # per ladder, at glu_safety of the measured speed
    budgets: list[str] = field(default_factory=list)  # ladder.budgets as passed
    budget_tokens: list[int] = field(default_factory=list)
    ladder_steps: int | None = None  # trunk + cooldowns, per ladder
    planned_s: float | None = None  # the ladders' wall time at the full measured speed
    corpus_epochs: float | None = None  # the largest budget over the corpus' train tokens (≤ 1: no token twice)
    notes: list[str] = field(default_factory=list)  # why a budget is smaller than the window allows
    ladders: list[str] = field(default_factory=list)  # "<objective>_<ffn>", one training process each
    commands: list[str] = field(default_factory=list)
    train_wall_s: float | None = None
    return_codes: list[int | None] = field(default_factory=list)
    measured_aggregate_tokens_per_s: float | None = None
    table_md: str | None = None
    delta_rows: list[dict[str, Any]] = field(default_factory=list)  # compare's Δ vs budget, both objectives
    problems: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    tarball: str | None = None


def has_shards(folder: Path) -> bool:
    return bool(sorted(folder.glob(TRAIN_GLOB))) and bool(sorted(folder.glob(VAL_GLOB)))


def glu_data(s: Sizes, data: Path | None, cache: Path) -> list[str]:
    """Data overrides: data=wikipedia on every train shard in ``data`` (the toy corpus when None). No C4 held-out
    set: its file is in ../shared, which does not travel."""
    if data is None:
        return ["data=toy", f"data.val_tokens={s.glu_val_tokens}"]
    out = ["data=wikipedia", f"data.root={data}", f"data.cache_dir={cache}", f"data.val_tokens={s.glu_val_tokens}",
           "~data.extra_val.c4", f"tokenizer.train_docs={s.glu_tokenizer_docs}",
           f"tokenizer.vocab_size={s.glu_tokenizer_vocab}"]
    return out + ([f"data.train_docs={s.glu_train_docs}"] if s.glu_train_docs else [])


def glu_base(s: Sizes, data: Path | None, root: Path) -> list[str]:
    """The overrides every ladder of part glu shares: the CPU ladder recipe at part step's shape, bf16. Only the
    checkpoints a resume needs are kept, and no best.ckpt (the tarball takes none): four BERT-base ladders of five rungs
    at once peak at 4 × 7 checkpoints of ~1.1 GB so (~31 GB), where keeping all would need 4 × 17 (~75 GB), more than
    the machine's 64 GiB disk (ladder/storage.py counts them)."""
    return ["experiment=glu_ladder_cpu", "ladder.keep_checkpoints=needed", "checkpoint.save_best=false",
            f"model={s.glu_model}", f"model.seq_len={s.glu_seq}",
            f"data.batch_size={s.glu_batch}", *glu_data(s, data, root / "cache"), "impl.precision=bf16-mixed",
            f"trainer={'cpu' if s.dry_run else 'gpu'}", "trainer.enable_progress_bar=false",
            f"impl.threads={s.glu_threads}", "instruments.histograms=false", f"log_dir={root}",
            *([f"optim.warmup={s.glu_warmup}"] if s.glu_warmup is not None else [])]


def rung_steps(s: Sizes, n: int) -> list[int]:
    """The first ``n`` rungs in steps: glu_min_steps, doubling."""
    return [s.glu_min_steps * 2**i for i in range(n)]


def ladder_steps(steps: list[int], optim: Any, tokens_per_step: int) -> int:
    """Steps one ladder trains for these rungs: its trunk plus every cooldown (training/ladder/plan.py's arithmetic)."""
    from ffn_zoo.training.ladder.plan import plan_ladder

    return plan_ladder([n * tokens_per_step for n in steps], optim, tokens_per_step, max(steps)).steps_trained


def plan_budgets(s: Sizes, optim: Any, tokens_per_s: float, window_s: float, corpus_tokens: int | None
                 ) -> tuple[list[int], float, list[str]]:
    """(rungs in steps, affordable tokens per ladder, notes). The most doublings whose ladders all fit the window at
    ``glu_safety`` of ``tokens_per_s`` (together ``glu_gain`` times one process) and whose largest budget the corpus
    holds once; never fewer than one rung (then a note says it may not fit)."""
    tps = s.glu_batch * s.glu_seq
    n_ladders = len(s.glu_ffns) * len(s.glu_objectives)
    affordable = s.glu_safety * tokens_per_s * s.glu_gain * window_s / n_ladders
    fits = [n for n in range(1, s.glu_max_rungs + 1) if ladder_steps(rung_steps(s, n), optim, tps) * tps <= affordable]
    n, notes = (max(fits) if fits else 1), []
    if not fits:
        notes.append(f"even the smallest ladder ({rung_steps(s, 1)[0]} steps) needs more than the window's "
                     f"{affordable / 1e6:.2f} M tokens per ladder at {s.glu_safety:g} of the measured speed")
    if corpus_tokens is not None:
        held = [k for k in range(1, n + 1) if rung_steps(s, k)[-1] * tps <= corpus_tokens]
        if len(held) < n:
            want = rung_steps(s, n)[-1] * tps
            notes.append(f"the window allows {want / 2**20:g} Mi tokens per ladder but the corpus holds "
                         f"{corpus_tokens / 1e6:.1f} M: carry >= {-(-want // SHARD_TOKENS)} train shards "
                         f"(scripts/device_prep.sh SHARDS=N) for that budget without repeating a token")
            n = max(held, default=1)
    return rung_steps(s, n), affordable, notes


def run_prep(p: Part[PrepResult]) -> None:
    """Part glu's corpus, tokenized and cached once for all its runs."""
    from omegaconf import OmegaConf

    from ffn_zoo.data import build_corpus
    from ffn_zoo.training.recipe.build import compose

    t0 = time.perf_counter()
    cfg = compose(glu_base(p.sizes, p.data, p.work / "glu"))
    corpus = build_corpus(OmegaConf.to_container(cfg.data, resolve=True))
    p.result.corpus = corpus.description
    p.result.corpus_train_tokens = int(len(corpus.train) * corpus.seq_len) if corpus.train is not None else 0
    p.result.shards = len(sorted(p.data.glob(TRAIN_GLOB))) if p.data else 0
    p.result.prep_s = time.perf_counter() - t0
    p.save()


def pack_results(root: Path, ladders: list[str], out: Path) -> Path:
    """The ladders (metrics.json, .hydra/ settings, ladder.json, logs, TensorBoard events) and the comparison in one
    tarball; checkpoints and the token cache stay behind."""
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if info.name.endswith(".ckpt") else info

    with tarfile.open(out, "w:gz") as tar:
        for name in [*ladders, "compare"]:
            if (root / name).exists():
                tar.add(root / name, arcname=f"gpu/{name}", filter=keep)
    return out


def run(p: Part[GluResult]) -> None:
    from ffn_zoo.analysis.compare import compare
    from ffn_zoo.training.recipe.build import compose

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
    ref = step.row(reference_case(s, False)) if step else None  # BERT-base, seq 512, bf16, eager: what glu runs
    r.step_tokens_per_s = ref.tokens_per_s if ref else (2e5 if not s.dry_run else 1e4)
    r.sized_from = f"part step, {ref.case.label} at batch {ref.batch}" if ref else "a guess (no step row)"
    r.window_s = p.left() - 45  # start-up (~15 s), the last validations, compare, the tarball, a margin
    r.tokens_per_step = s.glu_batch * s.glu_seq
    optim = compose(base).optim
    corpus = r.prep.corpus_train_tokens if p.data else None  # the toy corpus is generated: no limit
    steps, r.affordable_tokens, r.notes = plan_budgets(s, optim, r.step_tokens_per_s, r.window_s, corpus)
    r.budget_tokens = [n * r.tokens_per_step for n in steps]
    r.budgets = [str(t) for t in r.budget_tokens]
    r.ladder_steps = ladder_steps(steps, optim, r.tokens_per_step)
    n_ladders = len(s.glu_ffns) * len(s.glu_objectives)
    r.planned_s = n_ladders * r.ladder_steps * r.tokens_per_step / (r.step_tokens_per_s * s.glu_gain)
    r.corpus_epochs = r.budget_tokens[-1] / corpus if corpus else None
    for note in r.notes:
        p.log(note)
    p.log(f"{n_ladders} ladders at once, budgets {', '.join(f'{t / 2**20:g} Mi' for t in r.budget_tokens)} tokens "
          f"({r.ladder_steps} steps each; {r.planned_s:.0f} s at part step's speed, window {r.window_s:.0f} s)")
    p.save()

    t0 = time.perf_counter()
    procs = []
    for objective in s.glu_objectives:
        for ffn in s.glu_ffns:
            name = f"{objective}_{ffn}"
            cmd = train_command([*base, f"objective={objective}", f"ffn={ffn}", f"seed={s.glu_seed}",
                                 f"ladder.budgets=[{','.join(r.budgets)}]", f"trainer.max_steps={steps[-1]}",
                                 f"trainer.val_check_interval={steps[0]}", f"hydra.run.dir={root / name}"])
            procs.append(start(cmd, child_env(), log=p.work / f"glu_{name}.log"))
            r.ladders.append(name)
            r.commands.append("ffn-zoo-train " + " ".join(cmd[3:]))
    p.save()
    r.return_codes = wait_all(procs, until=time.time() + p.left() - 25, grace=10)
    r.train_wall_s = time.perf_counter() - t0
    r.measured_aggregate_tokens_per_s = n_ladders * r.ladder_steps * r.tokens_per_step / r.train_wall_s
    p.save()
    report = compare([root / name for name in r.ladders], out=root / "compare", layout=False)
    r.table_md = (root / "compare" / "ladder.md").read_text()
    r.delta_rows = [{k: v for k, v in row.items() if k != "per_seed"} for row in report["delta_rows"]]
    r.problems, r.warnings = report["problems"], report["warnings"]
    r.tarball = str(pack_results(root, r.ladders, p.work / TARBALL))
    p.save()
