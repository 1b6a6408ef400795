"""The section tables of the GLU write-up (experiments/glu_variants/README.md) and every table of the width study
(experiments/glu_variants/width/README.md), each generated from the committed compare outputs it names.

Run through ``python scripts/glu_tables.py``, which rewrites both READMEs; tests/unit/test_glu_tables.py checks
them. One spec per block (:class:`Table`): the committed files it reads, one item per row, and its columns, every
number through the one rounding rule of scripts/glu_tables.py (nats to 3 decimals; token counts, parameters and
multipliers to 3 significant figures; exact counts as integers; MFU to 2 decimals; the plan's durations to the
minute and to 0.1 h; each from the stored float). The one source that is not a compare output is the own-lr arm's
own_lr/vs_default.md (its run folders are not in git): its 4-decimal means are rounded to 3 from there.

Tables with no committed source are typed in the README and say so: step 1's three bf16/fp32 runs and the presets
table of the superseded section.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import statistics
from dataclasses import dataclass
from functools import cache
from typing import Any, Callable, Iterable

from ffn_zoo.analysis.compare.stats import paired_interval, welch_interval
from scripts.glu_tables import (BUDGETS, GLU, crossing_cell, delta_cell, excludes_zero, mi, multiplier_cell, nats,
                                paired, tokens)

READS: set[str] = set()  # every committed file read, relative to experiments/glu_variants (the test's check)


@cache
def _text(rel: str) -> str:
    return (GLU / rel).read_text()


@cache
def _parsed(rel: str) -> Any:
    raw = _text(rel)
    return [json.loads(line) for line in raw.splitlines() if line] if rel.endswith(".jsonl") else json.loads(raw)


def read(rel: str) -> str:
    """A committed file's text, recorded in :data:`READS`."""
    READS.add(rel)
    return _text(rel)


def load(rel: str) -> Any:
    """A committed JSON file (``.jsonl``: a list, one object a line), parsed once; read-only."""
    READS.add(rel)
    return _parsed(rel)


@dataclass(frozen=True)
class Col:
    head: str
    cell: Callable[[Any], str]
    align: str = "---:"  # "---" for text


@dataclass(frozen=True)
class Table:
    """One generated table: the committed files it reads (under experiments/glu_variants), its rows, its columns."""
    sources: tuple[str, ...]
    rows: Callable[[], Iterable[Any]]
    cols: tuple[Col, ...] | Callable[[], tuple[Col, ...]]  # a callable where the header comes from the data

    def __call__(self) -> str:
        cols = self.cols() if callable(self.cols) else self.cols
        lines = ["| " + " | ".join(c.head for c in cols) + " |", "|" + "|".join(c.align for c in cols) + "|"]
        lines += ["| " + " | ".join(c.cell(r) for c in cols) + " |" for r in self.rows()]
        return "\n" + "\n".join(lines) + "\n"


def text(head: str, cell: Callable[[Any], str]) -> Col:
    return Col(head, cell, "---")

# ----------------------------------------------------------------------------- cells, one rounding rule


def loss(x: float) -> str:
    return f"{x:.3f}"


def interval(lo: float | None, hi: float | None) -> str:
    return f"[{nats(lo)}, {nats(hi)}]" if lo is not None and hi is not None else "(no interval)"


def starred(mean: float, lo: float | None, hi: float | None) -> str:
    """``+0.093 [+0.060, +0.127] *`` (``*``: the interval excludes 0)."""
    return f"{nats(mean)} {interval(lo, hi)}" + (" *" if excludes_zero(lo, hi) else "")


def paired_starred(r: dict[str, Any]) -> str:
    mean, lo, hi, _ = paired(r)
    return starred(mean, lo, hi)


def paired_plain(r: dict[str, Any]) -> str:
    """``−0.032 [−0.057, −0.007]``: the paired Δ, unmarked (for a sentence or a cell that says it in words)."""
    mean, lo, hi, _ = paired(r)
    return f"{nats(mean)} {interval(lo, hi)}"


def count(n: float) -> str:
    """An exact count: ``2,097,152``."""
    return f"{n:,.0f}"


def sig3(x: float) -> str:
    """3 significant figures, trailing zeros kept: ``33.0``, ``104``, ``1.85``."""
    return f"{x:.{max(2 - math.floor(math.log10(abs(x))), 0)}f}"


def millions(n: float) -> str:
    return f"{sig3(n / 1e6)} M"


def lr_label(lr: float) -> str:
    """``2e-3``."""
    mantissa, exponent = f"{lr:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def seeds_of(r: dict[str, Any]) -> dict[int, float]:
    return dict(zip(r["seeds"], r["val_losses"]))


# ----------------------------------------------------------------------------- a ladder report's rows


@dataclass(frozen=True)
class Report:
    """One committed ladder report (``<folder>/ladder.json``), on Wikipedia (``held=""``) or C4 (``"c4"``)."""
    folder: str
    held: str = ""

    @property
    def source(self) -> str:
        return f"{self.folder}/ladder.json"

    def part(self) -> dict[str, Any]:
        r = load(self.source)
        return r["extra_val"][self.held] if self.held else r

    def row(self, variant: str, budget: int, setting: int = 1) -> dict[str, Any]:
        """One variant's losses at one budget (``budget_rows``)."""
        (r,) = [r for r in self.part()["budget_rows"]
                if r["variant"] == variant and r["budget_tokens"] == budget and r["ladder_setting"] == setting]
        return r

    def delta(self, budget: int, variant: str = "swiglu", baseline: str = "gelu", setting: int = 1) -> dict[str, Any]:
        (r,) = [r for r in self.part()["delta_rows"] if r["variant"] == variant and r["baseline"] == baseline
                and r["budget_tokens"] == budget and r["ladder_setting"] == setting]
        return r

    def trend(self, setting: int = 1, variant: str = "swiglu") -> dict[str, Any]:
        (t,) = [t for t in self.part()["trends"] if t["variant"] == variant and t["ladder_setting"] == setting]
        return t

    def c4(self) -> Report:
        return Report(self.folder, "c4")


HELD = (("", "Wikipedia"), ("c4", "C4"))
Q, H, M1, M2, M4 = BUDGETS  # 0.25, 0.5, 1, 2, 4 Mi

# ============================================================================= experiments/glu_variants/README.md
# ----------------------------------------------------------------------------- step 2: noise at 0.98 M tokens


def compare_table(folder: str) -> dict[str, Any]:
    return load(f"{folder}/table.json")


def table_rows(folder: str, held: str = "") -> list[dict[str, Any]]:
    t = compare_table(folder)
    return t["extra_val"][held] if held else t["rows"]


def welch_cell(r: dict[str, Any]) -> str:
    return "(baseline)" if r["variant"] == r["baseline"] else starred(r["delta"], r["delta_lo"], r["delta_hi"])


def paired_ci_cell(r: dict[str, Any]) -> str:
    if r["variant"] == r["baseline"]:
        return "—"
    return interval(r["paired_lo"], r["paired_hi"]) + (" *" if excludes_zero(r["paired_lo"], r["paired_hi"]) else "")


def seed_losses(r: dict[str, Any]) -> str:
    return " / ".join(loss(v) for _, v in sorted(seeds_of(r).items()))


def mean_std(r: dict[str, Any]) -> str:
    return f"{loss(r['val_loss_mean'])} ± {loss(r['val_loss_std'])}"


NOISE_1M = Table(
    ("wikipedia_1M/table.json",),
    lambda: [(name, r) for held, name in (("", "Wikipedia validation"), ("c4", "C4 (`c4-sample`)"))
             for r in table_rows("wikipedia_1M", held)],
    (text("held-out set", lambda x: x[0]), text("variant", lambda x: x[1]["variant"]),
     text("seeds 0 / 1 / 2", lambda x: seed_losses(x[1])), text("mean ± std", lambda x: mean_std(x[1])),
     text("Δ swiglu − gelu, Welch 95% CI", lambda x: "" if x[1]["variant"] == "gelu" else welch_cell(x[1])),
     text("paired-by-seed 95% CI", lambda x: "" if x[1]["variant"] == "gelu" else paired_ci_cell(x[1]))))

# ----------------------------------------------------------------------------- step 3: relu and geglu

FOUR, VS_RELU = Report("wikipedia_ladder_4variants"), Report("wikipedia_ladder_vs_relu")
GAPS = (("GEGLU − GELU", "geglu", "gelu"), ("SwiGLU − GELU", "swiglu", "gelu"),
        ("SwiGLU − ReLU", "swiglu", "relu"), ("GEGLU − ReLU", "geglu", "relu"), ("ReLU − GELU", "relu", "gelu"))


def gap(held: str, budget: int, variant: str, baseline: str) -> dict[str, Any]:
    report = VS_RELU if baseline == "relu" else FOUR
    return Report(report.folder, held).delta(budget, variant, baseline)


RELU_GEGLU = Table(
    (FOUR.source, VS_RELU.source),
    lambda: [(held, name, b) for held, name in HELD for b in (Q, M1)],
    (text("held-out set", lambda x: x[1]), Col("budget", lambda x: mi(x[2])),
     *(Col(v, lambda x, v=v: loss(Report(FOUR.folder, x[0]).row(v, x[2])["val_loss_mean"]))
       for v in ("relu", "gelu", "geglu", "swiglu")),
     *(text(name, lambda x, v=v, b=b: paired_starred(gap(x[0], x[2], v, b))) for name, v, b in GAPS)))


def seed0(variant: str, budget: int) -> float:
    return seeds_of(FOUR.row(variant, budget))[0]


RELU_GEGLU_SEED0 = Table(
    (FOUR.source,),
    lambda: [M2, M4],
    (Col("budget", mi), *(Col(v, lambda b, v=v: loss(seed0(v, b))) for v in ("relu", "gelu", "geglu", "swiglu")),
     *(Col(name, lambda b, v=v, base=base: nats(seed0(v, b) - seed0(base, b)))
       for name, v, base in GAPS if name != "GEGLU − ReLU")))

# ----------------------------------------------------------------------------- step 4: the recipe factors

OWN_LR = "own_lr/tuning.json"


def grid_cell(variant: str, lr: float) -> str:
    t = load(OWN_LR)["variants"][variant]
    (run,) = [r for r in t["runs"] if r["lr"] == lr]
    cell = f"{loss(run['criterion'])} / {loss(run['val_loss'])}"
    return f"**{cell}**" if float(t["best_lr"]) == lr else cell


LR_GRID = Table(
    (OWN_LR,),
    lambda: ["gelu", "swiglu"],
    (text("lr", lambda v: f"{v}: train-tail / val"),
     *(Col(lr_label(lr) + (" (default)" if lr == 1e-3 else ""), lambda v, lr=lr: grid_cell(v, lr))
       for lr in (5e-4, 1e-3, 2e-3, 4e-3))))

RECIPE = Report("wikipedia_recipe")
VS_DEFAULT = "own_lr/vs_default.md"  # the own-lr arm: its run folders are not in git, this table is all there is
NUMBER = r"([+-]?\d+\.\d+)"


@cache
def own_lr_rows() -> dict[tuple[str, int], dict[str, Any]]:
    """own_lr/vs_default.md's rows by (held-out set, budget): the own-lr arm's GELU mean, Δ and Δ − default's."""
    rows = {}
    for line in read(VS_DEFAULT).splitlines():
        m = re.match(rf"\| (Wikipedia|C4) \| ([\d,]+) \| [^|]+ \| {NUMBER} \| {NUMBER} \| "
                     rf"{NUMBER} \[{NUMBER}, {NUMBER}\][^|]*\| [^|]+ \| {NUMBER} \| "
                     rf"{NUMBER} \[{NUMBER}, {NUMBER}\]", line)
        if m:
            v = [float(x) for x in m.groups()[2:]]
            rows[("" if m[1] == "Wikipedia" else "c4", int(m[2].replace(",", "")))] = {
                "gelu": v[0], "delta": v[2], "lo": v[3], "hi": v[4],
                "vs_ref": v[6], "vs_ref_lo": v[7], "vs_ref_hi": v[8]}
    return rows


def own_lr() -> float:
    (lr,) = {arm["lr"] for arm in load(OWN_LR)["arms"]["tuned"].values()}
    return lr


RECIPES = ((1, "default (init gpt2, AdamW 1e-3)"), ("own", "own lr (both {lr})"), (2, "`model.init=fan_in`"),
           (3, "fan-in + Adafactor (as T5)"))


def recipe_gelu(held: str, setting: Any, budget: int) -> float:
    if setting == "own":
        return own_lr_rows()[(held, budget)]["gelu"]
    return Report(RECIPE.folder, held).row("gelu", budget, setting)["val_loss_mean"]


def recipe_delta(held: str, setting: Any, budget: int) -> str:
    """Δ [paired 95%] (*: excludes 0); where only Welch's interval excludes 0, it is named too."""
    if setting == "own":
        r = own_lr_rows()[(held, budget)]
        return starred(r["delta"], r["lo"], r["hi"])
    r = Report(RECIPE.folder, held).delta(budget, setting=setting)
    cell = paired_starred(r)
    if not excludes_zero(r["paired_lo"], r["paired_hi"]) and excludes_zero(r["delta_lo"], r["delta_hi"]):
        cell += f" (Welch {interval(r['delta_lo'], r['delta_hi'])} *)"
    return cell


def recipe_change(held: str, setting: Any, budget: int) -> str:
    """Δ − the default recipe's Δ, paired by seed; bold and * where it excludes 0."""
    if setting == 1:
        return "—"
    own = setting == "own"
    r = own_lr_rows()[(held, budget)] if own else Report(RECIPE.folder, held).delta(budget, setting=setting)
    cell = starred(r["vs_ref"], r["vs_ref_lo"], r["vs_ref_hi"])
    return f"**{cell}**" if cell.endswith("*") else cell


RECIPE_TABLE = Table(
    (RECIPE.source, OWN_LR, VS_DEFAULT),
    lambda: [(held, name, s, label.format(lr=lr_label(own_lr()))) for held, name in HELD for s, label in RECIPES],
    (text("held-out set", lambda x: x[1]), text("recipe", lambda x: x[3]),
     text("gelu val/loss at 0.25 Mi / 1 Mi", lambda x: " / ".join(loss(recipe_gelu(x[0], x[2], b)) for b in (Q, M1))),
     text("Δ at 0.25 Mi", lambda x: recipe_delta(x[0], x[2], Q)),
     text("Δ − default's", lambda x: recipe_change(x[0], x[2], Q)),
     text("Δ at 1 Mi", lambda x: recipe_delta(x[0], x[2], M1)),
     text("Δ − default's", lambda x: recipe_change(x[0], x[2], M1))))

# ----------------------------------------------------------------------------- step 5: what the map says

LADDER = Report("wikipedia_ladder")


def step5_rows() -> list[tuple[str, str]]:
    clm, c4 = LADDER, LADDER.c4()
    d = {b: clm.delta(b) for b in BUDGETS}
    fan, ada = (lambda b: RECIPE.delta(b, setting=2)), (lambda b: RECIPE.delta(b, setting=3))
    own = own_lr_rows()[("", M1)]
    gelu = {s: RECIPE.row("gelu", M1, s)["val_loss_mean"] for s in (1, 2, 3)}
    slower = {s: gelu[s] - gelu[1] for s in (2, 3)}
    vs = lambda r: f"{nats(r['vs_ref'])} {interval(r['vs_ref_lo'], r['vs_ref_hi'])}"  # noqa: E731
    t, t4 = clm.trend(), c4.trend()
    return [
        ("SwiGLU − GELU against the budget, default recipe (GPT-2 init, AdamW 1e-3, WSD)",
         f"{nats(paired(d[Q])[0])} ({mi(Q)}) → " + " → ".join(nats(paired(d[b])[0]) for b in BUDGETS[1:-1])
         + f" → **{paired_plain(d[M4])} at {mi(M4)}**;"
         f" C4: {nats(paired(c4.delta(Q))[0])} → **{paired_plain(c4.delta(M4))}**"),
        ("where it crosses 0", f"**{crossing_cell(t)}** (Wikipedia), {crossing_cell(t4)} (C4); slope "
         f"{nats(t['slope_per_decade'])} {interval(t['slope_lo'], t['slope_hi'])} per 10× tokens"),
        ("does the paper's sign appear in the measured range?",
         f"**yes**: with the default recipe resolved at {mi(M4)} (the line crosses at {tokens(t['crossing_tokens'])});"
         f" with T5's init and optimizer resolved at {mi(M1)} (at {mi(Q)} {nats(paired(ada(Q))[0])},"
         f" paired interval {'excluding' if excludes_zero(*paired(ada(Q))[1:3]) else 'covering'} 0)"),
        (f"the learning rate (each variant tuned: both {lr_label(own_lr())})",
         f"leaves the gap: change {vs(own)} at {mi(M1)}"),
        ("T5's fan-in init", f"moves it by {vs(fan(M1))} at {mi(M1)} (SwiGLU − GELU {nats(paired(fan(M1))[0])}),"
         f" while GELU's loss there is {nats(slower[2])} above the default's"),
        ("fan-in + Adafactor (Shazeer's code had both)",
         f"SwiGLU − GELU at {mi(M1)} {paired_plain(ada(M1))}; at {mi(Q)} {paired_plain(ada(Q))}; moves the gap by"
         f" {vs(ada(Q))} at {mi(Q)}, {vs(ada(M1))} at {mi(M1)}; GELU's loss {nats(slower[3])} above the default's"
         f" at {mi(M1)}"),
        ("GEGLU − GELU and SwiGLU − ReLU (relu, geglu at 0.25 Mi and 1 Mi only)",
         f"GEGLU − GELU {paired_plain(FOUR.delta(Q, 'geglu'))} → {paired_plain(FOUR.delta(M1, 'geglu'))}: it"
         f" tracks SwiGLU; SwiGLU − ReLU {nats(paired(VS_RELU.delta(Q, baseline='relu'))[0])} →"
         f" **{paired_plain(VS_RELU.delta(M1, baseline='relu'))}** at {mi(M1)} (ReLU gains on GELU by"
         f" {mi(M1)}, so the gated variants still trail it there)"),
        ("precision", "fp32: bf16-mixed ran at 0.15–0.20× fp32 on this CPU (no avx512_bf16/AMX; step 1, no committed"
         f" report); on a CPU with native bf16 its change to the gap is {precision()} (3 seeds, 0.25–2 Mi,"
         " [precision/](precision/README.md)): past the ±0.01 bar, so fp32 stays"),
    ]


PRECISION = "precision/precision_gap.csv"


def precision() -> str:
    """bf16's change to SwiGLU − GELU over every budget and held-out set: the range of its means and intervals."""
    rows = list(csv.DictReader(io.StringIO(read(PRECISION))))
    mean, lo, hi = ([float(r[f"interaction_{k}"]) for r in rows] for k in ("mean", "lo", "hi"))
    none = not any(excludes_zero(a, b) for a, b in zip(lo, hi))
    return (f"{nats(min(mean))} to {nats(max(mean))} on average ({'no' if none else 'some'} interval excluding 0),"
            f" its intervals reaching {nats(min(lo))} and {nats(max(hi))}")


STEP5 = Table(
    (LADDER.source, RECIPE.source, OWN_LR, VS_DEFAULT, FOUR.source, VS_RELU.source, PRECISION),
    step5_rows,
    (text("question", lambda x: x[0]), text("answer here", lambda x: x[1])))

# ----------------------------------------------------------------------------- superseded: the cosine tables

C4, C4_RELU = "superseded/c4", "superseded/c4_vs_relu"


def row(folder: str, variant: str) -> dict[str, Any]:
    (r,) = [r for r in table_rows(folder) if r["variant"] == variant]
    return r


def paper(variant: str) -> float:
    """Shazeer 2020's log-perplexity (Table 1), as compare --paper stored it."""
    return row(C4, variant)["paper"]


C4_NOISE = Table(
    (f"{C4}/table.json",),
    lambda: [row(C4, "gelu"), row(C4, "swiglu")],
    (text("variant", lambda r: r["variant"]),
     *(Col(f"seed {s}", lambda r, s=s: loss(seeds_of(r)[s])) for s in (0, 1, 2)),
     Col("std", lambda r: loss(r["val_loss_std"]))))


def variants_table(folder: str) -> Table:
    """Every variant of a cosine-schedule compare, best first, with Shazeer 2020's Δ against GELU beside it."""
    return Table(
        (f"{folder}/table.json", f"{C4}/table.json"),
        lambda: sorted(table_rows(folder), key=lambda r: r["val_loss_mean"]),
        (text("variant", lambda r: r["variant"]), text("form", lambda r: r["form"]),
         Col("hidden", lambda r: count(r["hidden"])),
         Col("FFN params", lambda r: count(r["params_ffn"])), text("seeds 0 / 1 / 2", seed_losses),
         text("val/loss mean ± std", mean_std), text("Δ vs gelu, Welch 95% CI", welch_cell),
         text("paired-by-seed 95% CI", paired_ci_cell),
         Col("Shazeer'20 Δ vs GELU", lambda r: nats(paper(r["variant"]) - paper("gelu")))))


def pair(folder: str, relu_folder: str, a: str, b: str) -> tuple[tuple[float, float, float], tuple | None]:
    """(Welch, paired) of a − b from the compare outputs (b = gelu or relu: its report; else from the seeds)."""
    if b in ("gelu", "relu"):
        r = row(folder if b == "gelu" else relu_folder, a)
        return (r["delta"], r["delta_lo"], r["delta_hi"]), (None, r["paired_lo"], r["paired_hi"])
    ra, rb = row(folder, a), row(folder, b)
    return welch_interval(ra["val_losses"], rb["val_losses"]), paired_interval(seeds_of(ra), seeds_of(rb))


GAP_NAMES = (("GEGLU − GELU", "geglu", "gelu"), ("SwiGLU − GELU", "swiglu", "gelu"),
             ("GEGLU − ReLU", "geglu", "relu"), ("SwiGLU − ReLU", "swiglu", "relu"),
             ("GEGLU − SwiGLU", "geglu", "swiglu"))


def gaps_table(folder: str, relu_folder: str, steps: str = "", shazeer: bool = True, names=GAP_NAMES) -> Table:
    """The card's gaps: Welch (n = 3, 3) and paired by seed; a − b against a third variant from the seeds."""
    def welch(x):
        return starred(*pair(folder, relu_folder, x[1], x[2])[0])

    def paired_ci(x):
        p = pair(folder, relu_folder, x[1], x[2])[1]
        return interval(p[1], p[2]) + (" *" if excludes_zero(p[1], p[2]) else "")
    cols = (text(f"Δ log-ppl (nats){steps}", lambda x: x[0]),
            text(("Welch" if steps else "measured, Welch") + " 95% CI (n = 3, 3)", welch),
            text("paired by seed, 95% CI (df 2)", paired_ci))
    if shazeer:
        cols += (text("Shazeer 2020", lambda x: nats(paper(x[1]) - paper(x[2]))),)
    return Table((f"{folder}/table.json", f"{relu_folder}/table.json", f"{C4}/table.json"), lambda: names, cols)


def curves_table(folder: str) -> Table:
    """Δ against GELU at every validation point (mean over seeds; *: Welch's interval excludes 0)."""
    def curves() -> dict[str, dict[int, dict[str, Any]]]:
        out: dict[str, dict[int, dict[str, Any]]] = {}
        for c in compare_table(folder)["delta_curves"]:
            out.setdefault(c["variant"], {})[c["tokens"]] = c
        return out

    def cell(c: dict[str, Any]) -> str:
        return nats(c["delta"]) + ("*" if excludes_zero(c["delta_lo"], c["delta_hi"]) else "")
    return Table(
        (f"{folder}/table.json",),
        lambda: [(r["variant"], curves()[r["variant"]])
                 for r in sorted(table_rows(folder), key=lambda r: r["val_loss_mean"]) if r["variant"] in curves()],
        lambda: (text("Δ vs gelu at tokens", lambda x: x[0]),
                 *(Col(tokens(t), lambda x, t=t: cell(x[1][t])) for t in sorted(next(iter(curves().values()))))))


SECTION_BLOCKS: dict[str, Callable[[], str]] = {
    "glu-noise-1M": NOISE_1M,
    "glu-relu-geglu": RELU_GEGLU,
    "glu-relu-geglu-seed0": RELU_GEGLU_SEED0,
    "glu-lr-grid": LR_GRID,
    "glu-recipe": RECIPE_TABLE,
    "glu-step5": STEP5,
    "glu-c4-noise": C4_NOISE,
    "glu-c4-240": variants_table(C4),
    "glu-c4-gaps": gaps_table(C4, C4_RELU),
    "glu-c4-curves": curves_table(C4),
    "glu-c4-100": gaps_table("superseded/c4_100steps", "superseded/c4_vs_relu_100steps", ", 100 steps",
                             shazeer=False, names=GAP_NAMES[:4]),
    "glu-toy": variants_table("superseded/toy"),
    "glu-toy-gaps": gaps_table("superseded/toy", "superseded/toy_vs_relu"),
}

# ============================================================================= experiments/glu_variants/width/README.md
# ----------------------------------------------------------------------------- step 1: throughput, and the plan

THROUGHPUT, AXIS, BERT = "width/throughput.jsonl", Report("width"), Report("width/bert_base")


def bench(model: str, variant: str) -> dict[str, Any]:
    """``ffn-zoo-bench``'s row for a model and variant (its tokens/s: the median of the repeats)."""
    (r,) = [r for r in load(THROUGHPUT) if r["model"] == model and r["ffn"] == variant]
    return r


def shapes() -> list[tuple[str, int, int, Report, int]]:
    """(model preset, d_model, layers, report, setting) of every width, from the reports' own settings."""
    out = []
    for report in (AXIS, BERT):
        for setting, s in enumerate(load(report.source)["ladder_settings"], start=1):
            out.append((s["model.name"], s["model.d_model"], s["model.n_layers"], report, setting))
    return out


def params_cell(report: Report, setting: int) -> str:
    return " / ".join(millions(report.row(v, Q, setting)["params_total"]) for v in ("gelu", "swiglu"))


THROUGHPUT_TABLE = Table(
    (THROUGHPUT, AXIS.source, BERT.source),
    shapes,
    (text("model", lambda s: f"`{s[0]}`"), Col("d_model", lambda s: str(s[1])), Col("layers", lambda s: str(s[2])),
     Col("parameters (gelu / swiglu)", lambda s: params_cell(s[3], s[4])),
     Col("train FLOPs/token", lambda s: sig3(bench(s[0], "gelu")["flops_per_token"] / 1e6) + " M"),
     Col("gelu tok/s", lambda s: count(bench(s[0], "gelu")["tokens_per_s"])),
     Col("swiglu tok/s", lambda s: count(bench(s[0], "swiglu")["tokens_per_s"])),
     Col("MFU (gelu)", lambda s: f"{bench(s[0], 'gelu')['mfu']:.2f}")))

RUN_SHARE, VALIDATIONS, BATCH_TOKENS = 0.95, 1.10, 32 * 128  # a train.py run at 0.95× the bare step; +10% validations


def ladder_steps(budgets_mi: tuple[float, ...]) -> int:
    """Steps of one ladder: the trunk to the last budget's cooldown, plus every budget's 20% cooldown."""
    steps = [round(b * 2**20 / BATCH_TOKENS) for b in budgets_mi]
    cooldowns = [round(0.2 * s) for s in steps]
    return steps[-1] - cooldowns[-1] + sum(cooldowns)


def minutes(model: str, variant: str, steps: int) -> float:
    return steps * BATCH_TOKENS / (RUN_SHARE * bench(model, variant)["tokens_per_s"]) * VALIDATIONS / 60


@dataclass(frozen=True)
class Plan:
    step: int
    width: str
    model: str
    budgets: tuple[float, ...]  # Mi tokens; one budget = one plain run
    seeds: int
    runs: int = 1  # runs per (seed, variant): ffn-zoo-tune's lrs
    design: str = ""  # the budgets column, where it is not the list
    seeds_note: str = ""
    committed: bool = False  # ladders already committed: nothing to run, only their run folders to regenerate

    def per_variant(self) -> list[float]:
        return [minutes(self.model, v, ladder_steps(self.budgets)) for v in ("gelu", "swiglu")]

    def per_ladder(self) -> str:
        return f"{statistics.mean(self.per_variant()):.0f} min"

    def total(self) -> str:
        return f"{self.seeds * self.runs * sum(self.per_variant()) / 60:.1f} h"


PLANS = (Plan(2, "128", "w128", (0.25, 0.5, 1, 2, 4), 3),
         Plan(2, "256", "mini", (0.25, 0.5, 1, 2, 4), 3, committed=True),
         Plan(2, "512", "w512", (0.25, 0.5, 1, 2), 2),
         Plan(2, "768", "w768", (0.25, 0.5, 1, 2), 1, seeds_note=" (seeds cut: see below)"),
         Plan(3, "768, σ 0.0115", "w768", (0.25, 1), 2), Plan(3, "256, σ 0.035", "mini", (0.25, 1), 2),
         Plan(4, "768, own lr", "w768", (0.25,), 1, runs=3, design="ffn-zoo-tune, 3 lrs, 64 steps"),
         Plan(5, "BERT-base", "bert_base", (0.25, 0.5), 1))


def plan_row(p: Plan) -> list[str]:
    if p.committed:
        return [str(p.step), p.width, f"the committed `{p.model}` ladders ({p.budgets[0]:g}–{p.budgets[-1]:g} Mi,"
                f" {p.seeds} seeds): same recipe", "—", "—",
                f"0 ({p.total()} to regenerate the run folders for the width compare)"]
    seeds = f"{p.seeds} × 2" + (f" × {p.runs}" if p.runs > 1 else "") + p.seeds_note
    return [str(p.step), p.width, p.design or ", ".join(f"{b:g}" for b in p.budgets), seeds, p.per_ladder(), p.total()]


PLAN = Table(
    (THROUGHPUT,),
    lambda: [plan_row(p) for p in PLANS],
    (Col("step", lambda r: r[0], "---"), text("width", lambda r: r[1]), text("budgets (Mi tokens)", lambda r: r[2]),
     Col("seeds × variants", lambda r: r[3]), Col("per ladder", lambda r: r[4]), Col("total", lambda r: r[5])))

# ----------------------------------------------------------------------------- step 2: one width, seed by seed


def gelu_by_seed(report: Report, budget: int, setting: int = 1) -> dict[int, float]:
    return seeds_of(report.row("gelu", budget, setting))


def seed_table(folder: str, budgets: tuple[int, ...]) -> Table:
    """A width's ladder per seed: GELU's loss, each seed's SwiGLU − GELU, and the paired mean (Wikipedia, C4)."""
    report = Report(folder)
    seeds = lambda: sorted(int(s) for s in report.delta(budgets[0])["per_seed"])  # noqa: E731
    return Table(
        (report.source,),
        lambda: budgets,
        lambda: (Col("budget", mi, "---"),
                 text(f"GELU loss, seed {' / '.join(map(str, seeds()))}",
                      lambda b: " / ".join(loss(v) for _, v in sorted(gelu_by_seed(report, b).items()))),
                 *(Col(f"seed {s}", lambda b, s=s: nats(report.delta(b)["per_seed"][str(s)])) for s in seeds()),
                 Col(f"paired mean [95%] ({len(seeds())} pairs)", lambda b: delta_cell(report.delta(b))),
                 Col("C4, paired mean [95%]", lambda b: delta_cell(report.c4().delta(b)))))

# ----------------------------------------------------------------------------- the width axes, superseded


def crossing_line(t: dict[str, Any]) -> str:
    """:func:`crossing_cell`, with the line's own crossing where it lies past the fitted range, and one seed named."""
    cell = crossing_cell(t)
    if cell.startswith("none in "):
        if t["crossing_tokens"] is not None and t["crossing_tokens"] > t["tokens_hi"]:
            cell = cell[:-1] + f"; line: {tokens(t['crossing_tokens'])})"
        if len(t["seeds_used"]) < 2:
            cell += ", 1 seed"
    return cell


def axis_rows(report: Report) -> list[dict[str, Any]]:
    return load(report.source)["axis_rows"]


WIDTH_AXIS_2MI = Report("superseded/width_axis")
WIDTH_AXIS_1MI = Report("superseded/width_axis_1Mi")
WIDTH_COLS = (Col("width", lambda a: str(a["width"]) + (" (`mini`)" if a["width"] == 256 else "")),
              Col("params", lambda a: millions(a["params"])), Col("seeds", lambda a: str(a["seeds"])))


def axis_table(report: Report, budgets: tuple[int, ...], *last: Col) -> Table:
    """A width axis, one row per width (its report's ``axis_rows``): SwiGLU − GELU at ``budgets``, the crossing."""
    return Table(
        (report.source,),
        lambda: axis_rows(report),
        (*WIDTH_COLS,
         *(Col(mi(b), lambda a, b=b: delta_cell(report.delta(b, setting=a["ladder_setting"]))) for b in budgets),
         text("crossing, Wikipedia [95%]", lambda a: crossing_line(report.trend(a["ladder_setting"]))),
         *last))


FIRST_AXIS = axis_table(
    WIDTH_AXIS_2MI, (),
    text("crossing, C4 [95%]", lambda a: crossing_line(WIDTH_AXIS_2MI.c4().trend(a["ladder_setting"]))),
    text("paired Δ at 2 Mi [95%]", lambda a: delta_cell(WIDTH_AXIS_2MI.delta(M2, setting=a["ladder_setting"]))))
AXIS_1MI = axis_table(WIDTH_AXIS_1MI, (Q, H, M1), text("× GELU's tokens at 1 Mi", multiplier_cell))

# ----------------------------------------------------------------------------- step 5: BERT-base

D768_SEED0, MINI = Report("width/inputs/d768"), Report("wikipedia_ladder")

BERT_TABLE = Table(
    (BERT.source, D768_SEED0.source, MINI.source),
    lambda: (Q, H),
    (Col("budget", mi, "---"), Col("GELU loss", lambda b: loss(BERT.row("gelu", b)["val_loss_mean"])),
     Col("SwiGLU − GELU, Wikipedia", lambda b: nats(paired(BERT.delta(b))[0])),
     Col("SwiGLU − GELU, C4", lambda b: nats(paired(BERT.c4().delta(b))[0])),
     text("× GELU's tokens", lambda b: multiplier_cell(BERT.delta(b)).removesuffix(" (1 seed)")),
     Col("same budget, d 768 × 4 layers (seed 0)", lambda b: nats(D768_SEED0.delta(b)["per_seed"]["0"])),
     Col("`mini` (3 seeds, paired)", lambda b: delta_cell(MINI.delta(b)))))

# ----------------------------------------------------------------------------- step 3: the init scale

MECH_D256, MECH_D768 = Report("width/mech_d256"), Report("width/mech_d768_2seeds")


def sigma(report: Report, setting: int) -> float:
    return load(report.source)["ladder_settings"][setting - 1]["model.init_std"]


def pairs(report: Report, setting: int) -> int:
    return paired(report.delta(Q, setting=setting))[3]


def change(report: Report, budget: int, setting: int = 2) -> str:
    """The setting's Δ − setting 1's, paired by seed (bold: excludes 0)."""
    r = report.delta(budget, setting=setting)
    cell = f"{nats(r['vs_ref'])} {interval(r['vs_ref_lo'], r['vs_ref_hi'])}"
    return f"**{cell}**" if excludes_zero(r["vs_ref_lo"], r["vs_ref_hi"]) else cell


MECH_D256_TABLE = Table(
    (MECH_D256.source,),
    lambda: (Q, M1),
    lambda: (Col("budget", mi, "---"),
             Col(f"SwiGLU − GELU at σ {sigma(MECH_D256, 1):g} ({pairs(MECH_D256, 1)} seeds)",
                 lambda b: delta_cell(MECH_D256.delta(b, setting=1))),
             Col(f"at σ {sigma(MECH_D256, 2):g} ({pairs(MECH_D256, 2)} seeds)",
                 lambda b: delta_cell(MECH_D256.delta(b, setting=2))),
             Col("change [95%], Wikipedia", lambda b: change(MECH_D256, b)),
             Col("change [95%], C4", lambda b: change(MECH_D256.c4(), b))))


def with_seeds(r: dict[str, Any]) -> str:
    """``+0.035 (+0.031, +0.040)``: the paired mean and each seed's Δ."""
    return f"{nats(paired(r)[0])} ({', '.join(nats(v) for _, v in sorted(r['per_seed'].items()))})"


MECH_D768_TABLE = Table(
    (MECH_D768.source,),
    lambda: (Q, M1),
    lambda: (Col("budget", mi, "---"),
             text(f"GELU loss σ {sigma(MECH_D768, 1):g} / {sigma(MECH_D768, 2):g}, seed 0; seed 1",
                  lambda b: "; ".join(" / ".join(loss(gelu_by_seed(MECH_D768, b, setting)[s]) for setting in (1, 2))
                                      for s in (0, 1))),
             Col(f"SwiGLU − GELU at σ {sigma(MECH_D768, 1):g} (seeds 0, 1)",
                 lambda b: with_seeds(MECH_D768.delta(b, setting=1))),
             Col(f"at σ {sigma(MECH_D768, 2):g} (seeds 0, 1)", lambda b: with_seeds(MECH_D768.delta(b, setting=2))),
             Col("change [95%], Wikipedia", lambda b: change(MECH_D768, b)),
             Col("change [95%], C4", lambda b: change(MECH_D768.c4(), b))))


def sigma_rows() -> list[tuple[tuple[Report, int], tuple[Report, int]]]:
    """σ·√d matched across the widths: (d 256's report and setting, d 768's), the smaller scale first."""
    d256 = sorted(((MECH_D256, s) for s in (1, 2)), key=lambda x: sigma(*x))
    d768 = sorted(((MECH_D768, s) for s in (1, 2)), key=lambda x: sigma(*x))
    return list(zip(d256, d768))


def scale(report: Report, setting: int) -> float:
    return sigma(report, setting) * math.sqrt(load(report.source)["ladder_settings"][setting - 1]["model.d_model"])


SIGMA_TABLE = Table(
    (MECH_D256.source, MECH_D768.source),
    sigma_rows,
    (Col("σ·√d, d 256 / d 768", lambda x: f"{scale(*x[0]):.2f} / {scale(*x[1]):.2f} (d 256 at σ {sigma(*x[0]):g};"
                                           f" d 768 at σ {sigma(*x[1]):g})"),
     Col(f"d 256, SwiGLU − GELU at {mi(Q)}", lambda x: delta_cell(x[0][0].delta(Q, setting=x[0][1]))
         + f" ({pairs(*x[0])} seeds)"),
     Col(f"d 768, at {mi(Q)}", lambda x: delta_cell(x[1][0].delta(Q, setting=x[1][1])) + f" ({pairs(*x[1])} seeds)")))

# ----------------------------------------------------------------------------- step 4: the lr at d 768

TUNE, TUNE_UP = "width/tune_d768", "width/tune_d768_up"


def tuning(folder: str) -> dict[str, Any]:
    return load(f"{folder}/tuning.json")


def tuned(folder: str, variant: str) -> dict[str, Any]:
    (r,) = [r for r in load(f"{folder}/tuned.json")["rows"] if r["variant"] == variant]
    return r


def grid_runs(folder: str, variant: str) -> dict[float, dict[str, Any]]:
    return {r["lr"]: r for r in tuning(folder)["variants"][variant]["runs"]}


def grid_col(head: str, folder: str, key: str) -> Col:
    """Each grid run's ``key`` (val_loss or the criterion), lr by lr: ``6.842 / 6.780 / 6.726``."""
    lrs = " / ".join(lr_label(x) for x in tuning(folder)["grid"])
    return text(f"{head} {lrs}", lambda v: " / ".join(loss(r[key]) for _, r in sorted(grid_runs(folder, v).items())))


def own_lr_cell(folder: str, variant: str) -> str:
    t = tuning(folder)
    best = float(t["variants"][variant]["best_lr"])
    return lr_label(best) + (" (grid edge)" if best in (min(t["grid"]), max(t["grid"])) else "")


def tuned_delta(folder: str, variant: str, arm: str) -> str:
    return "(baseline)" if variant == "gelu" else nats(tuned(folder, variant)[arm]["paired_delta"]
                                                       or tuned(folder, variant)[arm]["delta"])


TUNE_TABLE = Table(
    (f"{TUNE}/tuning.json", f"{TUNE}/tuned.json"),
    lambda: ("gelu", "swiglu"),
    lambda: (text("variant", str),
             grid_col("val/loss at lr", TUNE, "val_loss"),
             Col("own lr", lambda v: own_lr_cell(TUNE, v)),
             Col(f"SwiGLU − GELU at the shared {lr_label(tuned(TUNE, 'gelu')['shared']['lr'])}",
                 lambda v: tuned_delta(TUNE, v, "shared")),
             Col("at each one's own lr", lambda v: tuned_delta(TUNE, v, "tuned"))))


def best_over(folders: tuple[str, ...], variant: str) -> float:
    """The lr with the lowest criterion over every grid run (the same runs reused: one per lr)."""
    runs = {lr: r for f in folders for lr, r in grid_runs(f, variant).items()}
    return min(runs, key=lambda lr: runs[lr]["criterion"])


TUNE_UP_TABLE = Table(
    (f"{TUNE_UP}/tuning.json", f"{TUNE}/tuning.json"),
    lambda: ("gelu", "swiglu"),
    lambda: (text("variant", str),
             grid_col("criterion (train/loss, tail) at", TUNE_UP, "criterion"),
             grid_col("val/loss at", TUNE_UP, "val_loss"),
             Col(f"own lr over {lr_label(min(tuning(TUNE)['grid']))} … {lr_label(max(tuning(TUNE_UP)['grid']))}",
                 lambda v: lr_label(best_over((TUNE, TUNE_UP), v)))))

WIDTH_BLOCKS: dict[str, Callable[[], str]] = {
    "width-throughput": THROUGHPUT_TABLE,
    "width-plan": PLAN,
    "width-d768-seeds": seed_table("width/d768_2seeds", (Q, H, M1)),
    "width-first-axis": FIRST_AXIS,
    "width-axis-1Mi": AXIS_1MI,
    "width-d512-seeds": seed_table("width/d512_2seeds", (Q, H, M1, M2)),
    "width-bert": BERT_TABLE,
    "width-mech-d256": MECH_D256_TABLE,
    "width-mech-d768": MECH_D768_TABLE,
    "width-sigma": SIGMA_TABLE,
    "width-tune-d768": TUNE_TABLE,
    "width-tune-d768-up": TUNE_UP_TABLE,
}
