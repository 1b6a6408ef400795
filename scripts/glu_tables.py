"""Regenerate the GLU study's generated blocks (experiments/glu_variants/README.md, width/README.md,
mlm_ladder_8Mi/README.md and depth/README.md) from the
committed compare outputs: the headline table, the baseline losses, the width and objective tables, the numbers
quoted in the text, and every section table.

    python scripts/glu_tables.py          # rewrites both READMEs in place; tests/unit/test_glu_tables.py checks them
    python scripts/glu_tables.py --check  # exit 1 and name the stale ones, writing nothing

The section tables are specs in scripts/glu_section_tables.py, the width study's
(experiments/glu_variants/width/README.md) in scripts/width_tables.py: one per block, with the committed files it
reads; what they are made of (cells, the rounding rule, a report's rows) is scripts/table_specs.py.

A block is ``<!-- gen:NAME -->...<!-- /gen:NAME -->`` (as scripts/readme_tables.py); a ``n-...`` block is one number
in a sentence. One rounding rule: nats (losses, Δ, slopes) to 3 decimals, token counts, parameters and multipliers
to 3 significant figures, exact counts as integers, each from the stored float, never from an already rounded number
(the one exception, the own-lr arm, is named in scripts/glu_section_tables.py).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable

from ffn_zoo.analysis.compare.multiplier import effective_multiplier

if not __package__:  # run as `python scripts/glu_tables.py`: the repository root, so `scripts` imports
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.readme_tables import render_readme  # noqa: E402
from scripts.table_specs import (BUDGETS, GLU, crossing_cell, delta_cell, mi, multiplier_cell,  # noqa: E402
                                 nats, paired)

README = GLU / "README.md"


@dataclass(frozen=True)
class Shape:
    """One row of the headline: an objective at one model shape, read from one committed ladder report."""
    objective: str
    shape: str
    folder: str  # under experiments/glu_variants
    setting: int = 1  # the report's ladder_setting (the width axis holds several)


D128 = Shape("causal LM", "d 128 × 4", "width/d128")
CLM = Shape("causal LM", "d 256 × 4 (`mini`)", "wikipedia_ladder")
D512 = Shape("causal LM", "d 512 × 4", "width/d512_3seeds")
D768 = Shape("causal LM", "d 768 × 4", "width", setting=4)
DEPTH_AXIS = "depth"  # d 256 over 0.25-2 Mi (issue 44): ladder_setting 1..4 = 4 (the committed map), 2, 8, 12 layers
DEPTHS = {2: 2, 1: 4, 3: 8, 4: 12}  # ladder_setting -> layers, in the order of depth
L2 = Shape("causal LM", "d 256 × 2", DEPTH_AXIS, setting=2)
L8 = Shape("causal LM", "d 256 × 8", DEPTH_AXIS, setting=3)
L12 = Shape("causal LM", "d 256 × 12", DEPTH_AXIS, setting=4)
BERT = Shape("causal LM", "d 768 × 12 (BERT-base)", "width/bert_base_2seeds")  # the first ladders, 0.25-0.5 Mi
# The same two seeds retrained to 2 Mi on one Xeon (each pair on one CPU with one denormal setting): the headline row
BERT_2MI = Shape("causal LM", "d 768 × 12 (BERT-base)", "width/bert_base_2Mi_3seeds")
MLM8 = Shape("MLM", "d 256 × 4 (`mini`)", "mlm_ladder_8Mi")  # 0.25-8 Mi; its 0.25-4 Mi 3-seed ladders: mlm_ladder
MLM_DEPTH_AXIS = "depth/mlm"  # MLM at d 256, 0.25-2 Mi (issue 44 step 5): ladder_setting 1 = 4 layers, 2 = 12, 3 = 8
MLM_DEPTHS = {1: 4, 3: 8, 2: 12}  # rows by depth; 8 layers is setting 3, its folders given to compare last
MLM12 = Shape("MLM", "d 256 × 12", MLM_DEPTH_AXIS, setting=2)
MLM_W768 = Shape("MLM", "d 768 × 4", "depth/mlm_w768")  # width without depth under MLM (after issue 44)
BERT_MLM = Shape("MLM", "d 768 × 12 (BERT-base)", "depth/bert_mlm")  # issue 44 step 6 under MLM
SHAPES = (D128, CLM, D512, D768, L2, L8, L12, BERT_2MI, MLM8, MLM_W768, MLM12, BERT_MLM)
EARLY = (262_144, 524_288)  # 0.25 and 0.5 Mi, the budgets every shape has
HEADLINE_BUDGETS = (*BUDGETS, 8_388_608)  # 8 Mi: MLM only (issue 41)
WIDTH_AXIS = "width"  # every 4-layer width over 0.26-2.1 M tokens: ladder_setting 1..4 = d 128, 256, 512, 768


@cache
def report(folder: str) -> dict[str, Any]:
    return json.loads((GLU / folder / "ladder.json").read_text())


def part(folder: str, held: str = "") -> dict[str, Any]:
    """The report's rows on Wikipedia validation (``held=""``) or an extra held-out set (``"c4"``)."""
    r = report(folder)
    return r["extra_val"][held] if held else r


def delta_rows(shape: Shape, held: str = "") -> dict[int, dict[str, Any]]:
    """SwiGLU − GELU per budget."""
    return {r["budget_tokens"]: r for r in part(shape.folder, held)["delta_rows"]
            if r["variant"] == "swiglu" and r["baseline"] == "gelu" and r["ladder_setting"] == shape.setting}


def trend(shape: Shape, held: str = "") -> dict[str, Any]:
    (t,) = [t for t in part(shape.folder, held)["trends"]
            if t["variant"] == "swiglu" and t["baseline"] == "gelu" and t["ladder_setting"] == shape.setting]
    return t


def losses(shape: Shape, variant: str, held: str = "") -> dict[int, dict[str, Any]]:
    return {r["budget_tokens"]: r for r in part(shape.folder, held)["budget_rows"]
            if r["variant"] == variant and r["ladder_setting"] == shape.setting}


def multiplier(shape: Shape, budget: int) -> dict[str, Any]:
    """The effective compute multiplier as the report has it; a report from before compare wrote one gets it from
    compare's own function on the report's per-seed losses."""
    row = delta_rows(shape)[budget]
    if "multiplier_note" in row:
        return row
    seeds = lambda r: dict(zip(map(str, r["seeds"]), r["val_losses"]))  # noqa: E731
    base = {t: seeds(r) for t, r in losses(shape, "gelu").items()}
    return effective_multiplier(seeds(losses(shape, "swiglu")[budget]), base, budget)

# ----------------------------------------------------------------------------- one rounding rule, one cell style


# ----------------------------------------------------------------------------- the tables


def seeds_cell(rows: dict[int, dict[str, Any]]) -> str:
    """``3``, or ``2 (2.1 M: 1)`` where a budget has fewer pairs."""
    counts = {t: paired(r)[3] for t, r in rows.items()}
    most = max(counts.values())
    fewer = [f"{mi(t)}: {n}" for t, n in counts.items() if n != most]
    return f"{most}" + (f" ({', '.join(fewer)})" if fewer else "")


def headline() -> str:
    lines = ["| objective | shape (d × layers) | seeds | " + " | ".join(mi(t) for t in HEADLINE_BUDGETS)
             + " | crossing [95%] | × GELU's tokens at the largest budget |",
             "|---|---|---|" + "---:|" * len(HEADLINE_BUDGETS) + "---|---|"]
    for s in SHAPES:
        rows = delta_rows(s)
        cells = [delta_cell(rows.get(t), max(paired(r)[3] for r in rows.values())) for t in HEADLINE_BUDGETS]
        top = max(rows)
        lines.append(f"| {s.objective} | {s.shape} | {seeds_cell(rows)} | " + " | ".join(cells)
                     + f" | {crossing_cell(trend(s))} | {multiplier_cell(multiplier(s, top))} at {mi(top)} |")
    return "\n".join(lines)


def params(shape: Shape, variant: str) -> int:
    return next(iter(losses(shape, variant).values()))["params_total"]


def baseline() -> str:
    lines = ["| shape (d × layers) | parameters, GELU / SwiGLU | seeds | "
             + " | ".join(f"{mi(t)}: GELU / SwiGLU" for t in BUDGETS) + " |",
             "|---|---:|---|" + "---:|" * len(BUDGETS)]
    for s in SHAPES:
        if s.objective != "causal LM":
            continue
        gelu, swiglu = losses(s, "gelu"), losses(s, "swiglu")
        cells = [f"{gelu[t]['val_loss_mean']:.3f} / {swiglu[t]['val_loss_mean']:.3f}" if t in gelu else "—"
                 for t in BUDGETS]
        lines.append(f"| {s.shape} | {params(s, 'gelu') / 1e6:.3g} M / {params(s, 'swiglu') / 1e6:.3g} M | "
                     f"{seeds_cell(delta_rows(s))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def axis_table(folder: str, settings: dict[int, int], name: str, key: str) -> str:
    """One axis as compare fitted it (``--axis``): a row per setting over the same four budgets, both held-out sets;
    ``settings`` maps the report's ladder_setting to the axis value ``key``, in the rows' order (checked against the
    report: compare numbers settings in the order of the folders it was given)."""
    budgets = BUDGETS[:4]
    lines = [f"| {name} | seeds | " + " | ".join(mi(t) for t in budgets)
             + " | crossing [95%], Wikipedia | crossing [95%], C4 | × GELU's tokens at 2 Mi |",
             "|---:|---|" + "---:|" * len(budgets) + "---|---|---|"]
    for setting, value in settings.items():
        found = report(folder)["ladder_settings"][setting - 1][key]
        assert found == value, f"{folder}: ladder_setting {setting} has {key}={found}, not {value}"
        s = Shape("causal LM", f"{name} {value}", folder, setting)
        rows = delta_rows(s)
        most = max(paired(r)[3] for r in rows.values())
        lines.append(f"| {value} | {seeds_cell(rows)} | " + " | ".join(delta_cell(rows.get(t), most) for t in budgets)
                     + f" | {crossing_cell(trend(s))} | {crossing_cell(trend(s, 'c4'))} | "
                     f"{multiplier_cell(multiplier(s, budgets[-1]))} |")
    return "\n".join(lines)


def width() -> str:
    """The width axis: every 4-layer width over 0.25-2 Mi (issue 21)."""
    return axis_table(WIDTH_AXIS, {1: 128, 2: 256, 3: 512, 4: 768}, "d (4 layers)", "model.d_model")


def depth() -> str:
    """The depth axis: d 256 at 2, 4, 8 and 12 layers over 0.25-2 Mi (issue 44)."""
    return axis_table(DEPTH_AXIS, DEPTHS, "layers (d 256)", "model.n_layers")


def depth_mlm() -> str:
    """The depth axis under MLM: d 256 at 4, 8 and 12 layers over 0.25-2 Mi (issue 44, step 5)."""
    return axis_table(MLM_DEPTH_AXIS, MLM_DEPTHS, "layers (d 256), MLM", "model.n_layers")


def objectives() -> str:
    """Causal LM against MLM at `mini`, both held-out sets, with MLM's multiplier at every budget."""
    clm, mlm = CLM, MLM
    lines = ["| objective | held-out set | " + " | ".join(mi(t) for t in BUDGETS) + " | slope per 10× [95%] |",
             "|---|---|" + "---:|" * len(BUDGETS) + "---|"]
    for s in (clm, mlm):
        for held, name in (("", "Wikipedia"), ("c4", "C4")):
            rows, t = delta_rows(s, held), trend(s, held)
            lines.append(f"| {s.objective} | {name} | " + " | ".join(delta_cell(rows.get(b)) for b in BUDGETS)
                         + f" | {slope_text(t)} |")
    for s in (clm, mlm):
        lines.append(f"| {s.objective}: × GELU's tokens | Wikipedia | "
                     + " | ".join(multiplier_cell(multiplier(s, b)) for b in BUDGETS) + " | |")
    return "\n".join(lines)

def ladder() -> str:
    """The d 256 causal ladder per budget and held-out set: each variant's mean ± std, the paired Δ, each seed's Δ."""
    lines = ["| held-out set | budget | GELU mean ± std | SwiGLU mean ± std | SwiGLU − GELU, paired [95%] | per seed |",
             "|---|---|---:|---:|---:|---|"]
    for held, name in (("", "Wikipedia"), ("c4", "C4")):
        gelu, swiglu, rows = losses(CLM, "gelu", held), losses(CLM, "swiglu", held), delta_rows(CLM, held)
        for t in BUDGETS:
            per_seed = " / ".join(nats(v) for _, v in sorted(rows[t]["per_seed"].items()))
            lines.append(f"| {name} | {mi(t)} | {gelu[t]['val_loss_mean']:.3f} ± {gelu[t]['val_loss_std']:.3f} | "
                         f"{swiglu[t]['val_loss_mean']:.3f} ± {swiglu[t]['val_loss_std']:.3f} | "
                         f"{delta_cell(rows[t])} | {per_seed} |")
    return "\n".join(lines)

# ----------------------------------------------------------------------------- numbers quoted in sentences


def seed_delta(shape: Shape, budget: int, seed: str) -> str:
    return nats(delta_rows(shape)[budget]["per_seed"][seed])


def every_seed(shape: Shape, budget: int, sep: str = ", ") -> str:
    """Each seed's Δ at one budget, in the order of the seeds the report holds."""
    per_seed = delta_rows(shape)[budget]["per_seed"]
    return sep.join(nats(per_seed[s]) for s in sorted(per_seed, key=int))


def delta_cells(shape: Shape, budgets: tuple[int, ...], seeds: int | None = None) -> str:
    """Δ cells at several budgets, ``a / b / c`` (``seeds`` as delta_cell's)."""
    return " / ".join(delta_cell(delta_rows(shape)[t], seeds) for t in budgets)


def slope_text(t: dict) -> str:
    """A trend's slope per 10× tokens with its 95% interval."""
    return f"{nats(t['slope_per_decade'])} [{nats(t['slope_lo'])}, {nats(t['slope_hi'])}]"


def slope_cell(shape: Shape) -> str:
    return slope_text(trend(shape))


def gelu_at(shape: Shape, budgets: tuple[int, int] = (1_048_576, 2_097_152)) -> str:
    """GELU's mean loss at 1 and 2 Mi with the seeds behind each: ``6.044 / 5.603 (2 / 1 seeds)``."""
    rows = [losses(shape, "gelu")[t] for t in budgets]
    return (" / ".join(f"{r['val_loss_mean']:.3f}" for r in rows)
            + f" ({' / '.join(str(r['n']) for r in rows)} seeds)")


def mlm_8mi() -> str:
    """The MLM ladders grown to 8 Mi (issue 41): Δ on both held-out sets, the trend over 2-8 Mi, the multiplier."""
    lines = ["| held-out set | seeds | " + " | ".join(mi(t) for t in HEADLINE_BUDGETS) + " | slope per 10× over 2–8 Mi |",
             "|---|---|" + "---:|" * len(HEADLINE_BUDGETS) + "---|"]
    for held, name in (("", "Wikipedia"), ("c4", "C4")):
        rows = delta_rows(MLM8, held)
        lines.append(f"| {name} | {seeds_cell(rows)} | " + " | ".join(delta_cell(rows.get(b)) for b in HEADLINE_BUDGETS)
                     + f" | {late_slope(held)} |")
    lines.append("| × GELU's tokens (Wikipedia) | | " + " | ".join(multiplier_cell(multiplier(MLM8, b))
                                                                  for b in HEADLINE_BUDGETS) + " | |")
    return "\n".join(lines)


def late_slope(held: str) -> str:
    """The trend over 2-8 Mi, from the report compare wrote with ``--budgets 2Mi 4Mi 8Mi`` (mlm_ladder_8Mi/late)."""
    t = trend(MLM8_LATE, held)
    if t.get("slope_lo") is None:
        return f"{nats(t['slope_per_decade'])} ({len(t['seeds_used'])} seed)"
    return slope_text(t)


MLM = Shape("MLM", "d 256 × 4 (`mini`)", "mlm_ladder")  # 0.25-4 Mi, the committed 3 seeds (issue 22)
MLM8_LATE = Shape("MLM", "d 256 × 4 (`mini`)", "mlm_ladder_8Mi/late")
NUMBERS: dict[str, Callable[[], str]] = {
    "n-clm-1Mi": lambda: delta_cell(delta_rows(CLM)[1_048_576]),
    "n-clm-4Mi": lambda: delta_cell(delta_rows(CLM)[4_194_304]),
    "n-clm-slope": lambda: slope_cell(CLM),
    "n-clm-crossing": lambda: crossing_cell(trend(CLM)),
    "n-d512-2Mi-seeds": lambda: every_seed(D512, 2_097_152),
    "n-d512-slope": lambda: slope_cell(D512),
    "n-d768-1Mi": lambda: delta_cell(delta_rows(D768)[1_048_576]),
    "n-d768-2Mi-seeds": lambda: every_seed(D768, 2_097_152),
    "n-d768-first": lambda: delta_cell(delta_rows(D768)[262_144]),
    "n-d768-2Mi": lambda: delta_cell(delta_rows(D768)[2_097_152]),
    "n-d768-crossing": lambda: crossing_cell(trend(D768)),
    "n-d768-slope": lambda: slope_cell(D768),
    "n-bert": lambda: f"{seed_delta(BERT, 262_144, '0')} / {seed_delta(BERT, 524_288, '0')}",
    "n-bert-s1": lambda: f"{seed_delta(BERT, 262_144, '1')} / {seed_delta(BERT, 524_288, '1')}",
    "n-bert-2": lambda: delta_cells(BERT, EARLY, 2),
    "n-bert-2Mi": lambda: " / ".join(nats(paired(delta_rows(BERT_2MI)[t])[0]) for t in BUDGETS[:4]),
    "n-bert-2Mi-ci": lambda: delta_cell(delta_rows(BERT_2MI)[2_097_152]),
    "n-bert-2Mi-seeds": lambda: every_seed(BERT_2MI, 2_097_152, " / "),
    "n-bert-2Mi-crossing": lambda: crossing_cell(trend(BERT_2MI)),
    "n-bert-2Mi-slope": lambda: slope_cell(BERT_2MI),
    "n-bert-2Mi-cells": lambda: delta_cells(BERT_2MI, BUDGETS[:4]),
    "n-mlm-crossing": lambda: crossing_cell(trend(MLM)).replace(" (SwiGLU falls behind)", ""),
    "n-mlm-4Mi": lambda: delta_cell(delta_rows(MLM)[4_194_304]),
    "n-mlm-8Mi": lambda: delta_cell(delta_rows(MLM8)[8_388_608]),
    "n-mlm-8Mi-c4": lambda: delta_cell(delta_rows(MLM8, "c4")[8_388_608]),
    "n-mlm-8Mi-x": lambda: multiplier_cell(multiplier(MLM8, 8_388_608)),
    "n-mlm12-2Mi": lambda: delta_cell(delta_rows(MLM12)[2_097_152]),
    "n-bert-mlm": lambda: delta_cells(BERT_MLM, EARLY),
    "n-bert-mlm-1Mi": lambda: delta_cell(delta_rows(BERT_MLM)[1_048_576]),
    "n-bert-mlm-1Mi-seeds": lambda: every_seed(BERT_MLM, 1_048_576, " / "),
    "n-mlm-w768": lambda: delta_cells(MLM_W768, EARLY),
    "n-mlm-w768-late": lambda: " / ".join(every_seed(MLM_W768, t) for t in (1_048_576, 2_097_152)),

    "n-gelu-d256": lambda: gelu_at(CLM),
    "n-gelu-d512": lambda: gelu_at(D512),
    "n-gelu-d768": lambda: gelu_at(D768),
}
BLOCKS: dict[str, Callable[[], str]] = {
    "glu-headline": lambda: "\n" + headline() + "\n",
    "glu-baseline": lambda: "\n" + baseline() + "\n",
    "glu-width": lambda: "\n" + width() + "\n",
    "glu-depth": lambda: "\n" + depth() + "\n",
    "glu-depth-mlm": lambda: "\n" + depth_mlm() + "\n",
    "glu-objectives": lambda: "\n" + objectives() + "\n",
    "glu-mlm-8Mi": lambda: "\n" + mlm_8mi() + "\n",
    "glu-ladder": lambda: "\n" + ladder() + "\n",
    **NUMBERS,
}


WIDTH_README = GLU / "width" / "README.md"
MLM8_README = GLU / "mlm_ladder_8Mi" / "README.md"
DEPTH_README = GLU / "depth" / "README.md"
DEPTH_BLOCKS = {k: BLOCKS[k] for k in ("glu-depth", "glu-depth-mlm")}  # issue 44's folder: both depth axes
MLM8_BLOCKS: dict[str, Callable[[], str]] = {  # issue 41's folder: its table and numbers, from its own report
    "glu-mlm-8Mi": BLOCKS["glu-mlm-8Mi"], **{k: v for k, v in NUMBERS.items() if k.startswith("n-mlm-8Mi")},
    "n-mlm-8Mi-seeds": lambda: str(paired(delta_rows(MLM8)[8_388_608])[3]),
    "n-mlm-8Mi-slope": lambda: late_slope(""),
    "n-mlm-8Mi-slope-c4": lambda: late_slope("c4"),
    "n-mlm-8Mi-at-4Mi": lambda: delta_cell(delta_rows(MLM8)[4_194_304]),
    "n-mlm-4Mi": NUMBERS["n-mlm-4Mi"],
}


def documents() -> dict[Path, dict[str, Callable[[], str]]]:
    """Every generated document and its blocks: the write-up (the blocks above and its section tables,
    scripts/glu_section_tables.py) and the width study's README (scripts/width_tables.py)."""
    from scripts.glu_section_tables import SECTION_BLOCKS  # here, not at the top: `python scripts/glu_tables.py`
    from scripts.width_tables import WIDTH_BLOCKS  # puts the repository on sys.path first

    return {README: {**BLOCKS, **SECTION_BLOCKS}, WIDTH_README: WIDTH_BLOCKS, MLM8_README: MLM8_BLOCKS,
            DEPTH_README: DEPTH_BLOCKS}


def render(text: str, path: Path = README) -> str:
    """``text`` (the document at ``path``) with every generated block rewritten (each built once)."""
    return render_readme(text, documents()[path])


def main(argv: list[str] | None = None) -> int:
    """Rewrite every generated document in place, or with ``--check`` name the stale ones (exit 1)."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for path in documents():
        text = path.read_text()
        new = render(text, path)
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
    for path in stale:
        print(f"{'stale' if check else 'wrote'} {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
