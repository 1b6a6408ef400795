"""Compare budget ladders (``ffn_zoo/training/ladder/run.py``): per budget the variant table with compare's Welch and
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
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.axis import (axis_markdown, axis_name, axis_rows, choose_axis, other_differences,
                                           plot_axis)
from ffn_zoo.analysis.compare.ladder_text import plot_ladder, report_text
from ffn_zoo.analysis.compare.runs import Run, experiment_key, group_runs
from ffn_zoo.analysis.compare.multiplier import effective_multiplier
from ffn_zoo.analysis.compare.fit import fit_ladders, fit_markdown
from ffn_zoo.analysis.compare.stats import finite_by_seed, paired_fields, row_warnings, summarize, welch_interval
from ffn_zoo.analysis.compare.tables import write_csv
from ffn_zoo.analysis.compare.trend import CAVEAT, fit_trend, tokens_label

__all__ = ["compare_ladders", "fit_trend", "has_ladders", "ladder_rows", "setting_labels", "tokens_label"]


def has_ladders(runs: Sequence[Run]) -> bool:
    return any(r.metrics.get("ladder_role") == "branch" for r in runs)


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


def ladder_settings(branches: Sequence[Run]) -> list[tuple]:
    """The distinct ladder settings, in the order their runs come (the first folder given is setting 1)."""
    return list(dict.fromkeys(_setting_key(r) for r in branches))


def ladder_rows(branches: Sequence[Run], baseline: str, val_set: str | None = None,
                axis: str | None = None) -> tuple[list[dict], list[dict], list[dict], list[str]]:
    """(per-budget variant rows, Δ-vs-budget rows, trend rows, warnings) over every ladder setting, on the main
    validation split or on the extra held-out set ``val_set`` (data.extra_val). With an ``axis`` (a config key,
    ``axis.py``), Δ and trend rows carry the setting's value of it (``axis_value``).

    Settings are numbered in the order their runs come (the first folder given is setting 1). With several, each
    Δ row also carries its change against setting 1's Δ at that budget (``vs_ref``: paired over the seeds both
    have, as a seed fixes the data order in every setting; Welch otherwise). A non-finite loss is left out of
    every number and named; seeds only one side has are dropped from the paired Δ, the trend and ``vs_ref``, and
    named.
    """
    key = _loss_key(val_set)
    where = f"{val_set}: " if val_set else ""
    branches = [r for r in branches if key in r.metrics]
    settings = ladder_settings(branches)
    labels = setting_labels(settings)
    table, deltas, trends, warnings = [], [], [], []
    if len(settings) > 1 and val_set is None:
        warnings.append(f"{len(settings)} different ladder settings; each is compared separately, never averaged")
    for si, skey in enumerate(settings):
        runs = [r for r in branches if _setting_key(r) == skey]
        budgets = sorted({int(r.metrics["ladder_budget_tokens"]) for r in runs})
        in_setting = f"setting {si + 1}, " if len(settings) > 1 else ""
        on_axis = {"axis_value": dict(skey).get(axis)} if axis else {}
        by_variant: dict[str, dict[int, dict[Any, float]]] = {}  # variant -> budget -> seed -> finite loss
        run_warns: dict[str, list[str]] = {}  # a grouping warning -> the budgets it holds at: said once
        for tokens in budgets:
            at = f"{where}{in_setting}budget {tokens_label(tokens)}: "
            groups, _, warns = group_runs([r for r in runs if r.metrics["ladder_budget_tokens"] == tokens])
            for w in warns if val_set is None else ():
                run_warns.setdefault(w, []).append(tokens_label(tokens))
            rows = summarize(groups, baseline, val_set=val_set)
            warnings += row_warnings(rows, at)
            table += [{"ladder_setting": si + 1, "setting_label": labels[si], "budget_tokens": tokens, **row}
                      for row in rows]
            for g in groups:
                by_variant.setdefault(g.label, {})[tokens] = finite_by_seed(g, key)[0]
            for row in rows:
                if row["delta"] is None or row["variant"] == baseline:
                    continue
                losses, base = by_variant[row["variant"]][tokens], by_variant[baseline][tokens]
                deltas.append({
                    "ladder_setting": si + 1, "setting_label": labels[si], **on_axis, "variant": row["variant"],
                    "baseline": baseline, "budget_tokens": tokens, "steps": row["steps"], "n": row["n"],
                    "n_baseline": len(base), "delta": row["delta"], "delta_lo": row["delta_lo"],
                    "delta_hi": row["delta_hi"], **{k: row[k] for k in PAIRED},
                    "per_seed": {s: losses[s] - base[s] for s in losses if s in base}})
        warnings += [f"{where}{in_setting}budget{'s' * (len(held) > 1)} {', '.join(held)}: {w}"
                     for w, held in run_warns.items()]
        base = by_variant.get(baseline)
        for d in deltas:  # read off the baseline's whole ladder, so after every budget is in
            if d["ladder_setting"] == si + 1:
                d.update(effective_multiplier(by_variant[d["variant"]][d["budget_tokens"]], base, d["budget_tokens"]))
        if base is None:
            warnings.append(f"{where}ladder setting {si + 1}: no finished {baseline!r} branches, so no Δ "
                            f"(choose --baseline)")
            continue
        for variant, losses in by_variant.items():
            if variant != baseline:
                trends += [{**on_axis, **t} for t in _trend_row(variant, losses, base, baseline, budgets, si,
                                                                 labels[si], f"{where}{in_setting}", warnings)]
    for d in deltas:  # the change of each setting's Δ against setting 1's at the same budget
        ref = next((r for r in deltas if r["ladder_setting"] == 1 and r["variant"] == d["variant"]
                    and r["budget_tokens"] == d["budget_tokens"]), None)
        d.update(vs_ref=None, vs_ref_lo=None, vs_ref_hi=None, vs_ref_paired=None, vs_ref_pairs=None,
                 vs_ref_unpaired_seeds=[])
        if d["ladder_setting"] == 1 or ref is None or not d["per_seed"] or not ref["per_seed"]:
            continue
        paired = paired_fields(d["per_seed"], ref["per_seed"])
        if paired["paired_lo"] is not None:
            d.update(vs_ref=paired["paired_delta"], vs_ref_lo=paired["paired_lo"], vs_ref_hi=paired["paired_hi"],
                     vs_ref_paired=True, vs_ref_pairs=paired["n_pairs"], vs_ref_unpaired_seeds=paired["unpaired_seeds"])
            continue
        a, b = list(d["per_seed"].values()), list(ref["per_seed"].values())  # < 2 shared seeds: Welch, all seeds
        ci = welch_interval(a, b)
        d["vs_ref"] = float(np.mean(a) - np.mean(b))
        if ci is not None:
            d.update(vs_ref_lo=float(ci[1]), vs_ref_hi=float(ci[2]), vs_ref_paired=False)
    return table, deltas, trends, warnings


def ffn_configs(branches: Sequence[Run]) -> dict[str, dict[str, Any]]:
    """{variant: its ffn.* config} for the report (reports.py reads a ladder back with it); a name that two
    configs share is left out, as its rows are told apart by their labels."""
    seen: dict[str, dict[str, Any]] = {}
    twins = set()
    for r in branches:
        name, ffn = str(r.config.get("ffn.name")), {k: v for k, v in r.config.items() if k.startswith("ffn.")}
        if seen.setdefault(name, ffn) != ffn:
            twins.add(name)
    return {k: v for k, v in seen.items() if k not in twins}


PAIRED = ("paired_delta", "paired_lo", "paired_hi", "n_pairs", "unpaired_seeds")


def _trend_row(variant: str, losses: dict[int, dict], base: dict[int, dict], baseline: str, budgets: list[int],
               si: int, label: str, where: str, warnings: list[str]) -> list[dict]:
    """The trend of one variant's paired Δ over the seeds that both ladders have at every shared budget; the
    other seeds are named, as they are dropped."""
    common = [t for t in budgets if t in losses and t in base]
    seeds = set.intersection(*(set(losses[t]) & set(base[t]) for t in common)) if common else set()
    seen = {s for t in common for s in [*losses[t], *base[t]]}
    dropped = sorted(seen - seeds, key=str)
    per_seed = {s: {t: losses[t][s] - base[t][s] for t in common} for s in seeds}
    trend = fit_trend(per_seed) if seeds else None
    if trend is None:
        warnings.append(f"{where}{variant}: no trend (needs >= 2 budgets with a seed that both it and {baseline} "
                        f"have at each)")
        return []
    if dropped:
        warnings.append(f"{where}{variant} − {baseline} trend: seed(s) {', '.join(map(str, dropped))} dropped "
                        f"(not in both ladders at every budget); fitted on {len(seeds)} seed(s)")
    return [{"ladder_setting": si + 1, "setting_label": label, "variant": variant, "baseline": baseline,
             "seeds_used": sorted(seeds, key=str), "seeds_dropped": dropped, **trend}]


# ---------------------------------------------------------------------------------------------- driver


def compare_ladders(runs: Sequence[Run], out: Path, baseline: str, axis: str | None = None,
                    notes: Sequence[str] = (), fit: bool = False) -> dict[str, Any]:
    """Write ladder.md, ladder_budgets.csv, ladder_delta.csv, ladder_trend.csv, ladder.json and ladder_delta.png,
    and the same three CSVs and plot per extra held-out set (``..._<name>.csv``, ``ladder_delta_<name>.png``).
    Ladders of several settings along a numeric key (``axis``, or chosen: ``axis.py``) also get
    ``crossing_vs_<key>.csv``, ``delta_vs_<key>.csv`` and ``crossing_vs_<key>.png`` (per extra set too); with ``fit``,
    ``ladder_fit.csv`` and ``ladder_fit_budgets.csv`` (per extra set too) and a section of ladder.md (fit.py)."""
    branches = [r for r in runs if r.status == "ok" and r.metrics.get("ladder_role") == "branch"]
    problems = [r for r in runs if r.status != "ok"]
    others = [r for r in runs if r.status == "ok" and r.metrics.get("ladder_role") is None]
    settings = [dict(s) for s in ladder_settings(branches)]
    axis = choose_axis(settings, axis)
    table, deltas, trends, warnings = ladder_rows(branches, baseline, axis=axis)
    if axis and (also := other_differences(settings, axis)):
        warnings.insert(0, f"set against {axis}, the ladders also differ in " + "; ".join(
            f"{k} ({', '.join(str(s.get(k)) for s in settings)})" for k in also)
            + ": the axis carries these too, so a change along it is not the axis' alone")
    warnings = [*notes, *warnings]  # the reader's own lines first (reports.py)
    extra_names = sorted({n for r in branches for n in r.metrics.get("extra_val") or []})
    sets: dict[str | None, tuple[list, list, list]] = {None: (table, deltas, trends)}
    for n in extra_names:
        *sets[n], warns = ladder_rows(branches, baseline, val_set=n, axis=axis)
        warnings += [w for w in warns if w.startswith(f"{n}: ")]  # its own Δ faults; the runs' are said once
    on_axis = {n: axis_rows(t, d, tr, axis) for n, (t, d, tr) in sets.items()} if axis else {}  # may refuse
    if others:
        warnings.append(f"{len(others)} run(s) outside any ladder left out (compare them on their own): "
                        + ", ".join(str(r.path) for r in others))
    out.mkdir(parents=True, exist_ok=True)
    axis_text = {n: f"## {f'{n}: ' if n else ''}Crossing and Δ against {axis}\n\n" + axis_markdown(rows, axis)
                 for n, (rows, _) in on_axis.items() if rows}
    fits = {n: fit_ladders(t, d, baseline, f"{n}: " if n else "") for n, (t, d, _) in sets.items()} if fit else {}
    sections = {n: "\n".join(x for x in (axis_text.get(n), fit_markdown(*fits[n], n) if n in fits else "") if x)
                for n in sets}
    text = report_text(sets, warnings, problems, sections)
    (out / "ladder.md").write_text(text)
    written, pngs = ["ladder.md"], []
    for name, (t, d, tr) in sets.items():
        suffix = f"_{name}" if name else ""
        write_csv(t, out / f"ladder_budgets{suffix}.csv")
        write_csv([{k: v for k, v in r.items() if k != "per_seed"} for r in d], out / f"ladder_delta{suffix}.csv")
        write_csv([{k: v for k, v in r.items() if k not in ("cov", "t")} for r in tr],
                  out / f"ladder_trend{suffix}.csv")
        written += [f"ladder_budgets{suffix}.csv", f"ladder_delta{suffix}.csv", f"ladder_trend{suffix}.csv"]
        val = f"val/{name}" if name else "validation"
        if plot_ladder(d, tr, out / f"ladder_delta{suffix}.png", val=val):
            pngs.append(out / f"ladder_delta{suffix}.png")
        if name in on_axis and on_axis[name][0]:
            rows, at_budget = on_axis[name]
            stem = f"vs_{axis_name(axis)}{suffix}"
            write_csv(rows, out / f"crossing_{stem}.csv")
            write_csv(at_budget, out / f"delta_{stem}.csv")
            written += [f"crossing_{stem}.csv", f"delta_{stem}.csv"]
            if plot_axis(rows, at_budget, axis, out / f"crossing_{stem}.png", val=val):
                pngs.append(out / f"crossing_{stem}.png")
        if name in fits:
            write_csv(fits[name][0], out / f"ladder_fit{suffix}.csv")
            write_csv(fits[name][1], out / f"ladder_fit_budgets{suffix}.csv")
            written += [f"ladder_fit{suffix}.csv", f"ladder_fit_budgets{suffix}.csv"]
    report = {"budget_rows": table, "delta_rows": deltas, "trends": trends, "axis": axis,
              "ladder_settings": settings, "ladder_ffn": ffn_configs(branches),
              "axis_rows": on_axis.get(None, ([], []))[0], "axis_budget_rows": on_axis.get(None, ([], []))[1],
              "extra_val": {n: {"budget_rows": t, "delta_rows": d, "trends": tr,
                                "axis_rows": on_axis.get(n, ([], []))[0]}
                            for n, (t, d, tr) in sets.items() if n},
              "warnings": warnings,
              "problems": [{"path": str(r.path), "status": r.status, "error": r.error} for r in problems],
              "caveat": CAVEAT.format(lo="the smallest", hi="the largest budget"),
              **({"fit": {n or "main": {"fits": f, "budgets": b} for n, (f, b) in fits.items()}} if fits else {})}
    (out / "ladder.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(text, end="")
    print(f"wrote {out}/" + ", ".join(written + ["ladder.json"] + [p.name for p in pngs]))
    return report
