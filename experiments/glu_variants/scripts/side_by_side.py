"""Δ(SwiGLU − GELU) against budget under both objectives, from two compare outputs (issue 22, step 4):
    python experiments/glu_variants/scripts/side_by_side.py \
        experiments/glu_variants/wikipedia_ladder experiments/glu_variants/mlm_ladder
writes side_by_side.md and side_by_side.png into the MLM folder (the last argument). Budgets either ladder lacks
show as —. Reads ladder_delta*.csv (paired Δ per budget) and ladder_trend*.csv (slope, crossing) of each, for
Wikipedia (the validation split) and C4 (held out). A third panel puts both on the clock of scored targets (every
token under causal LM, mlm.mask_prob of them under MLM, read from configs/train.yaml)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import matplotlib
from omegaconf import OmegaConf

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import NullFormatter  # noqa: E402

SETS = {"Wikipedia": "", "C4": "_c4"}  # held-out set -> compare's file suffix
OBJECTIVES = ("causal LM", "MLM")


def rows(folder: Path, stem: str, suffix: str) -> list[dict]:
    with open(folder / f"ladder_{stem}{suffix}.csv") as f:
        return [r for r in csv.DictReader(f) if r["variant"] == "swiglu" and r["baseline"] == "gelu"]


def paired(r: dict) -> tuple[float, float, float, str]:
    """(mean, lo, hi, pairs) of the paired Δ; CSVs from before compare wrote paired_delta had equal seed sets, where
    the difference of means is the paired mean. No interval: lo = hi = the mean."""
    mean = float(r.get("paired_delta") or r["delta"])
    lo, hi = r["paired_lo"], r["paired_hi"]
    return mean, float(lo or mean), float(hi or mean), r.get("n_pairs") or r["n"]


def cell(r: dict | None, seeds: str) -> str:
    if r is None:
        return "—"
    mean, lo, hi, n = paired(r)
    ci = f" [{lo:+.3f}, {hi:+.3f}]" if r["paired_lo"] and r["paired_hi"] else " (no interval)"
    return f"{mean:+.3f}{ci}" + ("" if n == seeds else f" ({n} seeds)")


def trend(r: dict) -> str:
    span = f"{int(r['tokens_lo']) / 1e6:.2f}–{int(r['tokens_hi']) / 1e6:.2f} M tokens, {r['budgets']} budgets"
    slope = f"{float(r['slope_per_decade']):+.3f} per 10× [{float(r['slope_lo']):+.3f}, {float(r['slope_hi']):+.3f}]"
    return f"slope {slope} over {span}; {r['verdict']}"


def main(clm_dir: str, mlm_dir: str) -> None:
    folders = dict(zip(OBJECTIVES, (Path(clm_dir), Path(mlm_dir))))
    delta = {(o, s): {int(r["budget_tokens"]): r for r in rows(folders[o], "delta", x)}
             for o in OBJECTIVES for s, x in SETS.items()}
    budgets = sorted(set().union(*delta.values()))
    counts = [paired(r)[3] for d in delta.values() for r in d.values()]
    seeds = max(set(counts), key=counts.count)  # the usual seed count; a cell with another names its own
    head = " | ".join(f"{o}, {s}" for s in SETS for o in OBJECTIVES)
    lines = [f"| budget (tokens) | steps | {head} |", "|---|---:|" + "---|" * (len(SETS) * len(OBJECTIVES))]
    for t in budgets:
        cells = " | ".join(cell(delta[o, s].get(t), seeds) for s in SETS for o in OBJECTIVES)
        steps = next(d[t]["steps"] for d in delta.values() if t in d)
        lines.append(f"| {t:,} | {steps} | {cells} |")
    lines += ["", "Trend of Δ against log10(tokens), each seed fitted on its own, then averaged:", ""]
    lines += [f"- {o}, {s}: {trend(r)}"
              for s, x in SETS.items() for o in OBJECTIVES for r in rows(folders[o], "trend", x)]
    out = folders["MLM"]
    (out / "side_by_side.md").write_text(
        "Δ(SwiGLU − GELU) in nats of validation loss (next-token under causal LM, masked-token under MLM), "
        f"paired by seed, 95%; {seeds} seeds unless a cell says otherwise\n\n" + "\n".join(lines) + "\n")

    mask_prob = OmegaConf.load(Path(__file__).parents[3] / "configs" / "train.yaml").mlm.mask_prob
    panels = [(s, s, {o: 1.0 for o in OBJECTIVES}, "training tokens") for s in SETS]
    panels.append(("Wikipedia", "Wikipedia, per scored target", {"causal LM": 1.0, "MLM": mask_prob},
                   f"scored targets (MLM: {mask_prob:.0%} of tokens)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 4), sharey=True)
    for ax, (s, title, scale, xlabel) in zip(axes, panels):
        for o, style in zip(OBJECTIVES, ("o-", "s-")):
            by = delta[o, s]
            ts = sorted(by)
            x = [t * scale[o] for t in ts]
            mean, lo, hi, _ = zip(*(paired(by[t]) for t in ts))
            ax.plot(x, mean, style, label=o)
            ax.fill_between(x, lo, hi, alpha=0.2)
        ax.axhline(0, color="k", lw=0.8)
        ax.set(xscale="log", xlabel=xlabel, title=title)
        ax.xaxis.set_minor_formatter(NullFormatter())  # the minor labels of a 16x span overlap
        ax.legend()
    axes[0].set_ylabel("Δ val loss, SwiGLU − GELU (nats)")
    fig.suptitle(f"model=mini, same data and WSD ladder, paired 95% bands "
                 f"({seeds} seeds unless the table says otherwise)")
    fig.tight_layout()
    fig.savefig(out / "side_by_side.png", dpi=120)
    print(f"wrote {out / 'side_by_side.md'}, {out / 'side_by_side.png'}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:3])
