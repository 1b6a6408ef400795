"""The check's report: ``report.json`` (the ``Report`` dataclass) and its Markdown, one section per part, its
status first, then its numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ffn_zoo.tools.device_check.env import EnvResult
from ffn_zoo.tools.device_check.gemm import GemmResult
from ffn_zoo.tools.device_check.glu import GluResult
from ffn_zoo.tools.device_check.part import from_json
from ffn_zoo.tools.device_check.step import StepResult
from ffn_zoo.tools.device_check.train import TrainMetrics, TrainResult


@dataclass
class PartRun:
    """How one part's child ended, and what it saved."""

    status: str  # ok | failed | timeout
    rc: int | None
    wall_s: float
    budget_s: float
    error: str | None = None
    result: dict[str, Any] = field(default_factory=dict)  # the part's result dataclass, as saved


@dataclass
class Report:
    started: str
    dry_run: bool
    sizes: dict[str, Any]
    work: str
    parts: dict[str, PartRun] = field(default_factory=dict)
    wall_s: float = 0.0
    prep_rc: int | None = None
    wheels: list[str] = field(default_factory=list)  # installed from --wheels for the parts


def _f(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def _table(head: list[str], rows: list[list[Any]], right_from: int = 1) -> list[str]:
    """A Markdown table; columns from ``right_from`` on are right-aligned (numbers)."""
    align = ["---" if i < right_from else "---:" for i in range(len(head))]
    return [f"| {' | '.join(head)} |", f"|{'|'.join(align)}|"] + [f"| {' | '.join(map(str, r))} |" for r in rows]


def _yes(v: Any) -> str:
    return "yes" if v else "NO"


def _env(r: EnvResult) -> list[str]:
    rows = [["gpu", r.gpu], ["gpu_memory_gib", _f(r.gpu_memory_gib, ".1f")], ["sms", r.sms],
            ["capability", r.capability], ["driver", r.driver], ["cuda", r.cuda], ["cudnn", r.cudnn],
            ["torch", r.torch], ["lightning", r.lightning], ["transformers", r.transformers], ["hydra", r.hydra],
            ["omegaconf", r.omegaconf], ["python", r.python], ["bf16", r.bf16], ["cpus", r.cpus],
            ["package", r.package]]
    rows = [[k, v] for k, v in rows if v not in (None, "-")]
    if r.sdpa:
        rows.append(["SDPA backends", ", ".join(f"{k}: {v}" for k, v in r.sdpa.items())])
    return _table(["", ""], rows, right_from=2)


def _gemm(r: GemmResult) -> list[str]:
    nominal = r.nominal_tflops or {}
    probes = [(k, getattr(r, k)) for k in ("bf16", "tf32", "fp32")]
    rows = [[k, _f(x.tflops, ".4g"), _f(nominal.get(k), ".0f"), _f(x.of_nominal, ".0%")] for k, x in probes if x]
    return [f"{r.n}×{r.n}×{r.n} matmuls on random data, best of 2 probes of {r.seconds} s. "
            f"Nominal: {r.nominal_source}.", ""] + \
        _table(["precision", "measured TFLOP/s", "nominal TFLOP/s", "measured / nominal"], rows)


def _step(r: StepResult) -> list[str]:
    peaks = ", ".join(f"{k} {v:.4g}" for k, v in r.peaks_tflops.items())
    lines = [f"Largest batch: {r.batch} ({r.batch_rule}; {_f(r.batch_search_s, '.0f')} s). "
             f"MFU = tokens/s × (6·N + 12·L·d·T) / the measured peak of that precision ({peaks} TFLOP/s).", ""]
    head = ["impl", "model", "ffn", "precision", "compile", "batch", "tokens/s", "spread", "step ms", "MFU",
            "MFU vs nominal", "peak GiB", "warm-up s", "host syncs/step"]
    rows = [[x.case.impl, x.case.model, x.case.ffn, x.case.precision, "yes" if x.case.compile else "no", x.batch,
             f"{x.tokens_per_s:,.0f}", f"{x.spread:.1%}", f"{x.step_ms:.1f}", f"{x.mfu:.3f}",
             _f(x.mfu_nominal, ".3f"), _f(x.peak_mem_gib, ".1f"), f"{x.warmup_s:.1f}",
             _f(x.host_syncs_per_step, "d")] for x in r.rows]
    lines += _table(head, rows, right_from=5)
    if r.ratios:
        lines += [""] + _table(["ratio", "value", "batches"], [[x.what, f"{x.value:.3f}", x.batches] for x in r.ratios])
    for name, items in (("skipped", r.skipped), ("errors", r.errors)):
        if items:
            lines += ["", f"{name}: " + "; ".join(items)]
    return lines


def _train(r: TrainResult) -> list[str]:
    m, bare = r.metrics or TrainMetrics(), r.bare_step
    rows = [
        [f"killed after its checkpoint (SIGKILL, rc {r.killed_rc})",
         f"{_yes(r.killed_as_planned)}: checkpoint at step {r.checkpoint_step}"],
        ["resumed to the end", f"{_yes(r.resumed_ok)} (status {m.status}, steps {m.steps})"],
        ["trained (final val/loss below ln vocab)",
         f"{_yes(r.learned)}: val/loss {_f(m.val_loss, '.4f')}, val/ppl {_f(m.val_ppl, '.2f')}"],
        ["best.ckpt written", _yes(r.best_ckpt)],
        ["training tokens/s (resumed run, its first step, the compile, excluded)", _f(m.train_tokens_per_s, ",.0f")],
        [f"bare step tokens/s (part step, same shape{', compiled' if bare and bare.case.compile else ', EAGER'})",
         _f(bare.tokens_per_s if bare else None, ",.0f")],
        ["training / bare step", _f(r.vs_bare_step, ".3f")],
        ["wall s (killed run, resumed run)", f"{_f(r.killed_wall_s, '.0f')}, {_f(r.resumed_wall_s, '.0f')}"],
    ]
    return [f"`{r.command}` — first with `debug.kill_at_step={(r.steps or 0) // 2}`, then `ckpt_path=last`.", ""] + \
        _table(["check", "result"], rows, right_from=2)


def _glu(r: GluResult) -> list[str]:
    prep = r.prep
    mi = ", ".join(f"{t / 2**20:g}" for t in r.budget_tokens)
    lines = [f"Corpus: {prep.corpus if prep else None} ({prep.shards if prep else 0} train shards; prep "
             f"{_f(prep.prep_s if prep else None, '.0f')} s).",
             f"Ladders: {', '.join(r.ladders)} (seed 0), budgets {mi} Mi tokens, {_f(r.ladder_steps, 'd')} steps of "
             f"{_f(r.tokens_per_step, ',d')} tokens each (largest budget = {_f(r.corpus_epochs, '.2f')} epochs of "
             f"the corpus); sized from {r.sized_from} ({_f(r.step_tokens_per_s, ',.0f')} tokens/s: "
             f"{_f(r.planned_s, '.0f')} s planned at that speed in a {_f(r.window_s, '.0f')} s window); all at once "
             f"{_f(r.train_wall_s, '.0f')} s, {_f(r.measured_aggregate_tokens_per_s, ',.0f')} tokens/s together if "
             f"every ladder finished; return codes {r.return_codes}; results in {r.tarball or '(no tarball)'}."]
    lines += [f"note: {n}" for n in r.notes] + [f"warning: {w}" for w in r.warnings]
    lines += [f"problem: {x.get('path')}: {x.get('status')} {x.get('error') or ''}" for x in r.problems]
    table = re.sub(r"^(#+) ", r"###\1 ", r.table_md, flags=re.M) if r.table_md else "(no table)"
    return lines + ["", table]  # the comparison's headings nest under the part's


SECTIONS: dict[str, tuple[str, type, Callable[[Any], list[str]]]] = {
    "env": ("1. Environment", EnvResult, _env), "gemm": ("2. GEMM peak", GemmResult, _gemm),
    "step": ("3. Training step", StepResult, _step), "train": ("4. Training end to end", TrainResult, _train),
    "glu": ("5. GLU at BERT-base, both objectives", GluResult, _glu)}


def markdown(report: Report) -> str:
    kind = "DRY RUN (CPU, tiny sizes: the numbers mean nothing)" if report.dry_run else "GPU"
    lines = [f"# ffn-zoo device check — {kind}", "", f"Started {report.started}; {report.wall_s:.0f} s in all.", "",
             "| part | status | wall s | budget s |", "|---|---|---:|---:|"]
    lines += [f"| {name} | {part.status} | {part.wall_s:.0f} | {part.budget_s:.0f} |"
              for name, part in report.parts.items()]
    for name, part in report.parts.items():
        title, cls, render = SECTIONS[name]
        lines += ["", f"## {title} — {part.status}", ""]
        if part.error:
            lines += [f"error: `{part.error[:500]}`", ""]
        try:
            lines += render(from_json(cls, part.result))
        except (KeyError, TypeError) as e:  # a part killed half-way: show what it has
            lines.append(f"(incomplete: {type(e).__name__} {e})")
    return "\n".join(lines) + "\n"
