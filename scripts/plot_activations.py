"""Plot every FFN activation with its derivative, and the error of GELU's approximations.

    python scripts/plot_activations.py            # -> docs/img/activations.png, docs/img/gelu_approximations.png
    python scripts/plot_activations.py --runs RUN_DIR ...   # also -> docs/img/dead_units.png from trained runs

The curves come from the modules in ``ffn_zoo.nn.activations.ACTIVATIONS`` (what the models run), and
the derivatives from autograd on them, so the plots show the code, not a re-typed formula.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from ffn_zoo.nn.activations import SwishBeta, get_activation  # noqa: E402
from ffn_zoo.training.reporting.instruments import act_tag  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "img"

# panel title -> activation module; Swish-β at a few fixed β (β → ∞ tends to ReLU, β = 0 to x/2)
PANELS: dict[str, torch.nn.Module] = {
    "ReLU": get_activation("relu"),
    "GELU (exact, erf)": get_activation("gelu"),
    "GELU (tanh approx.)": get_activation("gelu_tanh"),
    "GELU (sigmoid approx., x·σ(1.702x))": get_activation("quick_gelu"),
    "SiLU / Swish (x·σ(x))": get_activation("silu"),
    "Mish": get_activation("mish"),
    "ReLU²": get_activation("relu2"),
    "Swish-β, β = 0.5": SwishBeta(0.5),
    "Swish-β, β = 1.702 (learnable GELU init)": SwishBeta(1.702),
    "Swish-β, β = 4": SwishBeta(4.0),
    "sigmoid (GLU gate)": get_activation("sigmoid"),
}


def curve(act: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(act(x), act′(x)) in float64."""
    x = x.clone().requires_grad_(True)
    y = act.double()(x)
    (dy,) = torch.autograd.grad(y.sum(), x)
    return y.detach(), dy


def plot_grid(path: Path) -> None:
    x = torch.linspace(-4, 4, 801, dtype=torch.float64)
    cols = 4
    rows = -(-len(PANELS) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.5 * rows), sharex=True)
    for ax, (title, act) in zip(axes.flat, PANELS.items()):
        y, dy = curve(act, x)
        ax.plot(x, y, label="f(x)", lw=1.6)
        ax.plot(x, dy, label="f′(x)", lw=1.2, ls="--")
        ax.axhline(0, color="grey", lw=0.5)
        ax.axvline(0, color="grey", lw=0.5)
        ax.set_ylim(-1.5, 4)
        ax.set_title(title, fontsize=9)
        ax.text(0.03, 0.95, f"f′(0) = {dy[len(x) // 2].item():.3g}", transform=ax.transAxes, fontsize=8, va="top")
    for ax in list(axes.flat)[len(PANELS):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8, loc="center left")
    fig.suptitle("FFN activations (solid) and their derivatives (dashed)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def plot_gelu_errors(path: Path) -> None:
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64)
    exact, dexact = curve(get_activation("gelu"), x)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    for name, label in (("gelu_tanh", "tanh approx."), ("quick_gelu", "sigmoid approx. x·σ(1.702x)")):
        y, dy = curve(get_activation(name), x)
        err, derr = y - exact, dy - dexact
        ax1.plot(x, err, label=f"{label}: max |err| {err.abs().max().item():.1e}")
        ax2.plot(x, derr, label=f"{label}: max |err| {derr.abs().max().item():.1e}")
    for ax, title in ((ax1, "f(x) − GELU(x)"), (ax2, "f′(x) − GELU′(x)")):
        ax.set_yscale("symlog", linthresh=1e-4)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.set_xlabel("x")
    fig.suptitle("Error of the GELU approximations against the exact (erf) form", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def plot_dead_units(runs: list[Path], path: Path) -> None:
    """Mean dead-unit and zero fractions over training of each run folder (``~act/…/mean`` in its events)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    for run in runs:
        acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
        acc.Reload()
        metrics = json.loads((run / "metrics.json").read_text()) if (run / "metrics.json").is_file() else {}
        label = metrics.get("ffn", run.name)
        for ax, name in ((ax1, "dead_frac/mean"), (ax2, "zero_frac/mean")):
            tag = act_tag(acc.Tags()["scalars"], name)  # ~act/… (or act/… in runs before the rename)
            events = acc.Scalars(tag) if tag else []
            ax.plot([e.step for e in events], [e.value for e in events], marker="o", ms=3, label=label)
    for ax, title in ((ax1, "dead units (mean over layers)"), (ax2, "exactly-zero activations (mean over layers)")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("training step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    parser.add_argument("--runs", type=Path, nargs="*", default=[], help="run folders to plot dead units of")
    args = parser.parse_args()
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    plot_grid(out / "activations.png")
    plot_gelu_errors(out / "gelu_approximations.png")
    names = ["activations.png", "gelu_approximations.png"]
    if args.runs:
        plot_dead_units(args.runs, out / "dead_units.png")
        names.append("dead_units.png")
    for name in names:
        print(f"wrote {out / name} ({(out / name).stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
