"""Statistics over seeds: Welch-t and paired-by-seed intervals, the table's rows, Δ over training."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.runs import SHAZEER_2020, Group, seed_curves


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> tuple[float, float, float] | None:
    """mean(a) − mean(b) and its Welch-t confidence interval; None when either side has < 2 runs."""
    from scipy import stats

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return None
    diff = a.mean() - b.mean()
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff, diff
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + level / 2, df) * se
    return diff, diff - half, diff + half


def paired_interval(a: dict[Any, float], b: dict[Any, float], level: float = 0.95) -> tuple[float, float, float] | None:
    """Mean of per-seed differences a[s] − b[s] over the seeds both have, with a t interval (df = n − 1).

    Within a seed every variant sees the same batches, so pairing removes the data-order part of the noise.
    """
    from scipy import stats

    d = np.array([a[s] - b[s] for s in a if s in b], dtype=float)
    if len(d) < 2:
        return None
    half = stats.t.ppf(0.5 + level / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def _mean_or_none(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None


def summarize(groups: Sequence[Group], baseline: str, paper: bool = False,
              val_set: str | None = None) -> list[dict[str, Any]]:
    """One dict per group: the table's numbers (losses in nats/token) on the main validation split, or on
    the extra held-out set ``val_set`` (data.extra_val; metrics.json keys val_<name>_loss, ...)."""
    key = (lambda stat: f"val_{val_set}_{stat}") if val_set else (lambda stat: f"val_{stat}")  # noqa: E731
    if val_set:  # only the groups whose runs scored that set
        groups = [g for g in groups if len(g.values(key("loss")))]
    rows = []
    for g in groups:
        loss = g.values(key("loss"))
        base = next((h for h in groups if h.setting == g.setting and h.label == baseline), None)
        row: dict[str, Any] = {
            "setting": g.setting + 1,
            "variant": g.label,
            "form": "gated" if g.first("gated") else "dense",
            "hidden": g.first("d_ff"),
            "params_ffn": g.first("params_ffn"),
            "params_total": g.first("params_total"),
            "flops_per_token": g.first("flops_per_token"),
            "n": len(loss),
            "seeds": [r.seed for r in g.runs],
            "steps": g.first("steps"),
            "tokens_seen": g.first("tokens_seen"),
            "val_loss_mean": float(loss.mean()),
            "val_loss_std": float(loss.std(ddof=1)) if len(loss) > 1 else None,
            "val_losses": [float(x) for x in loss],
            "val_ppl": math.exp(loss.mean()),  # geometric mean over seeds
            "val_bpb": _mean_or_none(g.values(key("bpb"))),
            "tokens_per_s": _mean_or_none(g.values("train_tokens_per_s")),
            "baseline": baseline,
            "delta": None, "delta_lo": None, "delta_hi": None, "paired_lo": None, "paired_hi": None,
        }
        if base is not None:
            row["delta"] = float(loss.mean() - base.values(key("loss")).mean())
            ci = welch_interval(loss, base.values(key("loss"))) if base is not g else None
            if ci is not None:
                row["delta_lo"], row["delta_hi"] = float(ci[1]), float(ci[2])
            by_seed = lambda grp: {r.seed: r.metrics[key("loss")] for r in grp.runs}  # noqa: E731
            paired = paired_interval(by_seed(g), by_seed(base)) if base is not g else None
            if paired is not None:
                row["paired_lo"], row["paired_hi"] = paired[1], paired[2]
        if paper:
            name = g.label.split(" ")[0]
            row["paper"] = SHAZEER_2020.get(name)
            row["paper_delta"] = (SHAZEER_2020[name] - SHAZEER_2020[baseline]
                                  if name in SHAZEER_2020 and baseline in SHAZEER_2020 else None)
        rows.append(row)
    return rows


def delta_curves(groups: Sequence[Group], baseline: str) -> list[dict[str, Any]]:
    """Δ val/loss vs the baseline at every validation point both logged: is a gap opening or closing?

    One row per (variant, tokens): the Welch interval over seeds and the paired-by-seed interval, as in the
    final table, so an early-training gap can be told from one that lasts.
    """
    rows = []
    for s in sorted({g.setting for g in groups}):
        base = next((g for g in groups if g.setting == s and g.label == baseline), None)
        if base is None:
            continue
        b = seed_curves(base)
        for g in groups:
            if g.setting != s or g is base:
                continue
            a = seed_curves(g)
            points = sorted(set.intersection(*(set(c) for c in [*a.values(), *b.values()]))) if a and b else []
            for t in points:
                at = {seed: c[t] for seed, c in a.items()}
                bt = {seed: c[t] for seed, c in b.items()}
                welch = welch_interval(list(at.values()), list(bt.values()))
                paired = paired_interval(at, bt)
                rows.append({
                    "setting": s + 1, "variant": g.label, "baseline": baseline, "tokens": int(t),
                    "n": len(at), "n_baseline": len(bt),
                    "delta": float(np.mean(list(at.values())) - np.mean(list(bt.values()))),
                    "delta_lo": float(welch[1]) if welch else None, "delta_hi": float(welch[2]) if welch else None,
                    "paired_lo": paired[1] if paired else None, "paired_hi": paired[2] if paired else None,
                })
    return rows
