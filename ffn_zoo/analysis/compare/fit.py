"""Fitted loss curves over a ladder's budgets: does a variant change the exponent of loss against tokens, or only
its offset? (``ffn-zoo-compare --fit``)

Per ladder setting, the baseline and each other variant are fitted together as

    L_v(D) = E + a_v · (D / D0)^(−α_v)        D0 = the smallest budget, so a_v is the loss above E there

with one E for both (the irreducible loss belongs to the data and tokenizer, not to the FFN), by least squares on
the mean loss over the seeds both variants have at every budget. Intervals: the same fit on each seed alone (a seed
fixes the data order for both variants), a t interval over those fits (df = seeds − 1), as the trend's. Not a
bootstrap: with the 3 seeds a ladder has, a percentile bootstrap has 10 distinct resamples and intervals far too
narrow. Where E is not identifiable at these budgets (it runs into a bound, or the seeds put it anywhere below the
lowest loss) it is fixed at 0 and the curves are pure power laws: α is then the local log-log slope over the
ladder, and the report says so. A fit that misses the mean losses by more than twice their standard error gets no
verdict: its intervals know seed noise, not a wrong form.

What it reports: α and a per variant, Δα with its interval, the offset ratio a_v / a_base, the verdict
(different exponent, different offset, or none resolved), where the two fitted curves cross if they do, and the
fitted multiplier at each budget (the baseline's tokens that reach the variant's fitted loss there, over the
budget) beside the interpolated one of ``multiplier.py``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.trend import tokens_label
from ffn_zoo.errors import ConfigError

MIN_BUDGETS = 3  # two parameters per variant and a shared E: at least three budgets each


def _mean_curves(base: dict[int, dict[Any, float]], other: dict[int, dict[Any, float]], seeds: Sequence[Any],
                 budgets: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([np.mean([base[t][s] for s in seeds]) for t in budgets]),
            np.array([np.mean([other[t][s] for s in seeds]) for t in budgets]))


def fit_curves(x: np.ndarray, yb: np.ndarray, yo: np.ndarray, e: float | None) -> dict[str, float]:
    """Least squares for E (shared; fixed when ``e`` is given), a and α per curve, over x = D / D0."""
    from scipy.optimize import least_squares

    floor = float(min(yb.min(), yo.min()))

    def unpack(p: np.ndarray) -> tuple[float, float, float, float, float]:
        return (p[0] if e is None else e), math.exp(p[-4]), p[-3], math.exp(p[-2]), p[-1]

    def residuals(p: np.ndarray) -> np.ndarray:
        ee, ab, alb, ao, alo = unpack(p)
        return np.concatenate([ee + ab * x ** -alb - yb, ee + ao * x ** -alo - yo])

    start_e = 0.0 if e is None else e
    guess = []
    for y in (yb, yo):  # a log-log line through the curve above E as the start
        slope, icpt = np.polyfit(np.log(x), np.log(np.maximum(y - start_e, 1e-6)), 1)
        guess += [icpt, max(-slope, 1e-3)]
    if e is None:
        p0 = np.array([0.5 * floor, *guess])
        lo, hi = [0.0, -np.inf, 0.0, -np.inf, 0.0], [floor - 1e-3, np.inf, 5.0, np.inf, 5.0]
        p0[0] = min(max(p0[0], lo[0]), hi[0])
    else:
        p0, lo, hi = np.array(guess), [-np.inf, 0.0, -np.inf, 0.0], [np.inf, 5.0, np.inf, 5.0]
    sol = least_squares(residuals, p0, bounds=(lo, hi))
    ee, ab, alb, ao, alo = unpack(sol.x)
    return {"e": float(ee), "a_base": ab, "alpha_base": float(alb), "a_other": ao, "alpha_other": float(alo),
            "rms": float(np.sqrt(np.mean(sol.fun ** 2))), "e_at_bound": e is None and (ee < 1e-3 or ee > floor - 2e-3)}


def tokens_reaching(loss: float, e: float, a: float, alpha: float, d0: float) -> float | None:
    """D where E + a·(D/D0)^(−α) = loss (None when the loss is at or below E)."""
    return d0 * ((loss - e) / a) ** (-1 / alpha) if loss > e and a > 0 and alpha > 0 else None


def crossing(f: dict[str, float], d0: float) -> float | None:
    """D where the two fitted curves meet (None when the exponents are equal, or it is past any budget: > 10^20)."""
    da = f["alpha_other"] - f["alpha_base"]
    log_x = math.log(f["a_other"] / f["a_base"]) / da if abs(da) > 1e-12 else math.inf
    return d0 * math.exp(log_x) if abs(log_x) < 46 else None


def _derived(f: dict[str, float], budgets: Sequence[int], d0: float) -> dict[str, Any]:
    x = np.array(budgets, dtype=float) / d0
    mult = []
    for xi, d in zip(x, budgets):
        reach = tokens_reaching(f["e"] + f["a_other"] * xi ** -f["alpha_other"], f["e"], f["a_base"],
                                f["alpha_base"], d0)
        mult.append(reach / d if reach else None)
    return {"d_alpha": f["alpha_other"] - f["alpha_base"], "a_ratio": f["a_other"] / f["a_base"],
            "crossing_tokens": crossing(f, d0), "multipliers": mult}


def _interval(samples: list[float | None], level: float = 0.95) -> tuple[float | None, float | None]:
    """A t interval on the mean of per-seed values (None with fewer than two finite ones)."""
    from scipy import stats

    vals = np.array([v for v in samples if v is not None and math.isfinite(v)], dtype=float)
    if len(vals) < 2:
        return None, None
    half = float(stats.t.ppf(0.5 + level / 2, len(vals) - 1) * vals.std(ddof=1) / math.sqrt(len(vals)))
    return float(vals.mean() - half), float(vals.mean() + half)


def fit_pair(base: dict[int, dict[Any, float]], other: dict[int, dict[Any, float]], where: str = "") -> dict[str, Any]:
    """The joint fit of two ladders {budget: {seed: loss}} over the budgets and seeds both have, with per-seed t
    intervals. Raises ConfigError (one line) with fewer than MIN_BUDGETS shared budgets."""
    budgets = sorted(t for t in base if t in other)
    seeds = sorted(set.intersection(*(set(base[t]) & set(other[t]) for t in budgets)) if budgets else set(), key=str)
    if len(budgets) < MIN_BUDGETS or not seeds:
        raise ConfigError(f"--fit needs >= {MIN_BUDGETS} budgets that both variants have, each with a shared seed; "
                          f"{where or 'this ladder'} has {len(budgets) if seeds else 0}")
    d0 = float(budgets[0])
    x = np.array(budgets, dtype=float) / d0
    yb, yo = _mean_curves(base, other, seeds, budgets)
    free = fit_curves(x, yb, yo, None)
    one = [(s,) for s in seeds] if len(seeds) > 1 else []
    per_seed_e = [fit_curves(x, *_mean_curves(base, other, s, budgets), None) for s in one]
    e_lo, e_hi = _interval([f["e"] for f in per_seed_e])
    floor = float(min(yb.min(), yo.min()))
    loose = e_lo is not None and e_hi - e_lo > 0.5 * floor
    identifiable = not free["e_at_bound"] and not loose and not any(f["e_at_bound"] for f in per_seed_e)
    f = free if identifiable else fit_curves(x, yb, yo, 0.0)
    boots = per_seed_e if identifiable else [fit_curves(x, *_mean_curves(base, other, s, budgets), 0.0) for s in one]
    out: dict[str, Any] = {**{k: v for k, v in f.items() if k != "e_at_bound"}, **_derived(f, budgets, d0),
                           "budgets": budgets, "seeds": seeds, "d0": d0, "sem": _sem(base, other, seeds, budgets)}
    if identifiable:
        out["e_note"] = f"shared E fitted: {f['e']:.3f}" + (f" [{e_lo:.3f}, {e_hi:.3f}]" if e_lo is not None else "")
    else:
        why = f"the seeds put it anywhere in [{e_lo:.2f}, {e_hi:.2f}]" if loose else "it runs into a bound"
        out["e_note"] = f"E not identifiable at these budgets ({why}): fixed at 0, pure power laws"
    for key in ("alpha_base", "alpha_other", "a_base", "a_other"):
        out[f"{key}_lo"], out[f"{key}_hi"] = _interval([b[key] for b in boots])
    derived = [_derived(b, budgets, d0) for b in boots]
    for key in ("d_alpha", "a_ratio"):
        out[f"{key}_lo"], out[f"{key}_hi"] = _interval([d[key] for d in derived])
    out["multiplier_intervals"] = [_interval([d["multipliers"][i] for d in derived]) for i in range(len(budgets))]
    out["misfit"] = out["sem"] is not None and out["rms"] > 2 * out["sem"]
    out["verdict"] = verdict(out)
    return out


def _sem(base: dict[int, dict[Any, float]], other: dict[int, dict[Any, float]], seeds: Sequence[Any],
         budgets: Sequence[int]) -> float | None:
    """The typical standard error of a mean loss the fit sees (seed noise): what its residuals are measured against."""
    if len(seeds) < 2:
        return None
    return float(np.mean([np.std([c[t][s] for s in seeds], ddof=1) / math.sqrt(len(seeds))
                          for c in (base, other) for t in budgets]))


def verdict(f: dict[str, Any]) -> str:
    """Different exponent (Δα's interval excludes 0), else different offset (a's ratio excludes 1), else neither; none
    where the fitted form misses the measured means by more than twice their standard error."""
    if f["d_alpha_lo"] is None:
        return "no interval (one seed): not decided"
    if f["misfit"]:  # the bootstrap knows seed noise only, not a wrong form: no verdict from a curve that misses
        return (f"not decided: the form misses the means by {f['rms']:.3f} nats rms, {f['rms'] / f['sem']:.0f}× their "
                f"standard error")
    if f["d_alpha_lo"] > 0 or f["d_alpha_hi"] < 0:
        return "different exponent"
    if f["a_ratio_lo"] > 1 or f["a_ratio_hi"] < 1:
        return "same exponent within its interval, different offset"
    return "neither exponent nor offset resolved"


def fit_ladders(table: Sequence[dict[str, Any]], deltas: Sequence[dict[str, Any]], baseline: str,
                where: str = "") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(one row per setting and variant, one row per budget) from compare's per-budget rows (their per-seed
    ``val_losses``) and Δ rows (the interpolated multiplier)."""
    curves: dict[tuple[int, str], dict[int, dict[Any, float]]] = {}
    labels: dict[int, str] = {}
    for r in table:
        if r.get("val_losses") is None:
            continue
        curves.setdefault((r["ladder_setting"], r["variant"]), {})[int(r["budget_tokens"])] = \
            dict(zip(r["seeds"], r["val_losses"]))
        labels[r["ladder_setting"]] = r.get("setting_label") or ""
    fits, per_budget = [], []
    for (si, variant), curve in curves.items():
        if variant == baseline or (si, baseline) not in curves:
            continue
        name = f"{where}setting {si}, {variant} vs {baseline}"
        f = fit_pair(curves[(si, baseline)], curve, name)
        head = {"ladder_setting": si, "setting_label": labels[si], "variant": variant, "baseline": baseline}
        fits.append({**head, **{k: v for k, v in f.items() if k not in ("multipliers", "multiplier_intervals")}})
        interp = {int(d["budget_tokens"]): d for d in deltas if d["ladder_setting"] == si and d["variant"] == variant}
        for t, m, (lo, hi) in zip(f["budgets"], f["multipliers"], f["multiplier_intervals"]):
            d = interp.get(t, {})
            per_budget.append({**head, "budget_tokens": t, "fitted_multiplier": m, "fitted_lo": lo, "fitted_hi": hi,
                               "interpolated_multiplier": d.get("multiplier"),
                               "interpolated_note": d.get("multiplier_note") or ""})
    return fits, per_budget


def _num(v: float | None, lo: float | None = None, hi: float | None = None, spec: str = ".3f") -> str:
    if v is None:
        return "—"
    return format(v, spec) + (f" [{format(lo, spec)}, {format(hi, spec)}]" if lo is not None else "")


def fit_markdown(fits: Sequence[dict[str, Any]], per_budget: Sequence[dict[str, Any]], val_set: str | None = None
                 ) -> str:
    """The fit's section of ladder.md: one table of parameters and verdicts, one of multipliers per budget."""
    if not fits:
        return ""
    lines = [f"## {val_set + ': ' if val_set else ''}Fitted curves: L(D) = E + a·(D/D0)^(−α), E shared (fit.py)", "",
             "| setting | variant | α base | α variant | Δα [95%] | a variant / a base [95%] | E | crossing | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for f in fits:
        cross = f["crossing_tokens"]
        where = "—" if cross is None else tokens_label(cross) + (
            "" if f["budgets"][0] <= cross <= f["budgets"][-1] else " (beyond the budgets)")
        lines.append(f"| {f['ladder_setting']}{': ' + f['setting_label'] if f['setting_label'] else ''} | "
                     f"{f['variant']} | {_num(f['alpha_base'], f['alpha_base_lo'], f['alpha_base_hi'])} | "
                     f"{_num(f['alpha_other'], f['alpha_other_lo'], f['alpha_other_hi'])} | "
                     f"{_num(f['d_alpha'], f['d_alpha_lo'], f['d_alpha_hi'], '+.3f')} | "
                     f"{_num(f['a_ratio'], f['a_ratio_lo'], f['a_ratio_hi'])} | {f['e_note']} | {where} | "
                     f"{f['verdict']} |")
    lines += ["", "| setting | variant | budget | fitted multiplier [95%] | interpolated |", "|---|---|---|---|---|"]
    for r in per_budget:
        interp = f"{r['interpolated_multiplier']:.3g}×" if r["interpolated_multiplier"] else \
            (r["interpolated_note"] or "—")
        fitted = "—" if r["fitted_multiplier"] is None else f"{r['fitted_multiplier']:.3g}×" + (
            f" [{r['fitted_lo']:.3g}, {r['fitted_hi']:.3g}]" if r["fitted_lo"] is not None else "")
        lines.append(f"| {r['ladder_setting']} | {r['variant']} | {tokens_label(r['budget_tokens'])} | {fitted} | "
                     f"{interp} |")
    seeds = sorted({len(f["seeds"]) for f in fits})
    lines += ["", f"Seeds per fit: {', '.join(map(str, seeds))}; intervals are t intervals over the same fit on each "
              f"seed alone (df = seeds − 1)."]
    return "\n".join(lines) + "\n"
