"""Every table of the width study (experiments/glu_variants/width/README.md), each generated from the committed
compare outputs it names (specs: scripts/table_specs.py; run through ``python scripts/glu_tables.py``)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from scripts.table_specs import (H, M1, M2, Q, Col, Report, Table, count, crossing_cell, delta_cell, excludes_zero,
                                 interval, load, loss, lr_label, mi, millions, multiplier_cell, nats, paired, seeds_of,
                                 sig3, text, tokens)

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
    "width-d768-seeds": seed_table("width/d768_2seeds", (Q, H, M1, M2)),
    "width-first-axis": FIRST_AXIS,
    "width-axis-1Mi": AXIS_1MI,
    "width-d512-seeds": seed_table("width/d512_2seeds", (Q, H, M1, M2)),
    "width-d512-3seeds": seed_table("width/d512_3seeds", (Q, H, M1, M2)),
    "width-d768-3seeds": seed_table("width/d768_3seeds", (Q, H, M1, M2)),
    "width-bert": BERT_TABLE,
    "width-mech-d256": MECH_D256_TABLE,
    "width-mech-d768": MECH_D768_TABLE,
    "width-sigma": SIGMA_TABLE,
    "width-tune-d768": TUNE_TABLE,
    "width-tune-d768-up": TUNE_UP_TABLE,
}
