"""The orchestrator: each part in its own process group with a hard time budget, the report rewritten after each.

A crash, an OOM or a hang in one part is recorded in the report and the others still run; ``report.json`` and
``report.md`` under ``--out`` are rewritten after every part (a timeout still leaves the parts so far), and the
Markdown is printed at the end. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from ffn_zoo.atomic import atomic_write_bytes
from ffn_zoo.tools.device_check import env, gemm, glu, step, train
from ffn_zoo.tools.device_check.part import Part, read_saved
from ffn_zoo.tools.device_check.procs import child_env, finish
from ffn_zoo.tools.device_check.report import PartRun, Report, markdown
from ffn_zoo.tools.device_check.sizes import DRY, GPU, PARTS, Sizes

# part -> (its result dataclass, the function that fills it); prep is part glu's corpus, run in the background
RUNS: dict[str, tuple[type, Callable[[Part[Any]], None]]] = {
    "env": (env.EnvResult, env.run), "gemm": (gemm.GemmResult, gemm.run), "step": (step.StepResult, step.run),
    "train": (train.TrainResult, train.run), "glu": (glu.GluResult, glu.run), "prep": (glu.PrepResult, glu.run_prep)}


def run_part(name: str, sizes: Sizes, work: Path, deadline: float, data: Path | None) -> int:
    """The child: run one part, its result saved as it grows; an exception is recorded, exit code 1."""
    cls, fn = RUNS[name]
    p = Part(name, sizes, work, deadline, cls(), data)
    try:
        fn(p)
        return 0
    except Exception as e:
        p.error, p.traceback = f"{type(e).__name__}: {e}", traceback.format_exc()[-4000:]
        p.save()
        traceback.print_exc()
        return 1


def start_child(name: str, sizes: Sizes, work: Path, budget: float, data: Path | None = None,
                site: Path | None = None, **env_vars: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ffn_zoo.tools.device_check", "--part", name, "--work", str(work),
           "--deadline", str(time.time() + budget - 5)]
    cmd += (["--dry-run"] if sizes.dry_run else []) + (["--data", str(data)] if data else [])
    return subprocess.Popen(cmd, env={**child_env(site), **env_vars}, start_new_session=True)


# What the parts past gemm import (Hydra composes every run), as import name -> the package to ship. The GPU image
# has no Hydra: scripts/device_prep.sh ships hydra-core, omegaconf and antlr4 as wheels.
TRAINING_STACK = {"hydra": "hydra-core", "omegaconf": "omegaconf", "antlr4": "antlr4-python3-runtime",
                  "lightning": "lightning", "tokenizers": "tokenizers", "tensorboard": "tensorboard",
                  "matplotlib": "matplotlib"}
NEEDS_STACK = ("step", "train", "glu", "prep")


def missing_packages(site: Path | None) -> list[str]:
    """The training stack's packages the parts' Python cannot import (``site`` first on its path)."""
    probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m) is None))"
    out = subprocess.run([sys.executable, "-c", probe, *TRAINING_STACK], env=child_env(site), capture_output=True,
                         text=True, check=True).stdout.split()
    return [TRAINING_STACK[m] for m in out]


def missing_line(missing: list[str]) -> str:
    return (f"needs {', '.join(missing)}, not installed here: ship {'it' if len(missing) == 1 else 'them'} as wheels "
            f"in .device/wheels (scripts/device_prep.sh; bash scripts/device_check.sh installs them)")


def run_child(name: str, sizes: Sizes, work: Path, budget: float, data: Path | None = None,
              site: Path | None = None) -> PartRun:
    """A part in its own process group, killed (all of it: training children too) at its budget."""
    t0 = time.perf_counter()
    rc = finish(start_child(name, sizes, work, budget, data, site), budget)
    saved = read_saved(work, name)
    error = saved.error if saved else None
    status = "timeout" if rc is None else "ok" if rc == 0 and error is None else "failed"
    return PartRun(status, rc, time.perf_counter() - t0, budget, error, saved.result if saved else {})


def install_wheels(wheels: Path, site: Path) -> list[str]:
    """The wheels in ``wheels`` installed offline into ``site`` (put first on the parts' path): their names."""
    files = sorted(wheels.glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                    "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, files)], check=True)
    return [f.name for f in files]


def write_report(report: Report, out: Path, work: Path) -> None:
    atomic_write_bytes(out / "report.json", (json.dumps(asdict(report), indent=1, default=str) + "\n").encode())
    atomic_write_bytes(out / "report.md", markdown(report).encode())
    for src, dst in ((work / "glu" / "compare" / "ladder_delta.png", "glu_ladder_delta.png"),
                     (work / glu.TARBALL, glu.TARBALL)):  # the ladders come back whole: ffn-zoo-compare reads them
        if src.is_file():
            atomic_write_bytes(out / dst, src.read_bytes())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="ffn-zoo-device-check", description="Measure ffn-zoo's GPU path in minutes "
                                 "(env, gemm, step, train, glu) and write one report.")
    ap.add_argument("--out", type=Path, default=Path("device_check"), help="report.json and report.md go here")
    ap.add_argument("--work", type=Path, default=None, help="runs, logs, caches (default: a temporary folder)")
    ap.add_argument("--data", type=Path, default=None, metavar="DIR",
                    help="a folder of Wikipedia shards for part glu (train-*.jsonl.gz and validation-*.jsonl.gz, "
                         "as data=wikipedia reads them); default: none, part glu trains on the toy corpus")
    ap.add_argument("--wheels", type=Path, default=None, metavar="DIR",
                    help="wheels to install offline (no index, no dependencies) into <work>/site, first on the "
                         "parts' path: for a machine whose Python lacks e.g. Hydra; default: none")
    ap.add_argument("--dry-run", action="store_true", help="every part on the CPU at tiny sizes (about a minute)")
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS, help="a subset, e.g. to re-run one")
    ap.add_argument("--part", choices=list(RUNS), help=argparse.SUPPRESS)  # the child
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.data is not None and not glu.has_shards(args.data):
        ap.error(f"--data {args.data}: no {glu.TRAIN_GLOB} with {glu.VAL_GLOB} there")
    if args.wheels is not None and not sorted(args.wheels.glob("*.whl")):
        ap.error(f"--wheels {args.wheels}: no *.whl there")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the parts, write and print the report; exit code 0 when every part passed."""
    import torch

    args = parse_args(argv)
    sizes = DRY if args.dry_run else GPU
    data = args.data.resolve() if args.data else None
    if args.part:
        return run_part(args.part, sizes, args.work, args.deadline, data)
    if not args.dry_run and not torch.cuda.is_available():
        print("error: no CUDA device; the check needs a GPU (--dry-run runs it on the CPU at tiny sizes)",
              file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    work = (args.work or Path(tempfile.mkdtemp(prefix="ffnzoo-device-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    report = Report(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), sizes.dry_run, asdict(sizes), str(work))
    site = work / "site" if args.wheels else None
    if site:
        report.wheels = install_wheels(args.wheels, site)
    missing = missing_packages(site)
    if missing:
        print(f"error: the parts {', '.join(p for p in args.parts if p in NEEDS_STACK)} {missing_line(missing)}",
              file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    # part glu's tokenization needs no GPU: it runs beside the GPU parts, on a share of the cores
    cores = str(max(1, (os.cpu_count() or 2) // 4))
    prep = start_child("prep", sizes, work, sizes.budgets["glu"], data, site, CUDA_VISIBLE_DEVICES="",
                       RAYON_NUM_THREADS=cores, OMP_NUM_THREADS=cores) if "glu" in args.parts and not missing else None
    for name in args.parts:
        if missing and name in NEEDS_STACK:  # one line naming the packages, not a traceback per part
            report.parts[name] = PartRun("failed", None, 0.0, sizes.budgets[name], missing_line(missing))
            write_report(report, args.out, work)
            continue
        if name == "glu" and prep is not None:
            report.prep_rc = finish(prep, sizes.budgets["glu"] / 3)  # killed: part glu does it itself
        print(f"== part {name} (budget {sizes.budgets[name]:.0f} s)", flush=True)
        report.parts[name] = run_child(name, sizes, work, sizes.budgets[name], data, site)
        report.wall_s = time.perf_counter() - t0
        write_report(report, args.out, work)
    print((args.out / "report.md").read_text())
    return int(any(part.status != "ok" for part in report.parts.values()))
