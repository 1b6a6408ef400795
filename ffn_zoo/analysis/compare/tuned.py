"""Each variant at its own learning rate: the tuning criterion, and the shared-lr and tuned-lr tables side by side.

``ffn_zoo.tools.tune`` writes ``<out>/tuning.json`` (each variant's grid, criterion values, chosen lr, and the
seed runs of both arms); :func:`compare_tuned` reads it back. ``ffn-zoo-compare <out>`` lands here when ``<out>``
holds a ``tuning.json``.

The lr is chosen on the *training* loss (mean ``train/loss`` over the last part of a short run), never on the
validation split the tables report: choosing and reporting on the same tokens would bias Δ toward whichever arm
the choice favoured. Each training batch is scored before the update that uses it, so while a run sees its data
once (the presets stay under one epoch) that loss is also an unbiased held-out estimate on the train distribution.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np

from ffn_zoo.analysis.compare.runs import Run, group_runs, load_run, val_curve
from ffn_zoo.analysis.compare.stats import summarize, welch_interval
from ffn_zoo.analysis.compare.tables import delta_cell, paired_cell
from ffn_zoo.errors import DataError

CRITERION = "train_loss_tail"


def criterion_text(fraction: float) -> str:
    return (f"mean train/loss over the last {fraction:.0%} of the tuning steps (training batches, each scored before "
            f"its update; not the reported validation split)")


def tail_train_loss(run: Run, fraction: float) -> float | None:
    """Mean ``train/loss`` over the logged steps in the last ``fraction`` of the run; None if none were logged."""
    tokens, loss = val_curve(run, "train/loss")  # TensorBoard events; (tokens after each logged step, value)
    if not len(tokens):
        tokens, loss = _csv_curve(run.path / "metrics.csv", "train/loss")  # logger=csv
    total = run.metrics.get("tokens_seen") or (tokens.max() if len(tokens) else 0)
    tail = loss[tokens > (1 - fraction) * total]
    return float(tail.mean()) if len(tail) else None


def _csv_curve(path: Path, tag: str) -> tuple[np.ndarray, np.ndarray]:
    """(step + 1, value) of one column of Lightning's metrics.csv (the step axis stands in for tokens)."""
    if not path.is_file():
        return np.array([]), np.array([])
    with path.open() as f:
        rows = [(int(r["step"]) + 1, float(r[tag])) for r in csv.DictReader(f) if r.get(tag)]
    return np.array([s for s, _ in rows], dtype=float), np.array([v for _, v in rows])


# ---------------------------------------------------------------------------------------------- side by side


def _arm_rows(root: Path, arm: dict[str, Any], baseline: str) -> tuple[dict[str, dict[str, Any]], list[str], list[Run]]:
    """One arm (shared or tuned lr): compare's rows by variant, with optim.lr left out of the grouping key so
    variants at different lrs form one setting (their Δ is what the arm measures)."""
    runs = [load_run(root / p) for entry in arm.values() for p in entry["runs"]]
    bare = [Run(r.path, r.status, {k: v for k, v in r.config.items() if k != "optim.lr"}, r.metrics, r.error)
            for r in runs if r.status == "ok"]
    groups, _, warnings = group_runs(bare)
    rows = {row["variant"]: row for row in summarize(groups, baseline)}
    for name, row in rows.items():
        row["lr"] = arm[name]["lr"]
    return rows, warnings, [r for r in runs if r.status != "ok"]


def side_by_side(root: Path, tuning: dict[str, Any], baseline: str) -> dict[str, Any]:
    """Per variant: the shared-lr row and the tuned-lr row (mean, Welch and paired Δ vs the baseline in each arm),
    and tuned − shared for the variant itself."""
    arms, warnings, problems = {}, list(tuning.get("warnings", [])), []
    for name, arm in tuning["arms"].items():
        rows, warn, bad = _arm_rows(root, arm, baseline)
        arms[name] = rows
        warnings += [f"{name} lr: {w}" for w in warn]
        problems += bad
    table = []
    for v in tuning["variants"]:
        shared, tuned = arms.get("shared", {}).get(v), arms.get("tuned", {}).get(v)
        gain = None
        if shared and tuned:
            ci = welch_interval(tuned["val_losses"], shared["val_losses"])
            gain = {"delta": tuned["val_loss_mean"] - shared["val_loss_mean"],
                    "lo": ci[1] if ci else None, "hi": ci[2] if ci else None}
        table.append({"variant": v, "shared": shared, "tuned": tuned, "tuned_minus_shared": gain})
    return {"baseline": baseline, "rows": table, "warnings": warnings,
            "problems": [{"path": str(r.path), "status": r.status, "error": r.error} for r in problems]}


def _arm_cells(r: dict[str, Any] | None) -> list[str]:
    if r is None:
        return ["—"] * 4
    std = f" ± {r['val_loss_std']:.3f}" if r["val_loss_std"] is not None else ""
    return [f"{r['lr']:g}", f"{r['val_loss_mean']:.3f}{std} (n={r['n']})", delta_cell(r),
            "—" if r["variant"] == r["baseline"] else paired_cell(r)]


def markdown(report: dict[str, Any], tuning: dict[str, Any]) -> str:
    b = report["baseline"]
    head = ["variant", "shared lr", "val/loss", f"Δ vs {b} [Welch 95%]", "paired Δ [95%]",
            "own lr", "val/loss", f"Δ vs {b} [Welch 95%]", "paired Δ [95%]", "own − shared [Welch 95%]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for row in report["rows"]:
        g = row["tuned_minus_shared"]
        gain = "—" if g is None else (f"{g['delta']:+.3f}" if g["lo"] is None else
                                      f"{g['delta']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}]")
        lines.append("| " + " | ".join([row["variant"], *_arm_cells(row["shared"]), *_arm_cells(row["tuned"]), gain])
                     + " |")
    grid = ", ".join(f"{x:g}" for x in tuning["grid"])
    parts = ["\n".join(lines),
             f"Own lr: each variant's best of the grid [{grid}] on {tuning['criterion_text']}, after "
             f"{tuning['tune_steps']} steps at seed {tuning['tune_seed']} (tuning.md). Shared lr: every variant at "
             f"the same lr. val/loss: the reported validation split, nats/token, mean ± std over seeds; Δ = mean − "
             f"{b}'s within the same arm; paired = mean of the per-seed differences with its t interval (same data order within a "
             f"seed, whatever the lr); * = the interval excludes 0."]
    if report["warnings"]:
        parts.append("\n".join(f"warning: {w}" for w in report["warnings"]))
    if report["problems"]:
        parts.append("Runs not in the table:\n" + "\n".join(f"- {p['status']}: {p['path']}: {p['error']}"
                                                             for p in report["problems"]))
    return "\n\n".join(parts) + "\n"


def compare_tuned(root: str | Path, baseline: str | None = None, out: Path | None = None) -> dict[str, Any]:
    """Read ``<root>/tuning.json``, write ``<out or root/compare>/tuned.md`` and ``tuned.json``; print the table."""
    root = Path(root)
    if not (root / "tuning.json").is_file():
        raise DataError(f"{root / 'tuning.json'}: not found (written by python -m ffn_zoo.tools.tune)")
    tuning = json.loads((root / "tuning.json").read_text())
    baseline = baseline or tuning["baseline"]
    report = side_by_side(root, tuning, baseline)
    text = markdown(report, tuning)
    out = Path(out) if out else root / "compare"
    out.mkdir(parents=True, exist_ok=True)
    (out / "tuned.md").write_text(text)
    (out / "tuned.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(text, end="")
    print(f"wrote {out}/tuned.md, tuned.json")
    return report

