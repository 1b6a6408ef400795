"""The section tables of the GLU write-up (experiments/glu_variants/README.md), each generated from the committed compare outputs it names.

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
import re
from functools import cache
from typing import Any, Callable

from ffn_zoo.analysis.compare.stats import paired_interval, welch_interval
from scripts.table_specs import (BUDGETS, HELD, M1, M2, M4, Q, Col, Report, Table, count, crossing_cell, excludes_zero,
                                 interval, load, loss, lr_label, mi, nats, paired, paired_plain, paired_starred, read,
                                 seeds_of, starred, text, tokens)

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
