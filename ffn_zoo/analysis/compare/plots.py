"""PNGs (loss curves, final Δ, Δ over training) and the TensorBoard custom-scalars layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ffn_zoo.analysis.compare.runs import Group, seed_curves

LAYOUT_SUFFIX = ".ffnzoo_layout"  # the events file compare writes (first run folder; older: the sweep root)


def save_figure(fig: Any, ax: Any, path: Path) -> None:
    """Grid, legend, tight layout, PNG at 120 dpi; frees the figure."""
    import matplotlib.pyplot as plt

    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_delta_curves(rows: Sequence[dict[str, Any]], path: Path, title: str = "") -> bool:
    """Δ val/loss vs the baseline against training tokens, band = 95% Welch interval over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(r["variant"] for r in rows))
    if not variants:
        return False
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, v in enumerate(variants):
        rs = [r for r in rows if r["variant"] == v]
        x = np.array([r["tokens"] for r in rs]) / 1e6
        (line,) = ax.plot(x, [r["delta"] for r in rs], marker="o", ms=3, color=f"C{i % 10}",
                          label=f"{v} (n={rs[-1]['n']})")
        if all(r["delta_lo"] is not None for r in rs):
            ax.fill_between(x, [r["delta_lo"] for r in rs], [r["delta_hi"] for r in rs], color=line.get_color(),
                            alpha=0.12)
    ax.axhline(0, color="black", lw=0.8)
    means = [0.0] + [r["delta"] for r in rows]  # the means set the scale; early, very wide bands are clipped
    pad = 0.15 * (max(means) - min(means) or 0.1)
    ax.set_ylim(min(means) - pad, max(means) + pad)
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel(f"Δ validation loss vs {rows[0]['baseline']} (nats/token; < 0 = better)")
    ax.set_title(title or "Gap over training: mean Δ over seeds, band = 95% Welch interval", fontsize=10)
    save_figure(fig, ax, path)
    return True


def plot_curves(groups: Sequence[Group], path: Path, band: str = "minmax", title: str = "") -> bool:
    """Validation loss against training tokens: mean over seeds, band = min–max or ±1 std."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = False
    for i, g in enumerate(groups):
        curves = list(seed_curves(g).values())
        common = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        if not common:
            continue
        ys = np.array([[c[t] for t in common] for c in curves])  # (seeds, points)
        x = np.array(common) / 1e6
        mean = ys.mean(0)
        lo, hi = (ys.min(0), ys.max(0)) if band == "minmax" else (mean - ys.std(0, ddof=1 if len(ys) > 1 else 0),
                                                                     mean + ys.std(0, ddof=1 if len(ys) > 1 else 0))
        style = "-" if g.first("gated") else "--"
        (line,) = ax.plot(x, mean, style, marker="o", ms=3, label=f"{g.label} (n={len(ys)})", color=f"C{i % 10}")
        if len(ys) > 1:
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.15)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("validation loss (nats/token)")
    band_text = "min–max" if band == "minmax" else "±1 std"
    ax.set_title(title or f"Validation loss vs tokens (line: mean over seeds, band: {band_text}; dashed = dense)")
    save_figure(fig, ax, path)
    return True


def plot_deltas(rows: Sequence[dict[str, Any]], path: Path, title: str = "") -> bool:
    """Final Δ log-ppl against the baseline with 95% Welch-t intervals, one bar per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r["delta"] is not None and r["variant"] != r["baseline"]]
    if not shown:
        return False
    shown = sorted(shown, key=lambda r: r["delta"])
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(shown) + 1.5))
    y = np.arange(len(shown))
    d = np.array([r["delta"] for r in shown])
    lo = np.array([r["delta"] - r["delta_lo"] if r["delta_lo"] is not None else 0 for r in shown])
    hi = np.array([r["delta_hi"] - r["delta"] if r["delta_hi"] is not None else 0 for r in shown])
    colors = ["C0" if r["form"] == "gated" else "C1" for r in shown]
    ax.barh(y, d, color=colors, alpha=0.6)
    ax.errorbar(d, y, xerr=[lo, hi], fmt="none", ecolor="black", capsize=4)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(y, [f"{r['variant']} (n={r['n']})" for r in shown])
    ax.set_xlabel(f"Δ validation loss vs {shown[0]['baseline']} (nats/token; < 0 = better)")
    ax.set_title(title or "Final Δ log-perplexity, 95% Welch-t interval over seeds (blue = gated, orange = dense)",
                 fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_tensorboard_layout(root: Path, run_dirs: Sequence[Path]) -> Path:
    """The custom-scalars layout (every run's val/loss, train/loss, val/ppl on one chart each) in the first
    run's folder, for runs trained before train.py wrote it into each run's events; returns that folder.

    Never in ``root`` itself: a folder with events of its own is a run to TensorBoard (the "." pseudo-run),
    so a layout earlier versions left there is removed. TensorBoard merges identical layouts of all runs.
    """
    from torch.utils.tensorboard import SummaryWriter

    from ffn_zoo.training.reporting.tb_views import write_custom_scalars

    target = run_dirs[0]
    for old in [*root.glob(f"events.out.tfevents.*{LAYOUT_SUFFIX}"), *target.glob(f"events.out.tfevents.*{LAYOUT_SUFFIX}")]:
        old.unlink()  # one layout, however often compare runs
    writer = SummaryWriter(log_dir=str(target), filename_suffix=LAYOUT_SUFFIX)
    write_custom_scalars(writer)
    writer.close()
    return target
