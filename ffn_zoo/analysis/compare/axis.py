"""Ladders of several settings set against one numeric key of theirs: widths (``model.d_model``), or any other
(``model.init_std``). Per variant and setting: the crossing with its Fieller interval (or "no crossing within
range" and the side of 0 the gap stays on), the paired Δ at the budgets every ladder has, and the effective compute
multiplier at the setting's largest budget; written as ``crossing_vs_<name>.csv``, ``delta_vs_<name>.csv``, a
Markdown table and a plot with the intervals.

The key is the one named by ``--axis``, else ``model.d_model`` when the settings differ in it, else the only key
they differ in when it is a number.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.multiplier import multiplier_cell
from ffn_zoo.analysis.compare.plots import save_figure
from ffn_zoo.analysis.compare.tables import paired_cell
from ffn_zoo.analysis.compare.trend import tokens_label
from ffn_zoo.errors import ConfigError, DataError

WIDTH = "model.d_model"
NAMES = {WIDTH: "width", "model.n_layers": "depth"}  # the files' and columns' names for the two shape axes
SHAPE_ONLY = {WIDTH: ("model.d_ff", "model.n_heads")}  # what a width preset moves with d_model by design


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def axis_name(axis: str) -> str:
    """The column and file name: ``width`` for model.d_model, ``depth`` for model.n_layers, else the key's last
    part (``init_std``)."""
    return NAMES.get(axis, axis.rsplit(".", 1)[-1])


def other_differences(settings: Sequence[dict[str, Any]], axis: str) -> list[str]:
    """The keys besides the axis (and the presets' names, and what a width preset moves with d_model) in which the
    ladder settings differ: each also changes along the axis, so the axis carries it too."""
    differing = sorted({k for d in settings for k in d if any(e.get(k) != d.get(k) for e in settings)})
    return [k for k in differing if k not in (axis, "model.name", *SHAPE_ONLY.get(axis, ()))]


def choose_axis(settings: Sequence[dict[str, Any]], requested: str | None = None) -> str | None:
    """The key the settings are set against, or None (fewer than 2 settings, or no numeric key to choose)."""
    differing = sorted({k for d in settings for k in d if any(e.get(k) != d.get(k) for e in settings)})
    if requested:
        if len(settings) < 2:
            raise ConfigError(f"--axis {requested}: needs ladders of >= 2 settings (got {len(settings)})")
        if requested not in differing:
            raise ConfigError(f"--axis {requested}: the ladder settings do not differ in it; they differ in "
                              f"{', '.join(differing) or 'nothing'}")
        bad = next((i for i, d in enumerate(settings) if not _number(d.get(requested))), None)
        if bad is not None:
            raise ConfigError(f"--axis {requested}: not a number in ladder setting {bad + 1} "
                              f"({settings[bad].get(requested)!r}); the axis must be numeric in every ladder")
        return requested
    numeric = [k for k in differing if all(_number(d.get(k)) for d in settings)]
    if WIDTH in numeric:
        return WIDTH
    return differing[0] if len(differing) == 1 and numeric else None


def common_budgets(deltas: Sequence[dict[str, Any]], axis: str) -> list[int]:
    """The budgets every ladder setting has a Δ at; none is a user's mistake (one line naming each's budgets)."""
    by_setting: dict[int, set[int]] = {}
    for d in deltas:
        by_setting.setdefault(d["ladder_setting"], set()).add(d["budget_tokens"])
    common = sorted(set.intersection(*by_setting.values())) if by_setting else []
    if len(by_setting) > 1 and not common:
        each = "; ".join(f"setting {s} ({next(d['setting_label'] for d in deltas if d['ladder_setting'] == s)}): "
                         + ", ".join(tokens_label(t) for t in sorted(b)) for s, b in sorted(by_setting.items()))
        raise DataError(f"ladders set against {axis} share no budget, so their Δ cannot be compared at one ({each}); "
                        f"grow them to a common budget (ladder.budgets=...) or compare each on its own")
    return common


def axis_rows(table: Sequence[dict], deltas: Sequence[dict], trends: Sequence[dict],
              axis: str) -> tuple[list[dict], list[dict]]:
    """(one row per (variant, setting): crossing, Δ at the largest common budget, multiplier at the setting's
    largest budget; one row per (variant, setting, common budget): the paired Δ there), sorted along the axis."""
    name, common = axis_name(axis), common_budgets(deltas, axis)
    value = {d["ladder_setting"]: d["axis_value"] for d in deltas}
    keys = sorted(dict.fromkeys((d["variant"], d["ladder_setting"]) for d in deltas), key=lambda k: (k[0], value[k[1]]))
    crossing, at_budget = [], []
    for variant, si in keys:
        ds = [d for d in deltas if (d["variant"], d["ladder_setting"]) == (variant, si)]
        t = next((t for t in trends if (t["variant"], t["ladder_setting"]) == (variant, si)), None)
        params = lambda v: next((r["params_total"] for r in table if r["ladder_setting"] == si  # noqa: E731
                                 and r["variant"] == v and r["params_total"] is not None), None)
        at_common = {d["budget_tokens"]: d for d in ds if d["budget_tokens"] in common}
        for tokens, d in at_common.items():
            at_budget.append({"variant": variant, "baseline": d["baseline"], "axis": axis, name: d["axis_value"],
                              "ladder_setting": si, "setting_label": d["setting_label"], "budget_tokens": tokens,
                              **_gap(d)})
        last, top = ds[-1], at_common.get(common[-1]) if common else None
        crossing.append({
            "variant": variant, "baseline": ds[0]["baseline"], "axis": axis, name: ds[0]["axis_value"],
            "ladder_setting": si, "setting_label": ds[0]["setting_label"], "params": params(variant),
            "params_baseline": params(ds[0]["baseline"]), "tokens_lo": ds[0]["budget_tokens"],
            "tokens_hi": last["budget_tokens"], "budgets": len(ds), "seeds": t["seeds"] if t else None,
            "seeds_dropped": t["seeds_dropped"] if t else [],
            "crossing_tokens": t["crossing_tokens"] if t and t["within"] else None,
            "crossing_lo": t["crossing_lo"] if t and t["within"] else None,
            "crossing_hi": t["crossing_hi"] if t and t["within"] else None,
            "sign": t["sign"] if t else None,
            "verdict": t["verdict"] if t else "no trend (< 2 budgets or no seed pair)",
            "common_budget": common[-1] if common else None,
            **{f"common_{k}": v for k, v in (_gap(top) if top else _gap(None)).items()},
            "largest_budget": last["budget_tokens"],
            **{k: last[k] for k in ("multiplier", "multiplier_lo", "multiplier_hi", "multiplier_seeds",
                                    "multiplier_note", "multiplier_guess")}})
    return crossing, at_budget


def _gap(d: dict[str, Any] | None) -> dict[str, Any]:
    """The paired Δ of one Δ row (the difference of means and Welch where fewer than 2 seeds pair but there are
    2 on each side)."""
    if d is None:
        return {"delta": None, "lo": None, "hi": None, "pairs": None, "paired": None}
    if d["paired_lo"] is not None or d["delta_lo"] is None:
        return {"delta": d["paired_delta"], "lo": d["paired_lo"], "hi": d["paired_hi"], "pairs": d["n_pairs"],
                "paired": True}
    return {"delta": d["delta"], "lo": d["delta_lo"], "hi": d["delta_hi"], "pairs": d["n_pairs"], "paired": False}


def _crossing_cell(r: dict[str, Any]) -> str:
    if r["crossing_tokens"] is None:
        return r["verdict"]
    if r["crossing_lo"] is None:
        return f"{tokens_label(r['crossing_tokens'])} ({r['verdict'].split(', ', 1)[-1]})"
    return f"{tokens_label(r['crossing_tokens'])} [{tokens_label(r['crossing_lo'])}, {tokens_label(r['crossing_hi'])}]"


def axis_markdown(rows: Sequence[dict], axis: str) -> str:
    name = axis_name(axis)
    common = rows[0]["common_budget"]
    head = ["variant", name, "params", "budgets", "seeds", "crossing (tokens) [95%]",
            f"paired Δ at {tokens_label(common) if common else '—'} [95%] (pairs)",
            f"worth × {rows[0]['baseline']}'s tokens at the largest budget"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        gap = {"paired_delta": r["common_delta"], "paired_lo": r["common_lo"], "paired_hi": r["common_hi"],
               "n_pairs": r["common_pairs"]}
        cells = [r["variant"], f"{r[name]:g}", "—" if r["params"] is None else f"{r['params']:,}",
                 f"{tokens_label(r['tokens_lo'])}–{tokens_label(r['tokens_hi'])} ({r['budgets']})",
                 "—" if r["seeds"] is None else str(r["seeds"]), _crossing_cell(r),
                 paired_cell(gap, "+.4f") + ("" if r["common_paired"] is not False else " (Welch)"),
                 f"{multiplier_cell(r)} at {tokens_label(r['largest_budget'])}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_axis(rows: Sequence[dict], at_budget: Sequence[dict], axis: str, path: Path, val: str = "validation") -> bool:
    """Left: the crossing against the axis with its 95% interval (a triangle at the edge of the fitted range where
    there is none: ▲ the gap stays > 0 there, ▼ < 0; a dotted bar over the range where the sign is unresolved).
    Right: the paired Δ at each common budget, with intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        return False
    name = axis_name(axis)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    logx = all(r[name] > 0 for r in rows)
    budgets = sorted({a["budget_tokens"] for a in at_budget})
    for i, v in enumerate(dict.fromkeys(r["variant"] for r in rows)):
        rs, color = [r for r in rows if r["variant"] == v], f"C{i % 10}"
        hit = [r for r in rs if r["crossing_tokens"] is not None]
        if hit:
            y = np.array([r["crossing_tokens"] for r in hit])
            lo = np.array([r["crossing_lo"] if r["crossing_lo"] is not None else np.nan for r in hit])
            hi = np.array([r["crossing_hi"] if r["crossing_hi"] is not None else np.nan for r in hit])
            left.errorbar([r[name] for r in hit], y, yerr=[np.nan_to_num(y - lo), np.nan_to_num(hi - y)], fmt="o-",
                          color=color, capsize=4, label=f"{v} − {rs[0]['baseline']}")
        missed = [r for r in rs if r["crossing_tokens"] is None and r["sign"] in ("+", "-")]
        for k, r in enumerate(missed):
            edge = r["tokens_hi"] if r["sign"] == "+" else r["tokens_lo"]
            left.plot(r[name], edge, "^" if r["sign"] == "+" else "v", color=color, ms=10,
                      label=None if k else f"{v}: no crossing within the fitted range")
        open_ = [r for r in rs if r["crossing_tokens"] is None and r["sign"] == "unresolved"]
        for k, r in enumerate(open_):  # the band holds 0 over the whole range: no point to put it at
            left.plot([r[name]] * 2, [r["tokens_lo"], r["tokens_hi"]], ":", color=color, lw=2, marker="_", ms=12,
                      label=None if k else f"{v}: sign unresolved over the fitted range")
        for j, tokens in enumerate(budgets):
            pts = [a for a in at_budget
                   if a["variant"] == v and a["budget_tokens"] == tokens and a["delta"] is not None]
            if not pts:
                continue
            d = np.array([a["delta"] for a in pts])
            lo = np.array([a["lo"] if a["lo"] is not None else a["delta"] for a in pts])
            hi = np.array([a["hi"] if a["hi"] is not None else a["delta"] for a in pts])
            right.errorbar([a[name] for a in pts], d, yerr=[d - lo, hi - d], fmt="os^vD"[j % 5] + "-", capsize=4,
                           color=color, alpha=1 - 0.6 * j / max(1, len(budgets)),
                           label=f"{v} at {tokens_label(tokens)}")
    values = sorted({r[name] for r in rows})
    for ax in (left, right):
        if logx:
            ax.set_xscale("log")
            ax.minorticks_off()
        ax.set_xticks(values, [f"{v:g}" for v in values])
        ax.set_xlabel(axis)
    left.set_yscale("log")
    left.set_ylabel("tokens where Δ crosses 0 (95% Fieller interval)")
    left.set_title("Crossing against the setting (▲/▼: none within the fitted range, Δ > 0 / < 0 there;\n"
                   "dotted: the sign is unresolved over the fitted range)", fontsize=9)
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    right.axhline(0, color="black", lw=0.8)
    right.set_ylabel(f"paired Δ {val} loss (nats/token; < 0 = variant better)")
    right.set_title("Δ at the budgets every ladder has, paired 95% interval", fontsize=9)
    save_figure(fig, right, path)
    return True
