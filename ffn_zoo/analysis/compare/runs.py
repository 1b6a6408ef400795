"""Compare a sweep: run folders -> one row per variant (mean ± std over seeds, Δ log-ppl against a
baseline with a Welch-t 95% interval), written as Markdown/CSV/JSON, two PNGs and a TensorBoard
custom-scalars layout that puts every run's ``val/loss`` on one chart.

    python -m ffn_zoo.compare logs/multiruns/<time>            # or any run folders
    python -m ffn_zoo.compare logs/multiruns/<time> --baseline relu --paper

Runs are grouped by their whole config except the seed and the settings that cannot change what is
learned (impl, logging, paths). Groups whose non-FFN settings differ (data, steps, model, ...) are
reported as separate settings, never averaged together; failed and unfinished runs are listed.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ffn_zoo.errors import DataError, FFNZooError
from ffn_zoo.train import flatten_dict as flatten  # the same dotted keys train.py logs as HParams

# Config keys that do not define an experiment: the seed (what we average over), paths, logging,
# checkpointing, instruments, and the impl group (how fast, not what). Prefix match on the dotted key.
IGNORED_KEYS = (
    "seed", "log_dir", "impl.", "logger.", "hydra.", "ckpt_path", "checkpoint.", "debug.", "instruments.",
    "trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps",
    "trainer.val_check_interval", "trainer.num_sanity_val_steps", "data.val_batch_size", "data.num_workers",
)

# Shazeer 2020, Table 1: held-out log-perplexity of T5-base on C4 after 65,536 steps (span-corruption
# objective, T5 tokenizer: a different objective and scale, shown for ordering only). Swish = silu.
SHAZEER_2020 = {"relu": 1.997, "gelu": 1.983, "silu": 1.994, "glu": 1.982,
                "bilinear": 1.960, "geglu": 1.942, "swiglu": 1.944, "reglu": 1.953}

LAYOUT_SUFFIX = ".ffnzoo_layout"  # the events file compare.py writes into the sweep root


@dataclass
class Run:
    """One run folder: its flattened config and, if it finished, its metrics.json."""

    path: Path
    status: str  # ok | failed | unfinished
    config: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)  # val_curve's cache

    @property
    def seed(self) -> Any:
        return self.config.get("seed", self.metrics.get("seed"))


@dataclass
class Group:
    """Runs that differ only in the seed: one row of the table."""

    setting: int  # index into the list of distinct non-FFN settings
    label: str  # the variant's name, plus any FFN setting that tells two groups apart
    runs: list[Run]

    def values(self, key: str) -> np.ndarray:
        return np.array([r.metrics[key] for r in self.runs if r.metrics.get(key) is not None], dtype=float)

    def first(self, key: str) -> Any:
        return next((r.metrics.get(key) for r in self.runs if r.metrics.get(key) is not None), None)


# ---------------------------------------------------------------------------------------------- loading


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def is_run_dir(path: Path) -> bool:
    return (path / "metrics.json").is_file() or (path / ".hydra" / "config.yaml").is_file()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Each path is a run folder or a folder holding run folders at any depth (a sweep, logs/)."""
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise DataError(f"{p}: no such run or sweep folder")
        if is_run_dir(p):
            found.append(p)
            continue
        found += sorted({c.parent.parent for c in p.rglob(".hydra/config.yaml")} |
                        {c.parent for c in p.rglob("metrics.json")})
    unique = sorted(set(found))
    if not unique:
        raise DataError(f"no run folders (with metrics.json or .hydra/config.yaml) under {', '.join(map(str, paths))}")
    return unique


def load_run(path: Path) -> Run:
    config: dict[str, Any] = {}
    cfg_file = path / ".hydra" / "config.yaml"
    if cfg_file.is_file():
        from omegaconf import OmegaConf

        conf = OmegaConf.load(cfg_file)
        try:
            config = flatten(OmegaConf.to_container(conf, resolve=True))
        except Exception:  # an interpolation we cannot resolve here: compare the raw strings
            config = flatten(OmegaConf.to_container(conf, resolve=False))
    metrics_file = path / "metrics.json"
    if not metrics_file.is_file():
        return Run(path, "unfinished", config, error="no metrics.json (still running, killed or crashed)")
    try:
        metrics = json.loads(metrics_file.read_text())
    except json.JSONDecodeError as e:
        return Run(path, "failed", config, error=f"unreadable metrics.json: {e}")
    if metrics.get("status") != "ok":
        return Run(path, "failed", config, metrics, error=str(metrics.get("error", metrics.get("status"))))
    if not config:  # a bare metrics.json: group by what it records
        config = {"ffn.name": metrics.get("ffn"), "ffn.gated": metrics.get("gated"),
                  "ffn.activation": metrics.get("activation"), "model.name": metrics.get("model"),
                  "data.name": metrics.get("data"), "trainer.max_steps": metrics.get("steps"),
                  "seed": metrics.get("seed")}
    return Run(path, "ok", config, metrics)


def experiment_key(config: dict[str, Any]) -> tuple:
    return tuple(sorted((k, _hashable(v)) for k, v in config.items() if not k.startswith(IGNORED_KEYS)))


def group_runs(runs: Sequence[Run]) -> tuple[list[Group], list[dict[str, Any]], list[str]]:
    """Group finished runs by config minus seed; returns (groups, settings, warnings).

    A *setting* is a group's config minus the ``ffn.*`` keys; rows are only compared within one.
    """
    warnings: list[str] = []
    by_key: dict[tuple, list[Run]] = {}
    for r in runs:
        if r.status == "ok":
            by_key.setdefault(experiment_key(r.config), []).append(r)

    settings: list[dict[str, Any]] = []
    groups: list[Group] = []
    for key, members in by_key.items():
        setting = {k: v for k, v in key if not k.startswith("ffn.")}
        if setting not in settings:
            settings.append(setting)
        members = _drop_duplicate_seeds(members, warnings)
        groups.append(Group(settings.index(setting), str(members[0].config.get("ffn.name", "?")), members))

    # two groups with the same variant name in one setting differ in some ffn.* key: name it
    for g in groups:
        twins = [h for h in groups if h.setting == g.setting and h.label.split(" ")[0] == g.label.split(" ")[0]]
        if len(twins) > 1:
            mine = dict(experiment_key(g.runs[0].config))
            diff = sorted(k for h in twins if h is not g
                          for k, v in experiment_key(h.runs[0].config) if k.startswith("ffn.") and mine.get(k) != v)
            g.label += " (" + ", ".join(f"{k[4:]}={mine.get(k)}" for k in dict.fromkeys(diff)) + ")"

    for g in groups:
        steps = {r.metrics.get("steps") for r in g.runs}
        wanted = g.runs[0].config.get("trainer.max_steps")
        if wanted is not None and any(s != wanted for s in steps):
            warnings.append(f"{g.label}: runs stopped at steps {sorted(steps)} of trainer.max_steps={wanted}")
    if len(settings) > 1:
        differing = sorted({k for s in settings for k in s if any(t.get(k) != s.get(k) for t in settings)})
        for i, s in enumerate(settings):
            warnings.append(f"mixed settings: setting {i + 1} has " + ", ".join(f"{k}={s.get(k)}" for k in differing))
        warnings.insert(0, f"mixed settings: {len(settings)} different settings across groups "
                           f"(differ in {', '.join(differing)}); each is compared separately, never averaged")
    order = list(SHAZEER_2020)  # the paper's row order; other variants after, by name
    groups.sort(key=lambda g: (g.setting, order.index(g.label) if g.label in order else len(order), g.label))
    return groups, settings, warnings


def _drop_duplicate_seeds(members: list[Run], warnings: list[str]) -> list[Run]:
    """The same config and seed twice (a rerun) would inflate n: keep the newest, say so."""
    newest: dict[Any, Run] = {}
    for r in sorted(members, key=lambda r: (r.path / "metrics.json").stat().st_mtime):
        if r.seed in newest:
            warnings.append(f"seed {r.seed} of {r.config.get('ffn.name')} appears twice; "
                            f"using {r.path}, not {newest[r.seed].path}")
        newest[r.seed] = r
    return sorted(newest.values(), key=lambda r: str(r.seed))


# ---------------------------------------------------------------------------------------------- statistics


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


def summarize(groups: Sequence[Group], baseline: str, paper: bool = False) -> list[dict[str, Any]]:
    """One dict per group: the table's numbers (losses in nats/token)."""
    rows = []
    for g in groups:
        loss = g.values("val_loss")
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
            "val_bpb": _mean_or_none(g.values("val_bpb")),
            "tokens_per_s": _mean_or_none(g.values("train_tokens_per_s")),
            "baseline": baseline,
            "delta": None, "delta_lo": None, "delta_hi": None, "paired_lo": None, "paired_hi": None,
        }
        if base is not None:
            row["delta"] = float(loss.mean() - base.values("val_loss").mean())
            ci = welch_interval(loss, base.values("val_loss")) if base is not g else None
            if ci is not None:
                row["delta_lo"], row["delta_hi"] = float(ci[1]), float(ci[2])
            by_seed = lambda grp: {r.seed: r.metrics["val_loss"] for r in grp.runs}  # noqa: E731
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


# ---------------------------------------------------------------------------------------------- output


def _fmt(v: Any, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def _delta_cell(r: dict[str, Any]) -> str:
    if r["delta"] is None:
        return "—"
    if r["variant"] == r["baseline"]:
        return "(baseline)"
    if r["delta_lo"] is None:
        return f"{r['delta']:+.3f} (n<2: no interval)"
    mark = "" if r["delta_lo"] <= 0 <= r["delta_hi"] else " *"
    return f"{r['delta']:+.3f} [{r['delta_lo']:+.3f}, {r['delta_hi']:+.3f}]{mark}"


def _interval_cell(lo: float | None, hi: float | None) -> str:
    if lo is None:
        return "—"
    return f"[{lo:+.3f}, {hi:+.3f}]" + ("" if lo <= 0 <= hi else " *")


def markdown_table(rows: Sequence[dict[str, Any]], paper: bool = False) -> str:
    mixed = len({r["setting"] for r in rows}) > 1
    head = (["setting"] if mixed else []) + [
        "variant", "form", "hidden", "FFN params", "total params", "MFLOP/token", "seeds",
        "val/loss (mean ± std)", "val/ppl", "val/bpb", f"Δ log-ppl vs {rows[0]['baseline'] if rows else '?'} [95% CI]",
        "paired-by-seed 95% CI", "tokens/s"]
    if paper:
        head += ["Shazeer'20 log-ppl (T5 span corruption, 65k steps)", "Shazeer'20 Δ"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in rows:
        std = f" ± {r['val_loss_std']:.3f}" if r["val_loss_std"] is not None else ""
        cells = ([str(r["setting"])] if mixed else []) + [
            r["variant"], r["form"], _fmt(r["hidden"], ","), _fmt(r["params_ffn"], ","), _fmt(r["params_total"], ","),
            _fmt(r["flops_per_token"] / 1e6 if r["flops_per_token"] else None, ".1f"), str(r["n"]),
            f"{r['val_loss_mean']:.3f}{std}", f"{r['val_ppl']:.2f}", _fmt(r["val_bpb"], ".3f"), _delta_cell(r),
            _interval_cell(r["paired_lo"], r["paired_hi"]), _fmt(r["tokens_per_s"], ",.0f")]
        if paper:
            cells += [_fmt(r.get("paper"), ".3f"), _fmt(r.get("paper_delta"), "+.3f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report_text(rows: Sequence[dict[str, Any]], settings: Sequence[dict[str, Any]], problems: Sequence[Run],
                warnings: Sequence[str], paper: bool) -> str:
    parts = [markdown_table(rows, paper)] if rows else ["(no finished runs)"]
    parts.append("Losses are validation NLL in nats/token over the whole validation split; Δ log-ppl = mean "
                 "val/loss − baseline's, 95% Welch-t interval over seeds; paired-by-seed = t interval of the "
                 "per-seed differences (same data order within a seed); * = the interval excludes 0.")
    if rows:
        parts.append("Common settings: " + _common_settings(settings))
    if warnings:
        parts.append("\n".join(f"warning: {w}" for w in warnings))
    if problems:
        parts.append("Runs not in the table:\n" + "\n".join(
            f"- {r.status}: {r.path} (ffn={r.config.get('ffn.name', '?')}, seed={r.seed}): {r.error}"
            for r in problems))
    return "\n\n".join(parts) + "\n"


def _common_settings(settings: Sequence[dict[str, Any]]) -> str:
    keys = ("model.name", "data.name", "data.seq_len", "data.batch_size", "trainer.max_steps", "optim.name",
            "optim.lr", "optim.warmup", "optim.schedule")
    common = {k: settings[0].get(k) for k in keys if all(s.get(k) == settings[0].get(k) for s in settings)}
    return ", ".join(f"{k}={v}" for k, v in common.items() if v is not None)


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    cols = [k for k in rows[0] if k != "val_losses"] if rows else []
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (" ".join(map(str, v)) if isinstance(v, list) else v) for k, v in r.items()})


def val_curve(run: Run, tag: str = "val/loss") -> tuple[np.ndarray, np.ndarray]:
    """(training tokens, value) of one scalar from the run's TensorBoard events; empty if none."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    if tag in run.curves:  # the table, the curves and the Δ curves all read them: parse the events once
        return run.curves[tag]
    ea = EventAccumulator(str(run.path), size_guidance={"scalars": 0})
    ea.Reload()
    if tag not in ea.Tags()["scalars"]:
        run.curves[tag] = np.array([]), np.array([])
        return run.curves[tag]
    by_step = {e.step: e.value for e in ea.Scalars(tag)}  # last write wins (a final re-validation)
    steps = np.array(sorted(by_step))
    tokens_per_step = (run.config.get("data.batch_size") or 0) * (run.config.get("data.seq_len") or 0)
    # Lightning logs at the index of the last finished step, so step s is after s + 1 optimizer steps
    run.curves[tag] = (steps + 1) * tokens_per_step, np.array([by_step[s] for s in steps])
    return run.curves[tag]


def _save(fig: Any, ax: Any, path: Path) -> None:
    """Grid, legend, tight layout, PNG at 120 dpi; frees the figure."""
    import matplotlib.pyplot as plt

    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _seed_curves(g: Group) -> dict[Any, dict[float, float]]:
    """{seed: {training tokens: val/loss}} of a group's runs that logged a curve."""
    out = {}
    for r in g.runs:
        x, y = val_curve(r)
        if len(x):
            out[r.seed] = dict(zip(x.tolist(), y.tolist()))
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
        b = _seed_curves(base)
        for g in groups:
            if g.setting != s or g is base:
                continue
            a = _seed_curves(g)
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
    _save(fig, ax, path)
    return True


def plot_curves(groups: Sequence[Group], path: Path, band: str = "minmax", title: str = "") -> bool:
    """Validation loss against training tokens: mean over seeds, band = min–max or ±1 std."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = False
    for i, g in enumerate(groups):
        curves = list(_seed_curves(g).values())
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
    _save(fig, ax, path)
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


def write_tensorboard_layout(root: Path) -> Path:
    """A custom-scalars layout in ``root``: every run's val/loss (and train/loss, val/ppl) on one chart each.

    TensorBoard's Custom Scalars tab draws, for each chart, every run under ``--logdir`` whose tags match.
    """
    from torch.utils.tensorboard import SummaryWriter

    for old in root.glob(f"events.out.tfevents.*{LAYOUT_SUFFIX}"):
        old.unlink()  # one layout per folder, however often compare runs
    charts = {  # chart title -> ["Multiline", [tag regexes]]
        "val/loss (every run; whole validation split)": ["Multiline", [r"^val/loss$"]],
        "train/loss (every run)": ["Multiline", [r"^train/loss$"]],
        "val/ppl (every run)": ["Multiline", [r"^val/ppl$"]],
        "train/tokens_per_s (every run)": ["Multiline", [r"^train/tokens_per_s$"]],
    }
    writer = SummaryWriter(log_dir=str(root), filename_suffix=LAYOUT_SUFFIX)
    writer.add_custom_scalars({"ffn-zoo: all variants": charts})
    writer.close()
    return root


# ---------------------------------------------------------------------------------------------- driver


def compare(paths: Sequence[str | Path], out: Path | None = None, baseline: str = "gelu", paper: bool = False,
            band: str = "minmax", layout: bool = True) -> dict[str, Any]:
    """Load, group, summarize and write everything; returns the JSON report."""
    run_dirs = find_run_dirs(paths)
    runs = [load_run(p) for p in run_dirs]
    groups, settings, warnings = group_runs(runs)
    problems = [r for r in runs if r.status != "ok"]
    for s in range(len(settings)):
        if not any(g.setting == s and g.label == baseline for g in groups):
            warnings.append(f"setting {s + 1}: no finished {baseline!r} runs, so no Δ column "
                            f"(choose another with --baseline)")
    rows = summarize(groups, baseline, paper)
    root = Path(paths[0]) if len(paths) == 1 and not is_run_dir(Path(paths[0])) else run_dirs[0].parent
    out = Path(out) if out else root / "compare"
    out.mkdir(parents=True, exist_ok=True)

    text = report_text(rows, settings, problems, warnings, paper)
    (out / "table.md").write_text(text)
    write_csv(rows, out / "table.csv")
    report = {"rows": rows, "settings": settings, "warnings": warnings,
              "problems": [{"path": str(r.path), "status": r.status, "error": r.error,
                            "ffn": r.config.get("ffn.name"), "seed": r.seed} for r in problems],
              "runs": [str(p) for p in run_dirs]}
    gaps = delta_curves(groups, baseline)  # Δ at every validation point, not only the last
    if gaps:
        write_csv(gaps, out / "delta_curves.csv")
    report["delta_curves"] = gaps
    (out / "table.json").write_text(json.dumps(report, indent=2, default=str) + "\n")

    pngs = []
    for s in range(len(settings)):
        suffix = "" if len(settings) == 1 else f"_setting{s + 1}"
        gs = [g for g in groups if g.setting == s]
        if plot_curves(gs, out / f"loss_curves{suffix}.png", band):
            pngs.append(out / f"loss_curves{suffix}.png")
        if plot_deltas([r for r in rows if r["setting"] == s + 1], out / f"delta{suffix}.png"):
            pngs.append(out / f"delta{suffix}.png")
        if plot_delta_curves([r for r in gaps if r["setting"] == s + 1], out / f"delta_curves{suffix}.png"):
            pngs.append(out / f"delta_curves{suffix}.png")
    report["pngs"] = [str(p) for p in pngs]
    if layout:
        write_tensorboard_layout(root)
    print(text, end="")
    print(f"wrote {out}/table.md, table.csv, table.json" + (", delta_curves.csv" if gaps else "")
          + "".join(f", {p.name}" for p in pngs))
    if layout:
        print(f"TensorBoard: tensorboard --logdir {root}   (Custom Scalars tab: val/loss of every run on one chart)")
    return report


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ffn_zoo.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="sweep folders (logs/multiruns/<time>) and/or run folders")
    p.add_argument("--baseline", default="gelu", help="variant the Δ column is measured against (default gelu)")
    p.add_argument("--out", type=Path, help="output folder (default <sweep>/compare)")
    p.add_argument("--paper", action="store_true", help="add Shazeer 2020 Table 1 as a reference column")
    p.add_argument("--band", choices=("minmax", "std"), default="minmax", help="band around the mean curve")
    p.add_argument("--no-layout", action="store_true", help="do not write the TensorBoard custom-scalars layout")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        compare(args.paths, args.out, args.baseline, args.paper, args.band, layout=not args.no_layout)
    except FFNZooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
