"""A ladder comparison as Markdown (a variant table per budget, the Δ table, the trend lines) and its plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.plots import save_figure
from ffn_zoo.analysis.compare.runs import Run
from ffn_zoo.analysis.compare.multiplier import multiplier_cell, multiplier_lines
from ffn_zoo.analysis.compare.tables import delta_cell, interval_cell, markdown_table, paired_cell
from ffn_zoo.analysis.compare.trend import CAVEAT, band, tokens_label


def _seeds_cell(d: dict[str, Any]) -> str:
    return str(d["n"]) if d["n"] == d["n_baseline"] else f"{d['n']} ({d['baseline']}: {d['n_baseline']})"


def _vs_ref_cell(d: dict[str, Any]) -> str:
    if d["vs_ref"] is None:
        return "—"
    if d["vs_ref_lo"] is None:
        return f"{d['vs_ref']:+.4f} (no interval: < 2 seeds)"
    if not d["vs_ref_paired"]:
        return f"{d['vs_ref']:+.4f} {interval_cell(d['vs_ref_lo'], d['vs_ref_hi'])} (Welch)"
    unpaired = d["vs_ref_unpaired_seeds"]
    dropped = f"; seed(s) {', '.join(map(str, unpaired))} unpaired" if unpaired else ""
    return f"{d['vs_ref']:+.4f} {interval_cell(d['vs_ref_lo'], d['vs_ref_hi'])} ({d['vs_ref_pairs']} pairs{dropped})"


def delta_markdown(deltas: Sequence[dict], trends: Sequence[dict]) -> str:
    mixed = len({d["ladder_setting"] for d in deltas}) > 1
    head = (["setting"] if mixed else []) + ["variant", "budget (tokens)", "steps", "seeds", "Δ of means [Welch 95%]",
                                             "paired Δ [95%] (pairs)", "trend at budget",
                                             f"worth × {deltas[0]['baseline'] if deltas else ''}'s tokens [95%]"]
    if mixed:
        head += ["paired Δ − setting 1's [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for d in deltas:
        t = next((t for t in trends if t["variant"] == d["variant"] and t["ladder_setting"] == d["ladder_setting"]),
                 None)
        fitted = t["intercept"] + t["slope_per_decade"] * math.log10(d["budget_tokens"]) if t else None
        cells = ([f"{d['ladder_setting']}: {d['setting_label']}"] if mixed else []) + [
            d["variant"], f"{tokens_label(d['budget_tokens'])} ({d['budget_tokens']:,})", str(d["steps"]),
            _seeds_cell(d), delta_cell(d, "+.4f"), paired_cell(d, "+.4f"),
            "—" if fitted is None else f"{fitted:+.4f}", multiplier_cell(d)]
        if mixed:
            cells.append(_vs_ref_cell(d))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def trend_lines(trends: Sequence[dict]) -> list[str]:
    out = []
    mixed = len({t["ladder_setting"] for t in trends}) > 1
    for t in trends:
        slope = f"slope {t['slope_per_decade']:+.4f} nats per 10× tokens"
        if t["slope_lo"] is not None:
            slope += f" [95% {t['slope_lo']:+.4f}, {t['slope_hi']:+.4f}]"
        where = f"setting {t['ladder_setting']} ({t['setting_label']}): " if mixed else ""
        out.append(f"- {where}{t['variant']} − {t['baseline']}: Δ ≈ {t['intercept']:+.4f} {t['slope_per_decade']:+.4f}·"
                   f"log10(tokens), {slope}; {t['budgets']} budgets, each of {t['seeds']} seed(s) fitted on its own; "
                   f"{t['verdict']}{_dropped(t)}. "
                   + CAVEAT.format(lo=tokens_label(t["tokens_lo"]), hi=tokens_label(t["tokens_hi"])))
    return out


def _dropped(t: dict[str, Any]) -> str:
    if not t.get("seeds_dropped"):
        return ""
    return f" (seed(s) {', '.join(map(str, t['seeds_dropped']))} dropped: not in both ladders at every budget)"


def set_sections(table: Sequence[dict], deltas: Sequence[dict], trends: Sequence[dict],
                 val_set: str | None = None) -> list[str]:
    """The Markdown of one held-out set: a variant table per (setting, budget), the Δ table, the trend lines."""
    parts = []
    prefix = f"{val_set}: " if val_set else ""
    val = f"val/{val_set}" if val_set else "val"
    mixed = len({r["ladder_setting"] for r in table}) > 1
    for si in sorted({r["ladder_setting"] for r in table}):
        for tokens in sorted({r["budget_tokens"] for r in table if r["ladder_setting"] == si}):
            rows = [r for r in table if r["ladder_setting"] == si and r["budget_tokens"] == tokens]
            setting = f"ladder setting {si} ({rows[0]['setting_label']}), " if mixed else ""
            parts.append(f"## {prefix}{setting}budget {tokens_label(tokens)} tokens ({tokens:,}; {rows[0]['steps']} "
                         f"steps)\n\n" + markdown_table([{**r, "setting": si} for r in rows], val=val))
    if deltas:
        parts.append(f"## {prefix}Δ against the baseline by budget\n\n" + delta_markdown(deltas, trends))
    if trends:
        parts.append(f"## {prefix}Trend of Δ against log10(budget)\n\n" + "\n".join(trend_lines(trends)))
    if deltas:
        parts.append(f"## {prefix}Effective compute multiplier\n\n" + "\n".join(multiplier_lines(list(deltas))))
    return parts


def report_text(sets: dict[str | None, tuple[list, list, list]], warnings: Sequence[str], problems: Sequence[Run],
                axis_text: dict[str | None, str] | None = None) -> str:
    """``sets``: {None (the validation split) or an extra set's name: (budget rows, Δ rows, trend rows)};
    ``axis_text``: the same keys -> the section against the settings' axis (axis.py)."""
    parts: list[str] = []
    for name, (t, d, tr) in sets.items():
        if name:
            parts.append(f"# Held-out set `{name}` (data.extra_val.{name}: scored at the same points, not trained on)")
        parts += set_sections(t, d, tr, name)
        if (axis_text or {}).get(name):
            parts.append(axis_text[name])
    table = sets[None][0]
    parts.append("Each budget is a WSD cooldown branched from a constant-lr trunk, equal to a plain WSD run of that "
                 "length (ffn_zoo/training/ladder/run.py). Δ of means = mean val/loss − baseline's (nats/token), Welch t "
                 "interval over all seeds; paired Δ = mean of the per-seed differences over the seeds both have, its t "
                 "interval and the number of pairs; * = excludes 0. Worth × tokens = the effective compute "
                 "multiplier: the tokens the baseline needs to reach the variant's loss, read off the baseline's own "
                 "ladder (straight in log tokens between budgets; beyond the ladder where that would extrapolate), "
                 "over the budget; geometric mean over seeds, t interval on the logs. The trend is fitted to "
                 "each seed's paired Δ (a seed's budgets share a trunk, so they are not independent points) and "
                 "averaged over seeds; its crossing interval is where the 95% band of the line holds 0 (Fieller).")
    if len({r["ladder_setting"] for r in table}) > 1:
        parts.append("Settings are numbered in the order of the folders given; \"paired Δ − setting 1's\" is how "
                     "much a setting moves the gap at that budget, paired by seed (a seed fixes the data order in "
                     "every setting), Welch where fewer than 2 seeds are shared.")
    if warnings:
        parts.append("\n".join(f"warning: {w}" for w in warnings))
    if problems:
        parts.append("Runs not in the tables:\n" + "\n".join(f"- {r.status}: {r.path}: {r.error}" for r in problems))
    return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------- the plot


def plot_ladder(deltas: Sequence[dict], trends: Sequence[dict], path: Path, val: str = "validation") -> bool:
    """Δ against the budget on a log axis: points with their 95% interval (paired, else Welch), the fitted trend
    dashed with its band over the fitted range only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys((d["ladder_setting"], d["variant"]) for d in deltas))
    if not keys:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (si, variant) in enumerate(keys):
        ds = [d for d in deltas if (d["ladder_setting"], d["variant"]) == (si, variant)]
        x = np.array([d["budget_tokens"] for d in ds], dtype=float)
        paired = [d["paired_lo"] is not None for d in ds]  # each point with its own interval's mean
        y = np.array([d["paired_delta"] if p else d["delta"] for d, p in zip(ds, paired)], dtype=float)
        lo = np.array([d["paired_lo"] if p else d["delta_lo"] for d, p in zip(ds, paired)], dtype=float)
        hi = np.array([d["paired_hi"] if p else d["delta_hi"] for d, p in zip(ds, paired)], dtype=float)
        label = variant if len({k[0] for k in keys}) == 1 else f"{variant} ({si}: {ds[0]['setting_label']})"
        (line,) = ax.plot(x, y, "o-", color=f"C{i % 10}", label=f"{label} − {ds[0]['baseline']}")
        if np.isfinite(lo).all():
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15)
        t = next((t for t in trends if (t["ladder_setting"], t["variant"]) == (si, variant)), None)
        if t is not None:
            xs = np.linspace(math.log10(t["tokens_lo"]), math.log10(t["tokens_hi"]), 50)
            ax.plot(10**xs, t["intercept"] + t["slope_per_decade"] * xs, "--", color=line.get_color(),
                    label=f"trend {t['slope_per_decade']:+.3f}/decade")
            b = band(t, xs)
            if b is not None:
                ax.fill_between(10**xs, b[1], b[2], color=line.get_color(), alpha=0.08, hatch="//")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("budget (training tokens, log scale)")
    ax.set_ylabel(f"Δ {val} loss vs {deltas[0]['baseline']} (nats/token; < 0 = better)")
    ax.set_title("Δ by budget (paired mean, band: its 95% interval); dashed: trend fitted per seed, with its 95% "
                 "band.\n"
                 "The trend holds over the fitted budgets only.", fontsize=9)
    save_figure(fig, ax, path)
    return True

