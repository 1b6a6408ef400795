"""Statistics over seeds: Welch-t and paired-by-seed intervals, the table's rows, Δ over training."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.runs import SHAZEER_2020, Group, Run, denormals_of, precision_of, seed_curves


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


def finite_by_seed(g: Group, key: str) -> tuple[dict[Any, float], list[Run]]:
    """{seed: value} of the group's runs whose ``key`` is a finite number, and the runs where it is nan or inf
    (a diverged run: left out of every mean and interval, and named by :func:`row_warnings`)."""
    good, bad = {}, []
    for r in g.runs:
        v = r.metrics.get(key)
        if v is None:
            continue
        if math.isfinite(v):
            good[r.seed] = float(v)
        else:
            bad.append(r)
    return good, bad


def paired_fields(a: dict[Any, float], b: dict[Any, float]) -> dict[str, Any]:
    """The paired Δ's fields of a row: mean of the per-seed differences over the seeds both have (the mean its
    interval is about, never the difference of means over unequal seed sets), its interval, the number of pairs,
    and the seeds only one side has."""
    shared = [s for s in a if s in b]
    ci = paired_interval(a, b)
    return {"paired_delta": float(np.mean([a[s] - b[s] for s in shared])) if shared else None,
            "paired_lo": ci[1] if ci else None, "paired_hi": ci[2] if ci else None, "n_pairs": len(shared),
            "unpaired_seeds": sorted((s for s in [*a, *b] if s not in shared), key=str)}


def summarize(groups: Sequence[Group], baseline: str, paper: bool = False,
              val_set: str | None = None) -> list[dict[str, Any]]:
    """One dict per group: the table's numbers (losses in nats/token) on the main validation split, or on
    the extra held-out set ``val_set`` (data.extra_val; metrics.json keys val_<name>_loss, ...)."""
    key = (lambda stat: f"val_{val_set}_{stat}") if val_set else (lambda stat: f"val_{stat}")  # noqa: E731
    if val_set:  # only the groups whose runs scored that set
        groups = [g for g in groups if len(g.values(key("loss")))]
    rows = []
    for g in groups:
        by_seed, bad = finite_by_seed(g, key("loss"))
        runs_by_seed = {r.seed: r for r in g.runs}
        loss = np.array(list(by_seed.values()))
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
            "seeds": list(by_seed),
            "steps": g.first("steps"),
            "tokens_seen": g.first("tokens_seen"),
            "val_loss_mean": float(loss.mean()) if len(loss) else math.nan,
            "val_loss_std": float(loss.std(ddof=1)) if len(loss) > 1 else None,
            "val_losses": [float(x) for x in loss],
            # each seed's numerics, so a report read back still says what it pools (runs.numerics_warnings)
            "seed_precision": [precision_of(runs_by_seed[s]) for s in by_seed],
            "seed_denormals": [denormals_of(runs_by_seed[s]) for s in by_seed],
            "val_ppl": math.exp(loss.mean()) if len(loss) else math.nan,  # geometric mean over seeds
            "val_bpb": _mean_or_none(g.values(key("bpb"))),
            "tokens_per_s": _mean_or_none(g.values("train_tokens_per_s")),
            "baseline": baseline,
            "delta": None, "delta_lo": None, "delta_hi": None,
            "paired_delta": None, "paired_lo": None, "paired_hi": None, "n_pairs": None, "unpaired_seeds": [],
            "nonfinite_runs": [f"{r.path} (seed {r.seed}: {r.metrics[key('loss')]})" for r in bad],
        }
        base_by_seed = finite_by_seed(base, key("loss"))[0] if base is not None else {}
        if base_by_seed and len(loss):
            base_loss = np.array(list(base_by_seed.values()))
            row["delta"] = float(loss.mean() - base_loss.mean())
            ci = welch_interval(loss, base_loss) if base is not g else None
            if ci is not None:
                row["delta_lo"], row["delta_hi"] = float(ci[1]), float(ci[2])
            if base is not g:
                row.update(paired_fields(by_seed, base_by_seed))
        if paper:
            name = g.label.split(" ")[0]
            row["paper"] = SHAZEER_2020.get(name)
            row["paper_delta"] = (SHAZEER_2020[name] - SHAZEER_2020[baseline]
                                  if name in SHAZEER_2020 and baseline in SHAZEER_2020 else None)
        rows.append(row)
    return rows


def row_warnings(rows: Sequence[dict[str, Any]], where: str = "") -> list[str]:
    """One line per run left out for a non-finite loss, and per Δ whose seed sets differ (the paired Δ uses the
    shared seeds only; the Welch Δ all of them)."""
    out = []
    for r in rows:
        out += [f"{where}{r['variant']}: non-finite loss in {p}; left out of every mean and interval"
                for p in r["nonfinite_runs"]]
        if r["unpaired_seeds"]:
            out.append(f"{where}{r['variant']} vs {r['baseline']}: seed(s) {', '.join(map(str, r['unpaired_seeds']))} "
                       f"in only one of them, dropped from the paired Δ ({r['n_pairs']} pairs); the Welch Δ uses all")
    return out


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
                paired = paired_fields(at, bt)
                rows.append({
                    "setting": s + 1, "variant": g.label, "baseline": baseline, "tokens": int(t),
                    "n": len(at), "n_baseline": len(bt),
                    "delta": float(np.mean(list(at.values())) - np.mean(list(bt.values()))),
                    "delta_lo": float(welch[1]) if welch else None, "delta_hi": float(welch[2]) if welch else None,
                    "paired_delta": paired["paired_delta"], "paired_lo": paired["paired_lo"],
                    "paired_hi": paired["paired_hi"], "n_pairs": paired["n_pairs"],
                })
    return rows
