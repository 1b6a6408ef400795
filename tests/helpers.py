"""What tests share besides fixtures: the repo's paths, the model=tiny overrides and the two ways to train.
Fixtures live in conftest.py; test modules import from here, never from one another."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
# a checkpoint the pre-refactor code wrote (tests/fixtures/README.md), and the overrides it was trained with
OLD_CKPT = REPO / "tests" / "fixtures" / "pre_house_tiny_swiglu.ckpt"
OLD_CKPT_ARGS = [
    "model=tiny", "ffn=swiglu", "model.d_ff=96", "model.seq_len=16", "data.vocab_size=64", "data.support=32",
    "data.n_states=16", "data.train_tokens=16384", "data.val_tokens=1024", "data.batch_size=8",
    "trainer.val_check_interval=4", "trainer.enable_progress_bar=false", "impl.threads=1", "instruments.act_stats=false",
]

# A model=tiny run small enough for the smoke tier (seconds on one core).
TINY = [
    "model=tiny", "trainer.max_steps=40", "trainer.val_check_interval=20", "trainer.log_every_n_steps=5",
    "data.train_tokens=65536", "data.val_tokens=4096", "data.batch_size=16", "trainer.enable_progress_bar=false",
    "impl.threads=1",
]


def tiny(*extra: str) -> list[str]:
    """TINY with ``extra`` overrides replacing the same keys (Hydra refuses a key given twice)."""
    keys = {e.split("=", 1)[0] for e in extra}
    return [a for a in TINY if a.split("=", 1)[0] not in keys] + list(extra)


def run_train(args: list[str], tmp_path: Path, timeout: int = 300, check: bool = True) -> subprocess.CompletedProcess:
    """``python train.py <args>`` in a subprocess, logging under ``tmp_path``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    flags = [a for a in args if a.startswith("-")]  # e.g. -m must come before the overrides
    overrides = [a for a in args if not a.startswith("-")]
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), *flags, f"log_dir={tmp_path}", *overrides],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"train.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


TrainOnce = Callable[[str, list[str]], Path]  # conftest's train_once fixture: (name, train.py args) -> run folder


# a few steps of model=tiny: every error below comes before or at the first optimizer step
FAST = ["model=tiny", "trainer.max_steps=2", "trainer.val_check_interval=2", "data.train_tokens=8192",
        "data.val_tokens=1024", "data.batch_size=4", "trainer.enable_progress_bar=false", "impl.threads=1",
        "checkpoint.every_n_steps=null"]


def train(overrides: list[str], tmp_path: Path, name: str = "run", base: list[str] = FAST) -> dict:
    """``run`` as train.py calls it, in a fresh folder under ``tmp_path``."""
    from ffn_zoo.train import run
    from ffn_zoo.training.recipe.build import compose

    cfg = compose([f"log_dir={tmp_path}", *base, *overrides])
    run_dir = tmp_path / name
    run_dir.mkdir(parents=True)
    return run(cfg, run_dir)


# synthetic run folders for the analysis tests: a small config, and the four variants' (gated, activation, width)
BASE = {
    "seed": 0, "log_dir": "logs",
    "model": {"name": "mini", "d_model": 256},
    "data": {"name": "toy", "seq_len": 128, "batch_size": 32},
    "optim": {"name": "adamw", "lr": 1e-3},
    "trainer": {"max_steps": 100, "val_check_interval": 25},
    "impl": {"threads": 2},
}
FFN = {"gelu": (False, "gelu", 1024), "relu": (False, "relu", 1024),
       "geglu": (True, "gelu", 680), "swiglu": (True, "silu", 680)}


def make_run(root: Path, ffn: str, seed: int, loss: float | None, *, status: str = "ok",
             curve: list[float] | None = None, **changes: Any) -> Path:
    """A run folder as train.py writes it: .hydra/config.yaml, metrics.json (unless unfinished), events."""
    gated, act, hidden = FFN[ffn]
    from omegaconf import OmegaConf

    cfg = json.loads(json.dumps(BASE))
    cfg["seed"] = seed
    cfg["ffn"] = {"name": ffn, "gated": gated, "activation": act}
    for dotted, value in changes.items():
        group, key = dotted.split("__")
        cfg[group][key] = value
    path = root / ",".join([f"ffn={ffn}", f"seed={seed}"] + [f"{k}={v}" for k, v in changes.items()])
    (path / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(cfg), path / ".hydra" / "config.yaml")
    if status == "ok":
        metrics = {"status": "ok", "ffn": ffn, "activation": act, "gated": gated, "d_ff": hidden,
                   "params_total": 3_700_000, "params_ffn": 2_097_152 if not gated else 2_088_960,
                   "val_loss": loss, "val_ppl": math.exp(loss), "val_bpb": None, "tokens_seen": 409_600,
                   "train_tokens_per_s": 5000.0, "flops_per_token": 24_000_000, "steps": 100, "seed": seed,
                   "model": "mini", "data": cfg["data"]["name"]}
        (path / "metrics.json").write_text(json.dumps(metrics))
    elif status == "failed":
        (path / "metrics.json").write_text(json.dumps({"status": "failed", "error": "data.seq_len must be > 0"}))
    if curve:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(str(path)) as w:
            for i, v in enumerate(curve):
                w.add_scalar("val/loss", v, global_step=25 * (i + 1) - 1)
    return path

# ---------------------------------------------------------------------------- comparing two runs

TIMING = {"wall_s", "train_tokens_per_s", "resumed_from", "time_s"}  # metrics.json fields that differ between identical runs


def only_run(root: Path) -> Path:
    """The one run folder ``run_train`` made under ``root``."""
    (run_dir,) = [p for p in root.glob("runs/*") if p.is_dir()]
    return run_dir


def results(run_dir: Path, ignore: set[str] = TIMING) -> dict:
    """A run's metrics.json without the fields that may differ between identical runs."""
    m = json.loads((run_dir / "metrics.json").read_text())
    return {k: v for k, v in m.items() if k not in ignore}


def assert_same_state(a: Path, b: Path) -> None:
    """Weights, optimizer moments and step of two checkpoints, bitwise."""
    import torch

    ca, cb = (torch.load(p, map_location="cpu", weights_only=True) for p in (a, b))
    assert ca["global_step"] == cb["global_step"]
    assert ca["state_dict"].keys() == cb["state_dict"].keys()
    for k, v in ca["state_dict"].items():
        assert torch.equal(v, cb["state_dict"][k]), f"{k} differs"
    states_a, states_b = ca["optimizer_states"][0]["state"], cb["optimizer_states"][0]["state"]
    assert states_a.keys() == states_b.keys()
    for ka, sa in states_a.items():
        sb = states_b[ka]
        for name in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(sa[name], sb[name]), f"optimizer state {ka}.{name} differs"

# ---------------------------------------------------------------------------- synthetic budget ladders

LADDER_BUDGETS = (100_000, 1_000_000, 10_000_000)  # x = log10 = 5, 6, 7


def ladder_baseline_loss(seed: int, tokens: int) -> float:
    """The baseline's loss in a synthetic ladder: straight in log10(tokens), 0.3 nats per decade."""
    return 4.0 - 0.3 * math.log10(tokens) + 0.01 * seed


def ladder_branch(root: Path, ffn: str, seed: int, tokens: int, loss: float, extra: dict[str, float] | None = None,
                  model: dict[str, Any] | None = None, params_total: int | None = None) -> Path:
    """A ladder's branch folder as training/ladder/run.py writes it: .hydra/config.yaml and metrics.json; ``extra``:
    losses on data.extra_val sets; ``model``: keys over the model group (``{"d_model": 512}``)."""
    folder = root / f"ffn={ffn},seed={seed}" / f"budget={tokens}"
    (folder / ".hydra").mkdir(parents=True)
    cfg = {"seed": seed, "ffn": {"name": ffn, "gated": ffn != "gelu", "activation": "gelu"},
           "model": {"name": "mini", "init": "gpt2", **(model or {})},
           "data": {"name": "toy", "batch_size": 10, "seq_len": 100},
           "optim": {"name": "adamw", "schedule": "wsd", "warmup": 5}, "ladder": {"budgets": None},
           "trainer": {"max_steps": tokens // 1000}, "ckpt_path": "somewhere/branch-step=1.ckpt"}
    from omegaconf import OmegaConf

    OmegaConf.save(OmegaConf.create(cfg), folder / ".hydra" / "config.yaml")
    (folder / "metrics.json").write_text(json.dumps({
        "status": "ok", "ffn": ffn, "gated": ffn != "gelu", "val_loss": loss, "val_ppl": math.exp(loss), "seed": seed,
        "steps": tokens // 1000, "tokens_seen": tokens, "ladder_role": "branch", "ladder_budget_tokens": tokens,
        "params_total": params_total, "extra_val": sorted(extra or {}),
        **{f"val_{n}_loss": v for n, v in (extra or {}).items()}}))
    return folder


def ladder_sweep(root: Path, delta, extra=None, model: dict[str, Any] | None = None, seeds=(0, 1, 2),
                 budgets=LADDER_BUDGETS, base=ladder_baseline_loss, skip=lambda ffn, seed, tokens: False,
                 params_total: int | None = None, variant: str = "geglu") -> Path:
    """gelu and ``variant`` ladders for every seed; variant − gelu = delta(seed, x) at x = log10(tokens);
    ``extra(seed, x, ffn)`` -> {set: loss} adds extra held-out sets; ``skip(ffn, seed, tokens)`` leaves a branch out."""
    for seed in seeds:
        for ffn in ("gelu", variant):
            job = root / f"ffn={ffn},seed={seed}"
            job.mkdir(parents=True)
            (job / "ladder.json").write_text("{}")  # a ladder's folder, its summary and its trunk: never table rows
            (job / "metrics.json").write_text(json.dumps({"status": "ok", "ladder_role": "ladder", "ffn": ffn}))
            (job / "trunk").mkdir()
            (job / "trunk" / "metrics.json").write_text(json.dumps(
                {"status": "ok", "ladder_role": "trunk", "ffn": ffn, "val_loss": 9.0, "seed": seed}))
            for t in budgets:
                if skip(ffn, seed, t):
                    continue
                d = delta(seed, math.log10(t)) if ffn == variant else 0.0
                ladder_branch(root, ffn, seed, t, base(seed, t) + d,
                              extra(seed, math.log10(t), ffn) if extra else None, model, params_total)
    return root

# ---------------------------------------------------------------------------- ladders of several widths

U, V = [0.01, -0.02, 0.01], [0.002, -0.001, -0.001]  # per-seed offsets of intercept and slope, mean 0
SLOPE = -0.1
CROSS = {128: 6.5, 256: 6.0, 512: 5.5}  # log10 of the tokens where Δ crosses 0: earlier as the model widens


def width(d: int) -> dict:
    return {"name": f"w{d}", "d_model": d, "d_ff": 4 * d, "n_heads": max(1, d // 64)}


def widths_sweep(root: Path, flat: int | None = None, seeds=(0, 1, 2), budgets=None) -> list[Path]:
    """One folder per width; Δ = SLOPE·(x − CROSS[d]) + seed noise; ``flat``: a width with a steady +0.05 gap."""
    folders = []
    for d, x0 in [*CROSS.items(), *([(flat, None)] if flat else [])]:
        delta = ((lambda s, x, x0=x0: SLOPE * (x - x0) + U[s] + V[s] * (x - 6)) if x0 is not None
                 else (lambda s, x: 0.05 + 0.1 * U[s] + 0.1 * V[s] * (x - 6)))
        kwargs = {"budgets": budgets(d)} if budgets else {}
        folders.append(ladder_sweep(root / f"d{d}", delta, model=width(d), seeds=seeds, params_total=1000 * d,
                                    **kwargs))
    return folders
