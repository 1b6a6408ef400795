"""Part train: the training entry point end to end (trainer=gpu, bf16-mixed, compile).

It trains, validates, checkpoints, is SIGKILLed after a checkpoint and resumes; its tokens/s are set against the
bare step of part step at the same shape and batch (what Lightning, the loader and the callbacks cost).
"""

from __future__ import annotations

import json
import math
import signal
import time
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from ffn_zoo.tools.device_check.part import Part
from ffn_zoo.tools.device_check.procs import run_logged, train_command
from ffn_zoo.tools.device_check.sizes import Sizes
from ffn_zoo.tools.device_check.step import StepResult, StepRow, reference_case


@dataclass
class TrainMetrics:
    """The resumed run's metrics.json, the fields the check reads."""

    status: str | None = None
    steps: int | None = None
    val_loss: float | None = None
    val_ppl: float | None = None
    train_tokens_per_s: float | None = None
    resumed_from: str | None = None
    wall_s: float | None = None
    tokens_seen: int | None = None

    @classmethod
    def read(cls, path: Path) -> TrainMetrics:
        m = json.loads(path.read_text())
        return cls(**{f.name: m.get(f.name) for f in fields(cls)})


@dataclass
class TrainResult:
    batch: int | None = None
    steps: int | None = None
    overrides: list[str] | None = None
    command: str | None = None
    killed_rc: int | None = None
    killed_wall_s: float | None = None
    checkpoint_step: int | None = None
    killed_as_planned: bool = False
    resumed_rc: int | None = None
    resumed_wall_s: float | None = None
    metrics: TrainMetrics | None = None
    learned: bool = False  # final val/loss below ln vocab (uniform)
    resumed_ok: bool = False
    best_ckpt: bool = False
    bare_step: StepRow | None = None
    vs_bare_step: float | None = None  # train tokens/s over the bare step's (same batch only)


def bare_reference(step: StepResult | None, s: Sizes) -> StepRow | None:
    """Part step's row that part train repeats without Lightning: compiled as part train is (else the eager row,
    and the report says so)."""
    if step is None:
        return None
    return step.row(reference_case(s, s.compile)) or step.row(reference_case(s, False))


def overrides_for(s: Sizes, batch: int, log_dir: Path) -> list[str]:
    """The toy corpus at the big shape: killed at half its steps, resumed to the end, validated at the end."""
    n, half = s.train_steps, s.train_steps // 2
    return [
        f"model={s.model}", "ffn=gelu", "data=toy", f"data.vocab_size={s.vocab}", f"model.seq_len={s.seq}",
        f"data.seq_len={s.seq}", f"data.batch_size={batch}", f"data.train_tokens={2 * n * batch * (s.seq + 1)}",
        f"data.val_tokens={8 * s.seq * 8}", f"trainer={'cpu' if s.dry_run else 'gpu'}",
        "impl.precision=bf16-mixed", f"impl.compile={str(s.compile).lower()}", f"trainer.max_steps={n}",
        # validation at the end only: the killed run need not compile the eval graph
        f"trainer.val_check_interval={n}", f"checkpoint.every_n_steps={half}", "trainer.log_every_n_steps=10",
        "trainer.enable_progress_bar=false", f"log_dir={log_dir}",
    ]


def run(p: Part[TrainResult]) -> None:
    s, r = p.sizes, p.result
    ref = bare_reference(p.prior("step", StepResult), s)
    r.batch = ref.batch if ref else s.batch_start  # the bare step's batch, so the two compare
    r.steps, half = s.train_steps, s.train_steps // 2
    root = p.work / "train"
    r.overrides = overrides_for(s, r.batch, root)
    r.command = "ffn-zoo-train " + " ".join(r.overrides)
    t0 = time.perf_counter()
    r.killed_rc = run_logged(train_command([*r.overrides, f"debug.kill_at_step={half}"]), p.work / "train_a.log",
                             p.left() * 0.55)  # the resumed run compiles from inductor's cache: a little faster
    r.killed_wall_s = time.perf_counter() - t0
    runs = sorted(root.glob("runs/*"))
    ckpt = runs[-1] / "checkpoints" / "last.ckpt" if runs else None
    if ckpt and ckpt.is_file():
        r.checkpoint_step = torch.load(ckpt, map_location="cpu", weights_only=True)["global_step"]
    r.killed_as_planned = r.killed_rc == -signal.SIGKILL and r.checkpoint_step == half
    p.save()

    t0 = time.perf_counter()
    r.resumed_rc = run_logged(train_command([*r.overrides, "ckpt_path=last"]), p.work / "train_b.log", p.left() - 5)
    r.resumed_wall_s = time.perf_counter() - t0
    done = [d for d in sorted(root.glob("runs/*")) if (d / "metrics.json").is_file()]
    if r.resumed_rc != 0 or not done:
        tail = (p.work / "train_b.log").read_text()[-1500:]
        raise RuntimeError(f"the resumed training run exited {r.resumed_rc}:\n{tail}")
    m = r.metrics = TrainMetrics.read(done[-1] / "metrics.json")
    r.learned = m.val_loss is not None and m.val_loss < math.log(s.vocab)
    r.resumed_ok = m.status == "ok" and m.steps == r.steps and bool(m.resumed_from)
    r.best_ckpt = (done[-1] / "checkpoints" / "best.ckpt").is_file()
    if ref and m.train_tokens_per_s:
        r.bare_step = ref
        r.vs_bare_step = m.train_tokens_per_s / ref.tokens_per_s if ref.batch == r.batch else None
    p.save()
