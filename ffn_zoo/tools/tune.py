"""Tune, then compare: each variant at its own learning rate, beside all variants at one shared lr.

    python -m ffn_zoo.tools.tune experiment=glu_variants_cpu --variants gelu,swiglu --lrs 5e-4,1e-3,2e-3 \\
        --tune-steps 120 --seeds 0,1,2 --out logs/tuned/gelu_swiglu

1. tuning: per variant, one short run (``--tune-steps``, ``--tune-seed``) at every lr of ``--lrs``; the lr with the
   lowest mean ``train/loss`` over the last ``--tail`` of its steps is that variant's own lr (never the reported
   validation split; ffn_zoo.analysis.compare.tuned says why). A best lr at either end of the grid is flagged.
2. seeds: every variant at its own lr and at the shared lr (``--shared-lr``, default the composed config's
   ``optim.lr``), each seed of ``--seeds``, at the configured budget (``trainer.max_steps``).
3. ``<out>/compare/tuned.md``: both arms side by side, Δ vs ``--baseline`` with Welch and paired intervals.

Every run is a normal run folder made by ``python -m ffn_zoo.train -m ...`` under ``<out>/tune/`` or ``<out>/seeds/``.
A run whose folder already holds a finished run of the same composed config (compare's grouping key plus the
seed) is reused, not re-run, so the command can be repeated, extended (more lrs, more seeds) or resumed; a seed
run that trains exactly as a tuning run did (``--tune-steps`` = ``trainer.max_steps``, same seed) reuses it too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from omegaconf import OmegaConf

from ffn_zoo.analysis.compare.tuned import CRITERION, compare_tuned, criterion_text, tail_train_loss
from ffn_zoo.analysis.compare.runs import Run, experiment_key, find_run_dirs, flatten, load_run
from ffn_zoo.training.recipe.build import compose, config_dir
from ffn_zoo.errors import ConfigError, FFNZooError, UnknownNameError

OWN_KEYS = ("ffn", "optim.lr", "seed")  # set by this tool per run; a command-line override of them is a mistake


# ---------------------------------------------------------------------------------------------- inputs


def parse_lrs(text: str) -> list[float]:
    """``--lrs 5e-4,1e-3,2e-3`` -> sorted floats; at least 2 distinct positive values."""
    try:
        lrs = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--lrs={text!r}: give comma-separated numbers, e.g. 5e-4,1e-3,2e-3") from None
    if len(set(lrs)) < 2:
        raise ConfigError(f"--lrs={text!r}: an lr-tuning grid needs at least 2 distinct values (3 or more show "
                          f"whether the optimum is inside the grid), e.g. 5e-4,1e-3,2e-3")
    if any(not lr > 0 for lr in lrs):
        raise ConfigError(f"--lrs={text!r}: every learning rate must be > 0")
    return sorted(set(lrs))


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"--seeds={text!r}: give comma-separated integers, e.g. 0,1,2") from None
    if not seeds:
        raise ConfigError(f"--seeds={text!r}: give at least one seed, e.g. 0,1,2")
    return sorted(set(seeds))


def parse_variants(text: str) -> list[str]:
    valid = sorted(p.stem for p in (config_dir() / "ffn").glob("*.yaml"))
    names = [v.strip() for v in text.split(",") if v.strip()]
    for v in names:
        if v not in valid:
            raise UnknownNameError("--variants entry", v, valid)
    if not names:
        raise ConfigError(f"--variants={text!r}: give at least one FFN variant; valid: {', '.join(valid)}")
    return list(dict.fromkeys(names))


def check_args(args: argparse.Namespace) -> None:
    if not args.tune_steps > 0:
        raise ConfigError(f"--tune-steps must be > 0, got {args.tune_steps}")
    if not 0 < args.tail <= 1:
        raise ConfigError(f"--tail must be in (0, 1], got {args.tail}")
    if args.shared_lr is not None and not args.shared_lr > 0:
        raise ConfigError(f"--shared-lr must be > 0, got {args.shared_lr}")
    for o in args.overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if key in OWN_KEYS:
            raise ConfigError(f"override {o!r}: {key} is set by the tool; use --variants, --lrs/--shared-lr, "
                              f"--seeds/--tune-seed")


def with_overrides(base: Sequence[str], **extra: Any) -> list[str]:
    """``base`` with the ``extra`` keys (``trainer__max_steps=...``) replacing the same keys (Hydra refuses a key twice)."""
    new = {k.replace("__", "."): v for k, v in extra.items()}
    return [o for o in base if o.split("=", 1)[0].lstrip("+~") not in new] + [f"{k}={v}" for k, v in new.items()]


# ---------------------------------------------------------------------------------------------- runs and reuse


class Runs:
    """The run folders under ``<out>``, looked up by what they trained (compare's key plus the seed), and the
    ``train -m`` launches of the ones missing."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.rescan()

    def rescan(self) -> None:
        self.by_key: dict[tuple, Run] = {}
        dirs = find_run_dirs([self.out]) if any(self.out.rglob("metrics.json")) else []
        for p in sorted(dirs, key=lambda p: (p / "metrics.json").stat().st_mtime if (p / "metrics.json").exists() else 0):
            run = load_run(p)
            if run.status == "ok" or diverged(run) or run_key(run.config) not in self.by_key:
                self.by_key[run_key(run.config)] = run  # newest finished wins

    def find(self, cfg: dict[str, Any]) -> Run | None:
        return self.by_key.get(run_key(cfg))

    def ensure(self, phase: str, plan: list[tuple[str, float, int, list[str]]]) -> tuple[list[dict[str, Any]], int]:
        """Launch every (variant, lr, seed, overrides) of ``plan`` without a finished run; -> (the composed config
        of each entry, how many were reused).

        Missing runs are grouped into as few ``-m`` calls as the cartesian sweeps allow: per variant, the lrs that
        miss the same seeds; then the variants that miss the same (lrs, seeds).
        """
        configs = compose_all([with_overrides(o, ffn=v, optim__lr=lr, seed=s) for v, lr, s, o in plan])
        reused = 0
        missing: dict[tuple, dict[float, list[int]]] = {}  # (variant, overrides) -> lr -> seeds
        for (v, lr, s, o), cfg in zip(plan, configs):
            run = self.find(cfg)
            if run is not None and (run.status == "ok" or diverged(run)):
                reused += 1
            else:
                missing.setdefault((v, tuple(o)), {}).setdefault(lr, []).append(s)
        calls: dict[tuple, list[str]] = {}  # (lrs, seeds, overrides) -> variants
        for (v, o), by_lr in missing.items():
            by_seeds: dict[tuple, list[float]] = {}
            for lr, seeds in by_lr.items():
                by_seeds.setdefault(tuple(sorted(seeds)), []).append(lr)
            for seeds, lrs in by_seeds.items():
                calls.setdefault((tuple(lrs), seeds, o), []).append(v)
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        for i, ((lrs, seeds, o), variants) in enumerate(calls.items()):
            sweep = self.out / phase / f"{stamp}_{i}"
            self.launch(list(o), variants, lrs, seeds, sweep)
        if calls:
            self.rescan()
        return configs, reused

    def launch(self, overrides: list[str], variants: list[str], lrs: Sequence[float], seeds: Sequence[int],
               sweep: Path) -> None:
        cmd = [sys.executable, "-m", "ffn_zoo.train", "-m", *overrides, f"ffn={','.join(variants)}",
               f"optim.lr={','.join(map(repr, lrs))}", f"seed={','.join(map(str, seeds))}",
               f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${ffn.name}_lr${optim.lr}_seed${seed}"]
        print("launch   " + " ".join(cmd[1:]), flush=True)
        proc = subprocess.run(cmd)
        if proc.returncode:  # failed jobs keep their metrics.json (status failed): reported, not fatal here
            print(f"note     {sweep}: train exited {proc.returncode}; its failed runs are listed below", flush=True)


def run_key(config: dict[str, Any]) -> tuple:
    return experiment_key(config) + (("seed", config.get("seed")),)


def diverged(run: Run) -> bool:
    """A run the non-finite guard stopped: a finished result for tuning (that lr diverges), reused like an ok one."""
    return run.status == "failed" and run.error.startswith("non-finite")


def compose_all(overrides: list[list[str]]) -> list[dict[str, Any]]:
    """The flattened, resolved job config of each override list, as train.py would compose it."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    out = []
    for o in overrides:
        try:
            out.append(flatten(OmegaConf.to_container(compose(o), resolve=True)))
        except (HydraException, OmegaConfBaseException) as e:
            raise ConfigError(f"overrides {' '.join(o)}: {str(e).splitlines()[0]}") from None
    return out


# ---------------------------------------------------------------------------------------------- tuning


def choose(grid: Sequence[float], values: dict[float, float | None]) -> tuple[float | None, str | None]:
    """The lr with the lowest criterion (None/inf = failed or diverged) and a warning when it is at an edge."""
    finite = {lr: v for lr, v in values.items() if v is not None and v < float("inf")}
    if not finite:
        return None, None
    best = min(finite, key=finite.get)
    edge = None
    if best == min(grid):
        edge = f"the best lr {best:g} is the smallest of the grid; the optimum may be lower: extend --lrs downward"
    elif best == max(grid):
        edge = f"the best lr {best:g} is the largest of the grid; the optimum may be higher: extend --lrs upward"
    return best, edge


def tune(runs: Runs, args: argparse.Namespace, variants: list[str], grid: list[float]) -> dict[str, Any]:
    """Phase 1: the grid per variant at --tune-steps, the criterion of each run, the chosen lr."""
    o = with_overrides(args.overrides, trainer__max_steps=args.tune_steps, trainer__val_check_interval=args.tune_steps,
                       trainer__log_every_n_steps=1)  # every step's train/loss feeds the criterion; one validation
    plan = [(v, lr, args.tune_seed, o) for v in variants for lr in grid]
    configs, reused = runs.ensure("tune", plan)
    result, warnings = {}, []
    for v in variants:
        entries, values = [], {}
        for (pv, lr, _, _), cfg in zip(plan, configs):
            if pv != v:
                continue
            run = runs.find(cfg)
            crit = None
            if run is not None and run.status == "ok":
                crit = tail_train_loss(run, args.tail)
            elif run is not None and diverged(run):
                crit = float("inf")
            values[lr] = crit
            entries.append({"lr": lr, "criterion": None if crit in (None, float("inf")) else crit,
                            "status": "missing" if run is None else ("diverged" if diverged(run) else run.status),
                            "val_loss": run.metrics.get("val_loss") if run is not None else None,
                            "path": str(run.path.relative_to(runs.out)) if run is not None else None,
                            "error": run.error if run is not None else ""})
        best, edge = choose(grid, values)
        if best is None:
            raise ConfigError(f"--lrs: no lr of the grid trained {v} to the end (every tuning run failed or "
                              f"diverged; see {runs.out / 'tune'}); try smaller learning rates")
        if edge:
            warnings.append(f"{v}: {edge}")
        result[v] = {"runs": entries, "best_lr": best, "edge_warning": edge}
    return {"variants": result, "warnings": warnings, "reused": reused, "launched": len(plan) - reused}


def seeds_phase(runs: Runs, args: argparse.Namespace, own: dict[str, float], shared: float | None) -> dict[str, Any]:
    """Phase 2: every variant at its own lr and at the shared lr, each seed, at the configured budget."""
    arms = {"tuned": own} | ({"shared": {v: shared for v in own}} if shared is not None else {})
    plan = list(dict.fromkeys((v, lr, s) for arm in arms.values() for v, lr in arm.items() for s in args.seeds))
    configs, reused = runs.ensure("seeds", [(v, lr, s, args.overrides) for v, lr, s in plan])
    found = {p: runs.find(cfg) for p, cfg in zip(plan, configs)}
    out = {}
    for name, arm in arms.items():
        out[name] = {v: {"lr": lr, "runs": [str(found[(v, lr, s)].path.relative_to(runs.out))
                                            for s in args.seeds if found[(v, lr, s)] is not None]}
                     for v, lr in arm.items()}
    return {"arms": out, "reused": reused, "launched": len(plan) - reused}


def tuning_markdown(t: dict[str, Any]) -> str:
    lines = [f"# lr tuning: {', '.join(t['variants'])}", "",
             f"Criterion: {t['criterion_text']}; {t['tune_steps']} steps, seed {t['tune_seed']}. "
             f"val/loss is shown for information only: it is the reported split and chose nothing.", "",
             "| variant | lr | criterion (train/loss, tail) | val/loss (not used) | status | run |",
             "|---|---|---|---|---|---|"]
    for v, r in t["variants"].items():
        for e in r["runs"]:
            mark = " **(chosen)**" if e["lr"] == r["best_lr"] else ""
            crit = "—" if e["criterion"] is None else f"{e['criterion']:.4f}"
            val = "—" if e["val_loss"] is None else f"{e['val_loss']:.4f}"
            lines.append(f"| {v} | {e['lr']:g}{mark} | {crit} | {val} | {e['status']} | {e['path'] or '—'} |")
    lines += [""] + [f"warning: {w}" for w in t["warnings"]]
    return "\n".join(lines).rstrip() + "\n"


# ---------------------------------------------------------------------------------------------- driver


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m ffn_zoo.tools.tune", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("overrides", nargs="*", help="train.py overrides shared by every run (experiment=..., model=...)")
    p.add_argument("--variants", required=True, help="comma-separated FFN variants, e.g. gelu,swiglu")
    p.add_argument("--lrs", required=True, help="the tuning grid, comma-separated (>= 2 values; 3+ advised)")
    p.add_argument("--tune-steps", type=int, required=True, help="trainer.max_steps of each tuning run")
    p.add_argument("--tune-seed", type=int, default=0, help="the one seed of the tuning runs (default 0)")
    p.add_argument("--tail", type=float, default=0.1, help="criterion: mean train/loss over this last fraction of "
                                                           "the tuning steps (default 0.1)")
    p.add_argument("--seeds", default="0,1,2", help="seeds of the final runs at each lr (default 0,1,2)")
    p.add_argument("--shared-lr", type=float, help="the shared lr every variant also runs at "
                                                   "(default: the composed config's optim.lr)")
    p.add_argument("--no-shared", action="store_true", help="skip the shared-lr arm")
    p.add_argument("--baseline", default="gelu", help="variant the Δ columns are measured against (default gelu)")
    p.add_argument("--out", type=Path, required=True, help="folder of the tuning and seed runs and the report")
    return p.parse_intermixed_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        grid, variants, args.seeds = parse_lrs(args.lrs), parse_variants(args.variants), parse_seeds(args.seeds)
        check_args(args)
        if args.baseline not in variants:
            raise ConfigError(f"--baseline={args.baseline!r} is not among --variants ({', '.join(variants)})")
        composed = compose_all([args.overrides])[0]
        if composed.get("ladder.budgets") is not None:
            raise ConfigError(
                f"ladder.budgets={composed['ladder.budgets']}: the tool tunes and seeds plain runs, not ladders; add "
                f"ladder.budgets=null trainer.max_steps=<budget in steps> (one command per budget: a ladder branch "
                f"equals the plain optim.schedule=wsd run of its length, so the results compare with its branches)")
        args.out.mkdir(parents=True, exist_ok=True)
        runs = Runs(args.out)
        shared = None if args.no_shared else (args.shared_lr or composed["optim.lr"])

        tuning = tune(runs, args, variants, grid)
        own = {v: r["best_lr"] for v, r in tuning["variants"].items()}
        seeds = seeds_phase(runs, args, own, shared)
        record = {"criterion": CRITERION, "criterion_text": criterion_text(args.tail), "tail": args.tail,
                  "grid": grid, "tune_steps": args.tune_steps, "tune_seed": args.tune_seed, "seeds": args.seeds,
                  "overrides": args.overrides, "shared_lr": shared, "baseline": args.baseline,
                  "variants": tuning["variants"], "arms": seeds["arms"], "warnings": tuning["warnings"],
                  "launched": {"tune": tuning["launched"], "seeds": seeds["launched"]},
                  "reused": {"tune": tuning["reused"], "seeds": seeds["reused"]}}
        (args.out / "tuning.json").write_text(json.dumps(record, indent=2) + "\n")
        (args.out / "tuning.md").write_text(tuning_markdown(record))
        print(tuning_markdown(record))
        print(f"runs     tuning: {tuning['launched']} launched, {tuning['reused']} reused; "
              f"seeds: {seeds['launched']} launched, {seeds['reused']} reused")
        compare_tuned(args.out, args.baseline)
    except FFNZooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
