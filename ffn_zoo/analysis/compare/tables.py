"""The table as Markdown (with the notes under it) and CSV."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any, Sequence

from ffn_zoo.analysis.compare.runs import Run


def _fmt(v: Any, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _finite(*xs: float | None) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def delta_cell(r: dict[str, Any], spec: str = "+.3f") -> str:
    """The difference of means beside its Welch interval."""
    if r["delta"] is None:
        return "—"
    if r["variant"] == r["baseline"]:
        return "(baseline)"
    if not _finite(r["delta"]):
        return f"{r['delta']:{spec}} (not finite)"
    if r["delta_lo"] is None:
        return f"{r['delta']:{spec}} (n<2: no interval)"
    return f"{r['delta']:{spec}} " + interval_cell(r["delta_lo"], r["delta_hi"])


def interval_cell(lo: float | None, hi: float | None) -> str:
    """``[lo, hi]``, with `` *`` when it excludes 0; a nan or inf end is never marked."""
    if lo is None:
        return "—"
    if not _finite(lo, hi):
        return f"[{lo:+.3f}, {hi:+.3f}] (not finite)"
    return f"[{lo:+.3f}, {hi:+.3f}]" + ("" if lo <= 0 <= hi else " *")


def paired_cell(r: dict[str, Any], spec: str = "+.3f") -> str:
    """The paired Δ: the mean of the per-seed differences beside its interval, with the number of pairs."""
    if r.get("paired_delta") is None:
        return "—"
    pairs = f"{r['n_pairs']} pair{'s' if r['n_pairs'] != 1 else ''}"
    if r["paired_lo"] is None:
        return f"{r['paired_delta']:{spec}} ({pairs}: no interval)"
    return f"{r['paired_delta']:{spec}} {interval_cell(r['paired_lo'], r['paired_hi'])} ({pairs})"


def markdown_table(rows: Sequence[dict[str, Any]], paper: bool = False, val: str = "val") -> str:
    mixed = len({r["setting"] for r in rows}) > 1
    head = (["setting"] if mixed else []) + [
        "variant", "form", "hidden", "FFN params", "total params", "MFLOP/token", "seeds",
        f"{val}/loss (mean ± std)", f"{val}/ppl", f"{val}/bpb", f"Δ log-ppl vs {rows[0]['baseline'] if rows else '?'} [95% CI]",
        "paired Δ [95% CI] (pairs)", "tokens/s"]
    if paper:
        head += ["Shazeer'20 log-ppl (T5 span corruption, 65k steps)", "Shazeer'20 Δ"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        std = f" ± {r['val_loss_std']:.3f}" if r["val_loss_std"] is not None else ""
        cells = ([str(r["setting"])] if mixed else []) + [
            r["variant"], r["form"], _fmt(r["hidden"], ","), _fmt(r["params_ffn"], ","), _fmt(r["params_total"], ","),
            _fmt(r["flops_per_token"] / 1e6 if r["flops_per_token"] else None, ".1f"), str(r["n"]),
            f"{r['val_loss_mean']:.3f}{std}", f"{r['val_ppl']:.2f}", _fmt(r["val_bpb"], ".3f"), delta_cell(r),
            paired_cell(r), _fmt(r["tokens_per_s"], ",.0f")]
        if paper:
            cells += [_fmt(r.get("paper"), ".3f"), _fmt(r.get("paper_delta"), "+.3f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_text(rows: Sequence[dict[str, Any]], settings: Sequence[dict[str, Any]], problems: Sequence[Run],
                warnings: Sequence[str], paper: bool, extra: dict[str, list[dict[str, Any]]] | None = None) -> str:
    parts = [markdown_table(rows, paper)] if rows else ["(no finished runs)"]
    for name, set_rows in (extra or {}).items():  # data.extra_val: one more table per held-out set
        parts.append(f"Held-out set `{name}` (data.extra_val.{name}; scored at the same points, not trained on):\n\n"
                     + markdown_table(set_rows, val=f"val/{name}"))
    parts.append("Losses are validation NLL in nats/token over the whole validation split; Δ log-ppl = mean "
                 "val/loss − baseline's, 95% Welch-t interval over seeds; paired Δ = mean of the per-seed differences "
                 "over the seeds both have, with its t interval (same data order within a seed); * = the interval "
                 "excludes 0.")
    if rows:
        parts.append("Common settings: " + _common_settings(settings))
    if warnings:
        parts.append("\n".join(f"warning: {w}" for w in warnings))
    if problems:
        parts.append("Runs not in the table:\n" + "\n".join(
            f"- {r.status}: {r.path} (ffn={r.config.get('ffn.name', '?')}, seed={r.seed}): {r.error}"
            for r in problems))
    return "\n\n".join(parts) + "\n"


def _common_settings(settings: Sequence[dict[str, Any]]) -> str:
    keys = ("model.name", "model.init", "data.name", "data.seq_len", "data.batch_size", "trainer.max_steps",
            "optim.name", "optim.lr", "optim.warmup", "optim.schedule")
    common = {k: settings[0].get(k) for k in keys if all(s.get(k) == settings[0].get(k) for s in settings)}
    return ", ".join(f"{k}={v}" for k, v in common.items() if v is not None)


PER_SEED_KEYS = ("val_losses", "seed_precision", "seed_denormals")  # in the JSON report only: one value per seed


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    cols = [k for k in rows[0] if k not in PER_SEED_KEYS] if rows else []
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (" ".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.items()})
