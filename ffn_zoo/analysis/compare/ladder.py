"""Compare budget ladders (``ffn_zoo/training/ladder.py``): per budget the variant table with compare's Welch and
paired intervals, Δ against the baseline as a function of the budget, and a trend of Δ against log10(tokens)
with where it crosses 0.

The trend is fitted per seed. A seed's rungs share one trunk, so its Δs at different budgets are correlated and
are not independent points of one regression; each seed's paired Δ(B) = loss(variant) − loss(baseline) is fitted
by least squares on x = log10(tokens), and the seeds, independent of each other, give the mean line with a t
interval (df = seeds − 1). The crossing's interval is Fieller's: the budgets where the line's 95% band holds 0.
A trend fitted over a range of budgets is no promise outside it; the output says so.

Every extra held-out set (data.extra_val) gets the same tables and trend. Ladders of different recipes are never
pooled: each setting is named by the keys in which they differ, and its Δ at each budget is set against setting 1's
(the first folder given), paired by seed, which is how much that recipe moves the gap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.plots import save_figure
from ffn_zoo.analysis.compare.runs import Run, experiment_key, group_runs
from ffn_zoo.analysis.compare.stats import paired_interval, summarize, welch_interval
from ffn_zoo.analysis.compare.tables import interval_cell, markdown_table, write_csv

CAVEAT = "A trend fitted over {lo}–{hi} tokens is no promise outside that range."


def has_ladders(runs: Sequence[Run]) -> bool:
    return any(r.metrics.get("ladder_role") == "branch" for r in runs)


def tokens_label(t: float) -> str:
    t = float(f"{t:.3g}")  # 999,999.99 is 1M, not 1e+03k
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if t >= size:
            return f"{t / size:.3g}{unit}"
    return f"{t:.3g}"


# ---------------------------------------------------------------------------------------------- the trend


def fit_trend(per_seed: dict[Any, dict[int, float]], level: float = 0.95) -> dict[str, Any] | None:
    """Δ = a + b·log10(tokens), fitted per seed; the mean line, its slope interval and the zero crossing.

    ``per_seed``: {seed: {tokens: paired Δ}}. Seeds must cover the same ≥ 2 budgets (the caller ensures it).
    """
    from scipy import stats

    seeds = sorted(per_seed, key=str)
    budgets = sorted(per_seed[seeds[0]]) if seeds else []
    if len(budgets) < 2:
        return None
    x = np.log10(np.array(budgets, dtype=float))
    coef = np.array([np.polyfit(x, [per_seed[s][b] for b in budgets], 1)[::-1] for s in seeds])  # (seeds, [a, b])
    a, b = coef.mean(0)
    n = len(seeds)
    out: dict[str, Any] = {
        "seeds": n, "budgets": len(budgets), "tokens_lo": budgets[0], "tokens_hi": budgets[-1],
        "intercept": float(a), "slope_per_decade": float(b), "slope_lo": None, "slope_hi": None,
        "crossing_tokens": float(10 ** (-a / b)) if b != 0 else None, "crossing_lo": None, "crossing_hi": None,
        "cov": None, "t": None,
    }
    if n >= 2:
        cov = np.cov(coef.T, ddof=1) / n  # covariance of the mean (a, b)
        t = float(stats.t.ppf(0.5 + level / 2, n - 1))
        half = t * math.sqrt(cov[1, 1])
        out.update(slope_lo=float(b - half), slope_hi=float(b + half), cov=cov.tolist(), t=t)
        lo, hi = fieller(a, b, cov, t)
        out.update(crossing_lo=None if lo is None else float(10**lo), crossing_hi=None if hi is None else float(10**hi))
    out["verdict"] = verdict(out, x[0], x[-1])
    return out


def band(trend: dict[str, Any], x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The mean line at ``x`` (log10 tokens) and its pointwise interval; None without one."""
    line = trend["intercept"] + trend["slope_per_decade"] * x
    if trend["cov"] is None:
        return None
    (vaa, vab), (_, vbb) = trend["cov"]
    half = trend["t"] * np.sqrt(np.maximum(vaa + 2 * x * vab + x * x * vbb, 0))
    return line, line - half, line + half


def fieller(a: float, b: float, cov: np.ndarray, t: float) -> tuple[float | None, float | None]:
    """The x where |a + b·x| <= t·se(a + b·x): a bounded interval when the slope is resolved from 0, else
    (None, None) (the set is unbounded: the crossing is not located)."""
    qa = b * b - t * t * cov[1][1]  # (a + bx)² − t²·var(a + bx) <= 0, a quadratic in x
    qb = 2 * (a * b - t * t * cov[0][1])
    qc = a * a - t * t * cov[0][0]
    disc = qb * qb - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return None, None
    r = math.sqrt(disc)
    return (-qb - r) / (2 * qa), (-qb + r) / (2 * qa)


def verdict(trend: dict[str, Any], x_lo: float, x_hi: float) -> str:
    """One sentence: where the trend crosses 0, or that it does not within the fitted range."""
    span = f"{tokens_label(10 ** x_lo)}–{tokens_label(10 ** x_hi)} tokens"
    cross = trend["crossing_tokens"]
    inside = cross is not None and 10**x_lo <= cross <= 10**x_hi
    if trend["cov"] is None:
        note = f" ({trend['seeds']} seed: no interval)"
        return (f"crosses 0 at {tokens_label(cross)} tokens{note}" if inside
                else f"no crossing within the fitted range ({span}){note}")
    if inside:
        lo, hi = trend["crossing_lo"], trend["crossing_hi"]
        where = (f"95% interval [{tokens_label(lo)}, {tokens_label(hi)}]" if lo is not None else
                 "95% interval unbounded (the slope's interval covers 0)")
        return f"crosses 0 at {tokens_label(cross)} tokens, {where}"
    # the band's lower edge (line − t·se, se the root of a convex quadratic) is concave in x and its upper edge
    # convex, so over [x_lo, x_hi] each is beyond 0 throughout exactly when it is at both ends
    _, lo, hi = band(trend, np.array([x_lo, x_hi]))
    if (lo > 0).all():
        sign = ": Δ > 0 throughout at 95% (the variant is worse)"
    elif (hi < 0).all():
        sign = ": Δ < 0 throughout at 95% (the variant is better)"
    else:
        sign = ": the band covers 0 there, so the sign is not resolved"
    beyond = f"; the line would cross at {tokens_label(cross)} tokens, outside it" if cross is not None else ""
    return f"no crossing within the fitted range ({span}){sign}{beyond}"


# ---------------------------------------------------------------------------------------------- tables


def _setting_key(run: Run) -> tuple:
    """What a ladder setting is: the config minus the seed, the FFN and the budget (trainer.max_steps)."""
    return tuple((k, v) for k, v in experiment_key(run.config) if not k.startswith("ffn.") and k != "trainer.max_steps")


def setting_labels(settings: Sequence[tuple]) -> list[str]:
    """Each setting named by the keys in which the settings differ (``model.init=fan_in, optim.name=adafactor``);
    one setting gets an empty label. A key null in some setting (``optim.betas`` beside Adafactor) is another
    component's option, not a choice: it is left out of the labels unless nothing else tells them apart."""
    if len(settings) < 2:
        return [""] * len(settings)
    dicts = [dict(s) for s in settings]
    differing = sorted({k for d in dicts for k in d if any(e.get(k) != d.get(k) for e in dicts)})
    chosen = [k for k in differing if all(d.get(k) is not None for d in dicts)]
    keys = chosen if len({tuple(d.get(k) for k in chosen) for d in dicts}) == len(dicts) else differing
    return [", ".join(f"{k}={d.get(k)}" for k in keys) for d in dicts]


def _loss_key(val_set: str | None) -> str:
    return f"val_{val_set}_loss" if val_set else "val_loss"


def ladder_rows(branches: Sequence[Run], baseline: str,
                val_set: str | None = None) -> tuple[list[dict], list[dict], list[dict], list[str]]:
    """(per-budget variant rows, Δ-vs-budget rows, trend rows, warnings) over every ladder setting, on the main
    validation split or on the extra held-out set ``val_set`` (data.extra_val).

    Settings are numbered in the order their runs come (the first folder given is setting 1). With several, each
    Δ row also carries its change against setting 1's Δ at that budget (``vs_ref``: paired over the seeds both
    have, as a seed fixes the data order in every setting; Welch otherwise).
    """
    key = _loss_key(val_set)
    branches = [r for r in branches if key in r.metrics]
    settings: list[tuple] = []
    for r in branches:
        if _setting_key(r) not in settings:
            settings.append(_setting_key(r))
    labels = setting_labels(settings)
    table, deltas, trends, warnings = [], [], [], []
    if len(settings) > 1:
        warnings.append(f"{len(settings)} different ladder settings; each is compared separately, never averaged")
    for si, skey in enumerate(settings):
        runs = [r for r in branches if _setting_key(r) == skey]
        budgets = sorted({int(r.metrics["ladder_budget_tokens"]) for r in runs})
        by_variant: dict[str, dict[int, dict[Any, float]]] = {}  # variant -> budget -> seed -> loss
        for tokens in budgets:
            groups, _, warns = group_runs([r for r in runs if r.metrics["ladder_budget_tokens"] == tokens])
            if val_set is None:
                warnings += [f"budget {tokens_label(tokens)}: {w}" for w in warns]
            rows = summarize(groups, baseline, val_set=val_set)
            table += [{"ladder_setting": si + 1, "setting_label": labels[si], "budget_tokens": tokens, **row}
                      for row in rows]
            for g in groups:
                by_variant.setdefault(g.label, {})[tokens] = {r.seed: r.metrics[key] for r in g.runs}
            for row in rows:
                if row["delta"] is None or row["variant"] == baseline:
                    continue
                losses, base = by_variant[row["variant"]][tokens], by_variant[baseline][tokens]
                deltas.append({
                    "ladder_setting": si + 1, "setting_label": labels[si], "variant": row["variant"],
                    "baseline": baseline, "budget_tokens": tokens, "steps": row["steps"], "n": row["n"],
                    "delta": row["delta"], "delta_lo": row["delta_lo"], "delta_hi": row["delta_hi"],
                    "paired_lo": row["paired_lo"], "paired_hi": row["paired_hi"],
                    "per_seed": {s: losses[s] - base[s] for s in losses if s in base}})
        base = by_variant.get(baseline)
        if base is None:
            warnings.append(f"ladder setting {si + 1}: no finished {baseline!r} branches, so no Δ (choose --baseline)")
            continue
        for variant, losses in by_variant.items():
            if variant == baseline:
                continue
            common = [t for t in budgets if t in losses and t in base]
            seeds = set.intersection(*(set(losses[t]) & set(base[t]) for t in common)) if common else set()
            per_seed = {s: {t: losses[t][s] - base[t][s] for t in common} for s in seeds}
            trend = fit_trend(per_seed) if seeds else None
            if trend is None:
                warnings.append(f"{variant}: no trend (needs >= 2 budgets with a seed that both it and {baseline} have)")
                continue
            trends.append({"ladder_setting": si + 1, "setting_label": labels[si], "variant": variant,
                           "baseline": baseline, "seeds_used": sorted(seeds, key=str), **trend})
    for d in deltas:  # the change of each setting's Δ against setting 1's at the same budget
        ref = next((r for r in deltas if r["ladder_setting"] == 1 and r["variant"] == d["variant"]
                    and r["budget_tokens"] == d["budget_tokens"]), None)
        d.update(vs_ref=None, vs_ref_lo=None, vs_ref_hi=None, vs_ref_paired=None)
        if d["ladder_setting"] == 1 or ref is None:
            continue
        d["vs_ref"] = d["delta"] - ref["delta"]
        paired = paired_interval(d["per_seed"], ref["per_seed"])
        ci = paired or welch_interval(list(d["per_seed"].values()), list(ref["per_seed"].values()))
        if ci is not None:
            d.update(vs_ref_lo=float(ci[1]), vs_ref_hi=float(ci[2]), vs_ref_paired=paired is not None)
    return table, deltas, trends, warnings


def delta_markdown(deltas: Sequence[dict], trends: Sequence[dict]) -> str:
    mixed = len({d["ladder_setting"] for d in deltas}) > 1
    head = (["setting"] if mixed else []) + ["variant", "budget (tokens)", "steps", "seeds", "Δ val/loss",
                                             "Welch 95% CI", "paired 95% CI", "trend at budget"]
    if mixed:
        head += ["Δ − setting 1's Δ [95% CI]"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for d in deltas:
        t = next((t for t in trends if t["variant"] == d["variant"] and t["ladder_setting"] == d["ladder_setting"]),
                 None)
        fitted = t["intercept"] + t["slope_per_decade"] * math.log10(d["budget_tokens"]) if t else None
        cells = ([f"{d['ladder_setting']}: {d['setting_label']}"] if mixed else []) + [
            d["variant"], f"{tokens_label(d['budget_tokens'])} ({d['budget_tokens']:,})", str(d["steps"]), str(d["n"]),
            f"{d['delta']:+.4f}", interval_cell(d["delta_lo"], d["delta_hi"]),
            interval_cell(d["paired_lo"], d["paired_hi"]),
            "—" if fitted is None else f"{fitted:+.4f}"]
        if mixed:
            if d["vs_ref"] is None:
                cells.append("—")
            elif d["vs_ref_lo"] is None:
                cells.append(f"{d['vs_ref']:+.4f} (no interval: < 2 seeds)")
            else:
                cells.append(f"{d['vs_ref']:+.4f} " + interval_cell(d["vs_ref_lo"], d["vs_ref_hi"])
                             + ("" if d["vs_ref_paired"] else " (Welch)"))
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
                   f"{t['verdict']}. " + CAVEAT.format(lo=tokens_label(t["tokens_lo"]), hi=tokens_label(t["tokens_hi"])))
    return out


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
    return parts


def report_text(table: Sequence[dict], deltas: Sequence[dict], trends: Sequence[dict], warnings: Sequence[str],
                problems: Sequence[Run], extra: dict[str, tuple[list, list, list]] | None = None) -> str:
    parts = set_sections(table, deltas, trends)
    for name, (t, d, tr) in (extra or {}).items():
        parts.append(f"# Held-out set `{name}` (data.extra_val.{name}: scored at the same points, not trained on)")
        parts += set_sections(t, d, tr, name)
    parts.append("Each budget is a WSD cooldown branched from a constant-lr trunk, equal to a plain WSD run of that "
                 "length (ffn_zoo/training/ladder.py). Δ = mean val/loss − baseline's (nats/token); Welch = t interval "
                 "over seeds; paired = t interval of the per-seed differences; * = excludes 0. The trend is fitted to "
                 "each seed's paired Δ (a seed's budgets share a trunk, so they are not independent points) and "
                 "averaged over seeds; its crossing interval is where the 95% band of the line holds 0 (Fieller).")
    if len({r["ladder_setting"] for r in table}) > 1:
        parts.append("Settings are numbered in the order of the folders given; \"Δ − setting 1's Δ\" is how much a "
                     "setting moves the gap at that budget, paired by seed (a seed fixes the data order in every "
                     "setting), Welch where fewer than 2 seeds are shared.")
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
        y = np.array([d["delta"] for d in ds])
        lo = np.array([d["paired_lo"] if d["paired_lo"] is not None else d["delta_lo"] for d in ds], dtype=float)
        hi = np.array([d["paired_hi"] if d["paired_hi"] is not None else d["delta_hi"] for d in ds], dtype=float)
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
    ax.set_title("Δ by budget (band: 95% paired interval); dashed: trend fitted per seed, with its 95% band.\n"
                 "The trend holds over the fitted budgets only.", fontsize=9)
    save_figure(fig, ax, path)
    return True


# ---------------------------------------------------------------------------------------------- driver


def compare_ladders(runs: Sequence[Run], out: Path, baseline: str) -> dict[str, Any]:
    """Write ladder.md, ladder_budgets.csv, ladder_delta.csv, ladder_trend.csv, ladder.json and ladder_delta.png,
    and the same three CSVs and plot per extra held-out set (``..._<name>.csv``, ``ladder_delta_<name>.png``)."""
    branches = [r for r in runs if r.status == "ok" and r.metrics.get("ladder_role") == "branch"]
    problems = [r for r in runs if r.status != "ok"]
    others = [r for r in runs if r.status == "ok" and r.metrics.get("ladder_role") is None]
    table, deltas, trends, warnings = ladder_rows(branches, baseline)
    extra_names = sorted({n for r in branches for n in r.metrics.get("extra_val") or []})
    extra = {n: ladder_rows(branches, baseline, val_set=n)[:3] for n in extra_names}
    if others:
        warnings.append(f"{len(others)} run(s) outside any ladder left out (compare them on their own): "
                        + ", ".join(str(r.path) for r in others))
    out.mkdir(parents=True, exist_ok=True)
    text = report_text(table, deltas, trends, warnings, problems, extra)
    (out / "ladder.md").write_text(text)
    written = ["ladder.md"]
    pngs = []
    for name, (t, d, tr) in {None: (table, deltas, trends), **extra}.items():
        suffix = f"_{name}" if name else ""
        write_csv(t, out / f"ladder_budgets{suffix}.csv")
        write_csv([{k: v for k, v in r.items() if k != "per_seed"} for r in d], out / f"ladder_delta{suffix}.csv")
        write_csv([{k: v for k, v in r.items() if k not in ("cov", "t")} for r in tr], out / f"ladder_trend{suffix}.csv")
        written += [f"ladder_budgets{suffix}.csv", f"ladder_delta{suffix}.csv", f"ladder_trend{suffix}.csv"]
        if plot_ladder(d, tr, out / f"ladder_delta{suffix}.png", val=f"val/{name}" if name else "validation"):
            pngs.append(out / f"ladder_delta{suffix}.png")
    report = {"budget_rows": table, "delta_rows": deltas, "trends": trends,
              "extra_val": {n: {"budget_rows": t, "delta_rows": d, "trends": tr} for n, (t, d, tr) in extra.items()},
              "warnings": warnings,
              "problems": [{"path": str(r.path), "status": r.status, "error": r.error} for r in problems],
              "caveat": CAVEAT.format(lo="the smallest", hi="the largest budget")}
    (out / "ladder.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(text, end="")
    print(f"wrote {out}/" + ", ".join(written + ["ladder.json"] + [p.name for p in pngs]))
    return report
