"""The trend of Δ against log10(budget), fitted per seed, and where it crosses 0 (Fieller's interval).

A seed's rungs share one trunk, so its Δs at different budgets are correlated and are not independent points of
one regression; each seed's paired Δ(B) = loss(variant) − loss(baseline) is fitted by least squares on
x = log10(tokens), and the seeds, independent of each other, give the mean line with a t interval
(df = seeds − 1). The crossing's interval is Fieller's: the budgets where the line's 95% band holds 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

CAVEAT = "A trend fitted over {lo}–{hi} tokens is no promise outside that range."


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
        "crossing_tokens": float(10 ** (-a / b)) if b != 0 and abs(a / b) < 300 else None,  # flat: none
        "crossing_lo": None, "crossing_hi": None,
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


def side(trend: dict[str, Any], x_lo: float, x_hi: float) -> str:
    """Where the trend stays over [x_lo, x_hi]: "+" (Δ > 0 throughout, at 95% where there is a band), "-", or
    "unresolved" (the band covers 0 somewhere)."""
    b = band(trend, np.array([x_lo, x_hi]))
    line = trend["intercept"] + trend["slope_per_decade"] * np.array([x_lo, x_hi])
    # the band's lower edge (line − t·se, se the root of a convex quadratic) is concave in x and its upper edge
    # convex, so over [x_lo, x_hi] each is beyond 0 throughout exactly when it is at both ends
    lo, hi = (line, line) if b is None else (b[1], b[2])
    return "+" if (lo > 0).all() else "-" if (hi < 0).all() else "unresolved"


SIDE_TEXT = {"+": "Δ > 0 throughout{at} (the variant is worse)", "-": "Δ < 0 throughout{at} (the variant is better)",
             "unresolved": "the band covers 0 there, so the sign is not resolved"}


def verdict(trend: dict[str, Any], x_lo: float, x_hi: float) -> str:
    """One sentence: where the trend crosses 0, or that it does not within the fitted range and on which side of
    0 it stays. Sets ``trend["within"]`` and ``trend["sign"]`` ("" when it crosses)."""
    span = f"{tokens_label(10 ** x_lo)}–{tokens_label(10 ** x_hi)} tokens"
    cross = trend["crossing_tokens"]
    inside = cross is not None and 10**x_lo <= cross <= 10**x_hi
    trend["within"], trend["sign"] = inside, "" if inside else side(trend, x_lo, x_hi)
    if trend["cov"] is None:
        note = f" ({trend['seeds']} seed: no interval)"
        return (f"crosses 0 at {tokens_label(cross)} tokens{note}" if inside
                else f"no crossing within the fitted range ({span}): "
                     f"{SIDE_TEXT[trend['sign']].format(at='')}{note}")
    if inside:
        lo, hi = trend["crossing_lo"], trend["crossing_hi"]
        where = (f"95% interval [{tokens_label(lo)}, {tokens_label(hi)}]" if lo is not None else
                 "95% interval unbounded (the slope's interval covers 0)")
        return f"crosses 0 at {tokens_label(cross)} tokens, {where}"
    beyond = f"; the line would cross at {tokens_label(cross)} tokens, outside it" if cross is not None else ""
    return f"no crossing within the fitted range ({span}): {SIDE_TEXT[trend['sign']].format(at=' at 95%')}{beyond}"
