"""The effective compute multiplier of a variant at a budget: how many tokens the baseline needs to reach the
variant's loss there, over the budget ("SwiGLU is worth 1.3× GELU's tokens at 4 M").

It is read off the baseline's own ladder: loss against log10(tokens), straight between its budgets, at the first
point that reaches the variant's loss. Each seed is read off its own baseline curve (a seed fixes the data order);
the seeds' multipliers give a geometric mean with a t interval on their logs (df = seeds − 1). Where the loss is
beyond the baseline's ladder (lower than at its largest budget, or higher than at its smallest) the multiplier is
not measured: it is given as a bound, and the line of the nearest segment's extension is shown as a guess only.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ffn_zoo.analysis.compare.trend import tokens_label


def tokens_to_reach(curve: dict[int, float], target: float) -> tuple[float | None, str, float | None]:
    """(tokens, side, extrapolated) where the curve {tokens: loss}, straight in log10(tokens) between budgets,
    first reaches ``target``. Beyond the ladder tokens is None and side ``">"`` (never reached by the largest
    budget) or ``"<"`` (reached before the smallest); extrapolated is the nearest segment's line there."""
    budgets = sorted(curve)
    x, y = np.log10(np.array(budgets, dtype=float)), np.array([curve[b] for b in budgets])

    def on_line(i: int) -> float | None:  # segment i..i+1 extended to the target, if it slopes down
        if y[i] <= y[i + 1]:
            return None
        return float(10 ** (x[i] + (y[i] - target) / (y[i] - y[i + 1]) * (x[i + 1] - x[i])))

    if y[0] <= target:
        return (float(budgets[0]), "", None) if y[0] == target else (None, "<", on_line(0) if len(y) > 1 else None)
    for i in range(len(y) - 1):
        if y[i + 1] <= target:
            return on_line(i), "", None
    return None, ">", on_line(len(y) - 2) if len(y) > 1 else None


def effective_multiplier(variant: dict[Any, float], base: dict[int, dict[Any, float]], budget: int,
                         level: float = 0.95) -> dict[str, Any]:
    """The multiplier at ``budget``: ``variant`` {seed: loss at the budget}, ``base`` the baseline's ladder
    {budget: {seed: loss}} of the same setting. Fields ``multiplier`` (geometric mean over seeds, None beyond the
    ladder), ``multiplier_lo/hi``, ``multiplier_seeds``, ``multiplier_note`` (why there is no number or
    interval) and, beyond the ladder, ``multiplier_guess`` (the nearest segment extended: a guess, not a reading)."""
    from scipy import stats

    out: dict[str, Any] = {"multiplier": None, "multiplier_lo": None, "multiplier_hi": None, "multiplier_seeds": 0,
                           "multiplier_note": "", "multiplier_guess": None}
    curves = {s: {t: losses[s] for t, losses in base.items() if s in losses} for s in variant}
    curves = {s: c for s, c in curves.items() if len(c) >= 2}
    if not curves:
        out["multiplier_note"] = "no seed with >= 2 baseline budgets to read it off"
        return out
    reads = {s: tokens_to_reach(c, variant[s]) for s, c in curves.items()}
    out["multiplier_seeds"] = len(reads)
    beyond = {s: side for s, (_, side, _) in reads.items() if side}
    if beyond:
        lo, hi = min(min(c) for c in curves.values()), max(max(c) for c in curves.values())
        sides = set(beyond.values())
        bound = (f"> {hi / budget:.3g}×" if sides == {">"} else f"< {lo / budget:.3g}×" if sides == {"<"}
                 else "on both sides")
        guesses = [(t if t is not None else e) for t, _, e in reads.values()]
        if all(g is not None and g > 0 for g in guesses):
            out["multiplier_guess"] = float(math.exp(np.mean(np.log(guesses))) / budget)
        guess = f"; the nearest segment's line gives {out['multiplier_guess']:.3g}×" if out["multiplier_guess"] else ""
        seeds = "" if len(beyond) == len(reads) else f" for seed(s) {', '.join(map(str, sorted(beyond, key=str)))}"
        out["multiplier_note"] = f"beyond the ladder{seeds} ({bound}{guess})"
        return out
    logs = np.log([t / budget for t, _, _ in reads.values()])
    out["multiplier"] = float(math.exp(logs.mean()))
    if len(logs) < 2:
        out["multiplier_note"] = "1 seed: no interval"
        return out
    half = float(stats.t.ppf(0.5 + level / 2, len(logs) - 1) * logs.std(ddof=1) / math.sqrt(len(logs)))
    out.update(multiplier_lo=float(math.exp(logs.mean() - half)), multiplier_hi=float(math.exp(logs.mean() + half)))
    return out


def multiplier_cell(r: dict[str, Any]) -> str:
    """``1.30× [1.21, 1.40]``, or the reason there is no number or interval."""
    if r.get("multiplier") is None:
        return r.get("multiplier_note") or "—"
    if r["multiplier_lo"] is None:
        return f"{r['multiplier']:.3g}× ({r['multiplier_note']})"
    return f"{r['multiplier']:.3g}× [{r['multiplier_lo']:.3g}, {r['multiplier_hi']:.3g}]"


def multiplier_lines(deltas: list[dict[str, Any]]) -> list[str]:
    """One line per (setting, variant): its multiplier at every budget."""
    keys = list(dict.fromkeys((d["ladder_setting"], d["variant"]) for d in deltas))
    mixed = len({k[0] for k in keys}) > 1
    out = []
    for si, v in keys:
        ds = [d for d in deltas if (d["ladder_setting"], d["variant"]) == (si, v)]
        where = f"setting {si} ({ds[0]['setting_label']}): " if mixed else ""
        at = "; ".join(f"at {tokens_label(d['budget_tokens'])} {multiplier_cell(d)}" for d in ds)
        out.append(f"- {where}{v}, in {ds[0]['baseline']}'s tokens: {at}")
    return out
