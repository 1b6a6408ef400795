"""Δ(SwiGLU − GELU) against budget under both objectives, from two compare outputs (issue 22, step 4):
    python experiments/glu_variants/mlm_ladder/side_by_side.py \
        experiments/glu_variants/wikipedia_ladder experiments/glu_variants/mlm_ladder
writes side_by_side.md and side_by_side.png into the MLM folder (the last argument). Budgets either ladder lacks
show as —. Reads ladder_delta.csv (Wikipedia) and ladder_delta_c4.csv (C4 held out) of each."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def deltas(folder: Path, name: str) -> dict[int, dict]:
    rows = csv.DictReader(open(folder / name))
    return {int(r["budget_tokens"]): r for r in rows if r["variant"] == "swiglu" and r["baseline"] == "gelu"}


def cell(r: dict | None) -> str:
    if r is None:
        return "—"
    lo, hi = r["paired_lo"], r["paired_hi"]
    ci = f" [{float(lo):+.3f}, {float(hi):+.3f}]" if lo and hi else " (no interval)"
    return f"{float(r['delta']):+.3f}{ci} ({r['n']} seeds)"


def main(clm_dir: str, mlm_dir: str) -> None:
    clm, mlm, out = Path(clm_dir), Path(mlm_dir), Path(mlm_dir)
    lines = ["| budget (tokens) | causal LM, Wikipedia | MLM, Wikipedia | causal LM, C4 | MLM, C4 |", "|---|---|---|---|---|"]
    sets = {s: (deltas(clm, f), deltas(mlm, f)) for s, f in (("wiki", "ladder_delta.csv"), ("c4", "ladder_delta_c4.csv"))}
    budgets = sorted(set().union(*(set(a) | set(b) for a, b in sets.values())))
    for t in budgets:
        lines.append(f"| {t:,} | {cell(sets['wiki'][0].get(t))} | {cell(sets['wiki'][1].get(t))} | "
                     f"{cell(sets['c4'][0].get(t))} | {cell(sets['c4'][1].get(t))} |")
    (out / "side_by_side.md").write_text("Δ(SwiGLU − GELU), paired by seed, 95%\n\n" + "\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(6, 4))
    for (label, rows), style in zip([("causal LM", sets["wiki"][0]), ("MLM", sets["wiki"][1])], ("o-", "s-")):
        ts = sorted(rows)
        d = [float(rows[t]["delta"]) for t in ts]
        lo = [float(rows[t]["paired_lo"] or rows[t]["delta"]) for t in ts]
        hi = [float(rows[t]["paired_hi"] or rows[t]["delta"]) for t in ts]
        ax.plot(ts, d, style, label=label)
        ax.fill_between(ts, lo, hi, alpha=0.2)
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xscale="log", xlabel="training tokens", ylabel="Δ val loss, SwiGLU − GELU (nats)",
           title="model=mini, Wikipedia validation: both objectives")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "side_by_side.png", dpi=120)
    print(f"wrote {out / 'side_by_side.md'}, {out / 'side_by_side.png'}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
