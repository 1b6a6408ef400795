"""bf16-mixed against fp32, seed by seed, on the ladder recipe (issue 42, item 3): what bf16 does to each variant's
loss and to the gap between two variants, on every validation set.

    python scripts/precision_gap.py BF16_SWEEP_DIRS... --fp32 experiments/glu_variants/wikipedia_ladder \
        --out experiments/glu_variants/precision

The bf16 side is ladder folders (train.py with ladder.budgets and impl.precision=bf16-mixed); the fp32 side is a
committed ladder comparison (its ladder.json keeps each seed's loss per budget) or fp32 ladder folders. Within a
seed both precisions start from the same weights and see the same batches, so per seed and budget

    Δ_v = loss_bf16(v) − loss_fp32(v)            (bf16's cost to variant v)
    interaction = Δ_swiglu − Δ_gelu               (bf16's change to SwiGLU − GELU)

and each is reported as the mean over seeds with a paired t interval (df = seeds − 1). Writes precision_gap.csv
and precision_gap.md.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

from ffn_zoo.analysis.compare.stats import paired_interval
from ffn_zoo.analysis.compare.trend import tokens_label

VALS = {"wikipedia": "val_loss", "c4": "val_c4_loss"}  # metrics.json keys; the committed report's set names


def branch_losses(folders: list[Path]) -> dict[tuple[str, str, int, int], float]:
    """(val set, ffn, budget tokens, seed) -> loss, from every finished ladder branch under ``folders``."""
    out = {}
    for folder in folders:
        for metrics in folder.rglob("budget=*/metrics.json"):
            m = json.loads(metrics.read_text())
            if m.get("status") != "ok":
                continue
            for name, key in VALS.items():
                if m.get(key) is not None:
                    out[(name, m["ffn"], int(m["ladder_budget_tokens"]), int(m["seed"]))] = float(m[key])
    return out


def report_losses(ladder_json: Path) -> dict[tuple[str, str, int, int], float]:
    """The same keys from a committed ladder comparison's per-seed losses (main set and data.extra_val sets)."""
    report = json.loads(ladder_json.read_text())
    sets = {"wikipedia": report["budget_rows"], **{n: v["budget_rows"] for n, v in report["extra_val"].items()}}
    return {(name, r["variant"], int(r["budget_tokens"]), int(seed)): float(loss)
            for name, rows in sets.items() for r in rows for seed, loss in zip(r["seeds"], r["val_losses"])}


def interval(a: dict[int, float], b: dict[int, float]) -> dict[str, Any]:
    got = paired_interval(a, b)
    seeds = sorted(set(a) & set(b))
    mean = sum(a[s] - b[s] for s in seeds) / len(seeds) if seeds else None
    return {"mean": mean, "lo": got[1] if got else None, "hi": got[2] if got else None, "seeds": seeds,
            "per_seed": [a[s] - b[s] for s in seeds]}


def rows(bf16: dict, fp32: dict, base: str, other: str) -> list[dict[str, Any]]:
    """Per val set and budget: bf16 − fp32 for each variant, the interaction, and each precision's own gap."""
    out = []
    for name, budget in sorted({(k[0], k[2]) for k in bf16}, key=lambda x: (list(VALS).index(x[0]), x[1])):
        get = lambda src, v: {k[3]: x for k, x in src.items() if k[:3] == (name, v, budget)}  # noqa: E731
        b_base, b_other, f_base, f_other = get(bf16, base), get(bf16, other), get(fp32, base), get(fp32, other)
        if not (b_base and f_base):
            continue
        cost = {v: interval(b, f) for v, b, f in ((base, b_base, f_base), (other, b_other, f_other))}
        d_bf16 = {s: b_other[s] - b_base[s] for s in b_other if s in b_base}
        d_fp32 = {s: f_other[s] - f_base[s] for s in f_other if s in f_base}
        out.append({"val": name, "budget_tokens": budget, "base": base, "other": other,
                    **{f"{v}_{k}": x for v in (base, other) for k, x in cost[v].items() if k != "per_seed"},
                    **{f"{v}_per_seed": cost[v]["per_seed"] for v in (base, other)},
                    **{f"interaction_{k}": x for k, x in interval(d_bf16, d_fp32).items()},
                    "gap_bf16": sum(d_bf16.values()) / len(d_bf16) if d_bf16 else None,
                    "gap_fp32": sum(d_fp32[s] for s in d_bf16 if s in d_fp32) / max(1, len(d_bf16))
                    if d_bf16 else None})
    return out


def fmt(x: float | None, lo: float | None = None, hi: float | None = None) -> str:
    if x is None:
        return "—"
    return f"{x:+.4f}" + (f" [{lo:+.4f}, {hi:+.4f}]" if lo is not None else " (1 seed)")


def markdown(table: list[dict[str, Any]]) -> str:
    if not table:
        return "(no budget with both precisions)\n"
    base, other = table[0]["base"], table[0]["other"]
    lines = [f"| val set | budget | seed pairs ({base} / {other} / both) | {base}: bf16 − fp32 | {other}: bf16 − fp32 | interaction: bf16's change "
             f"to {other} − {base} | {other} − {base}, fp32 | {other} − {base}, bf16 |", "|---|---|---|---|---|---|---|---|"]
    for r in table:
        pairs = f"{len(r[f'{base}_seeds'])} / {len(r[f'{other}_seeds'])} / {len(r['interaction_seeds'])}"
        lines.append(f"| {r['val']} | {tokens_label(r['budget_tokens'])} | {pairs} | "
                     f"{fmt(r[f'{base}_mean'], r[f'{base}_lo'], r[f'{base}_hi'])} | "
                     f"{fmt(r[f'{other}_mean'], r[f'{other}_lo'], r[f'{other}_hi'])} | "
                     f"{fmt(r['interaction_mean'], r['interaction_lo'], r['interaction_hi'])} | "
                     f"{fmt(r['gap_fp32'])} | {fmt(r['gap_bf16'])} |".replace(" (1 seed) |", " |"))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bf16", nargs="+", type=Path, help="ladder folders (or sweeps of them) trained in bf16-mixed")
    ap.add_argument("--fp32", nargs="+", type=Path, required=True,
                    help="a committed ladder comparison (folder or ladder.json) or fp32 ladder folders")
    ap.add_argument("--base", default="gelu")
    ap.add_argument("--other", default="swiglu")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    fp32: dict = {}
    for p in args.fp32:
        report = p / "ladder.json" if p.is_dir() and (p / "ladder.json").is_file() and not any(p.rglob("budget=*")) \
            else p if p.suffix == ".json" else None
        fp32.update(report_losses(report) if report else branch_losses([p]))
    table = rows(branch_losses(args.bf16), fp32, args.base, args.other)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "precision_gap.csv", "w", newline="") as f:
        keys = [k for k in table[0] if not k.endswith(("per_seed", "seeds"))] + ["seeds"] if table else []
        w = csv.DictWriter(f, keys, extrasaction="ignore")
        w.writeheader()
        for r in table:
            w.writerow({**r, "seeds": " ".join(map(str, r["interaction_seeds"]))})
    text = markdown(table)
    (args.out / "precision_gap.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
