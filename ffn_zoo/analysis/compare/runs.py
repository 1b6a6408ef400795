"""Run folders -> :class:`Run` (config flattened to dotted keys, ``metrics.json``, TensorBoard curves),
grouped into :class:`Group` rows: runs that differ only in the seed.

Runs are grouped by their whole config except the seed and the settings that cannot change what is
learned (impl, logging, paths). Groups whose non-FFN settings differ (data, steps, model, ...) are
reported as separate settings, never averaged together; failed and unfinished runs are listed.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ffn_zoo.errors import DataError
from ffn_zoo.training.lifecycle.runs import flatten_dict as flatten  # the same dotted keys train.py logs as HParams

# Config keys that do not define an experiment: the seed (what we average over), paths (the token cache too: each
# machine keeps its own, FFNZOO_CACHE), logging, checkpointing, instruments, and the impl group (how fast, not
# what). Prefix match on the dotted key.
IGNORED_KEYS = (
    "seed", "log_dir", "impl.", "logger.", "hydra.", "ckpt_path", "checkpoint.", "debug.", "instruments.",
    "trainer.enable_progress_bar", "trainer.enable_model_summary", "trainer.log_every_n_steps",
    "trainer.val_check_interval", "trainer.num_sanity_val_steps", "data.val_batch_size", "data.num_workers",
    "data.cache_dir",
    "data.extra_val",  # extra held-out sets are scored, never trained on (data.extra_val_defaults too)
    "ladder.validate",  # where a ladder validates between its scored points: the same training, the same scores
    "ladder.keep_checkpoints",  # which checkpoints a ladder keeps on disk
)

# Shazeer 2020, Table 1: held-out log-perplexity of T5-base on C4 after 65,536 steps (span-corruption
# objective, T5 tokenizer: a different objective and scale, shown for ordering only). Swish = silu.
SHAZEER_2020 = {"relu": 1.997, "gelu": 1.983, "silu": 1.994, "glu": 1.982,
                "bilinear": 1.960, "geglu": 1.942, "swiglu": 1.944, "reglu": 1.953}

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


def _hashable(v: Any) -> Any:
    return json.dumps(v, sort_keys=True) if isinstance(v, (list, dict)) else v


def is_run_dir(path: Path) -> bool:
    return (path / "metrics.json").is_file() or (path / ".hydra" / "config.yaml").is_file()


def is_ladder_root(path: Path) -> bool:
    """A budget ladder's folder (ffn_zoo/training/ladder/run.py): its runs are the trunk and branches inside it."""
    return (path / "ladder.json").is_file()


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Each path is a run folder or a folder holding run folders at any depth (a sweep, logs/); in the order the
    paths are given (sorted within each), each folder once."""
    found: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise DataError(f"{p}: no such run or sweep folder")
        if is_run_dir(p) and not is_ladder_root(p):
            found.append(p)
            continue
        found += sorted({c.parent.parent for c in p.rglob(".hydra/config.yaml")} |
                        {c.parent for c in p.rglob("metrics.json")})
    unique = list(dict.fromkeys(found))
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


# Settings added after runs were committed, at the value those runs had: a run at that value and one that predates
# the key are the same experiment (a value other than it is a setting like any other).
ADDED_DEFAULTS = {"model.residual_std": "gpt2"}


def experiment_key(config: dict[str, Any]) -> tuple:
    return tuple(sorted((k, _hashable(v)) for k, v in config.items()
                        if not k.startswith(IGNORED_KEYS) and ADDED_DEFAULTS.get(k, ()) != v))


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
    warnings += numerics_warnings(groups)
    if len(settings) > 1:
        differing = sorted({k for s in settings for k in s if any(t.get(k) != s.get(k) for t in settings)})
        for i, s in enumerate(settings):
            warnings.append(f"mixed settings: setting {i + 1} has " + ", ".join(f"{k}={s.get(k)}" for k in differing))
        warnings.insert(0, f"mixed settings: {len(settings)} different settings across groups "
                           f"(differ in {', '.join(differing)}); each is compared separately, never averaged")
    order = list(SHAZEER_2020)  # the paper's row order; other variants after, by name
    groups.sort(key=lambda g: (g.setting, order.index(g.label) if g.label in order else len(order), g.label))
    return groups, settings, warnings


def precision_of(run: Run) -> str | None:
    """The precision a run trained in: metrics.json's (impl.precision=auto resolved there), else its config's."""
    return run.metrics.get("precision") or run.config.get("impl.precision")


def denormals_of(run: Run) -> str | None:
    """How the run's CPU threads treated subnormal floats (impl.flush_denormal): metrics.json's share of flushing
    threads, else "kept" for a run folder from before the flag existed (an impl config without it), else unknown
    (a run read back from a report written before reports recorded it per seed)."""
    if run.metrics.get("denormals"):  # a run read back from a report that recorded it (reports.py)
        return run.metrics["denormals"]
    share = run.metrics.get("denormals_flushed")
    if share is not None:
        return "flushed" if share >= 1 else "kept" if share == 0 else "partly flushed"
    if any(k.startswith("impl.") for k in run.config) and "impl.flush_denormal" not in run.config:
        return "kept"
    return None


def numerics_warnings(groups: Sequence[Group]) -> list[str]:
    """impl settings must not change results, so runs of several precisions or denormal handlings pool into one
    setting; whether they leave a gap alone is measured, not assumed (docs/benchmarks.md: bf16; denormals move a
    `bert_base` seed's loss by ~1e-2 at 2 Mi): say where they pool. An unrecorded value is not counted as another."""
    out = []
    for what, of, runs_with, hint in (
            ("precision", precision_of, "trained in", "compare each precision on its own where the gap matters"),
            ("denormals", denormals_of, "with denormals", "pair runs with the same impl.flush_denormal")):
        for s in sorted({g.setting for g in groups}):
            counts = Counter(v for g in groups if g.setting == s for r in g.runs if (v := of(r)) is not None)
            if len(counts) > 1:
                out.append(f"mixed {what}: setting {s + 1} pools runs {runs_with} "
                           + " and ".join(f"{v} ({n})" for v, n in sorted(counts.items()))
                           + f"; {hint} (docs/benchmarks.md)")
    return out


def _drop_duplicate_seeds(members: list[Run], warnings: list[str]) -> list[Run]:
    """The same config and seed twice (a rerun) would inflate n: keep the newest, say so. A run read back from a
    committed report (reports.py, no metrics.json) is older than any run folder."""
    newest: dict[Any, Run] = {}
    mtime = lambda r: (r.path / "metrics.json").stat().st_mtime if (r.path / "metrics.json").is_file() else 0.0  # noqa: E731
    for r in sorted(members, key=mtime):
        if r.seed in newest:
            warnings.append(f"seed {r.seed} of {r.config.get('ffn.name')} appears twice; "
                            f"using {r.path}, not {newest[r.seed].path}")
        newest[r.seed] = r
    return sorted(newest.values(), key=lambda r: str(r.seed))


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


def seed_curves(g: Group) -> dict[Any, dict[float, float]]:
    """{seed: {training tokens: val/loss}} of a group's runs that logged a curve."""
    out = {}
    for r in g.runs:
        x, y = val_curve(r)
        if len(x):
            out[r.seed] = dict(zip(x.tolist(), y.tolist()))
    return out
