"""Training throughput of ffn-zoo's real training step, against the machine's GEMM peak and HF's GPT-2.

    ffn-zoo-bench --model bert_base mini --ffn gelu geglu --precision 32-true bf16-mixed --peer hf
    ffn-zoo-bench --model bert_base --ffn gelu --objective mlm      # the masked-LM step (what MLM ladders train)

For each case (model preset × FFN variant × seq len × batch × precision × objective) it times

- ``ours``     the project's training step: ``LitLM.loss`` (forward + cross-entropy; under ``mlm`` the batch
               masked as in training, only the chosen positions through the output layer), backward,
               global-norm clipping and the optimizer from ``configs/optim`` — what ``train.py`` runs per step;
- ``hf``       (``--peer hf``, causal cases only) ``transformers.GPT2LMHeadModel`` of the same shape (dense
               GELU, dropout 0, SDPA attention, loss through ``labels=``), same AdamW (fused) and clipping;
- ``trainer``  (``--trainer``) the whole ``ffn_zoo.train.run`` (Lightning, data loader, logger, progress
               bar, callbacks) over the same shape; its tokens/s comes from ``ThroughputMonitor``;
- GEMM floor   (``--gemm-floor``) our step's own matmul calls, as the profiler lists them, replayed alone back to
               back (ffn_zoo/tools/gemm_floor.py): column ``×floor`` is our step time ÷ that replay's time;
               ``+attn`` adds to the floor the products a fused attention kernel does inside one call (Q·Kᵀ,
               P·V and their four backward products, half under a causal mask), timed the same way.

Repeats are interleaved (ours, hf, trainer, ours, hf, ...) with the GEMM peak re-probed in each repeat (MFU is
against the best probe), so a neighbour process slows all of them alike; the table shows medians and the spread
(max-min)/median, and each repeat's 1-minute load average is recorded so a disturbed run can be recognised.
One JSON line per case goes to stdout (prefixed ``json``) and to ``--json FILE``. Nothing here asserts a speed.
MFU counts the output layer at every position under either objective, as ``train.py``'s summary does.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import nullcontext, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.data.blocks import Blocks, StepSampler
from ffn_zoo.nn.flops import gemm_peak_flops, training_flops_per_token
from ffn_zoo.training.recipe.module import LitLM
from ffn_zoo.training.recipe.objectives import OBJECTIVES, build_objective, model_vocab_size
from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.training.recipe.optim import build_optimizer, param_groups
from ffn_zoo.training.recipe.precision import BF16_ON_CPU, bf16_support, cpu_flags
from ffn_zoo.tools import gemm_floor
from ffn_zoo.tools.bench_results import Case, Result, format_table, summarize

PRECISIONS = {"32-true": torch.float32, "bf16-mixed": torch.bfloat16}


# ---------------------------------------------------------------- memory


def _reset_peak_rss() -> None:
    """Linux resets VmHWM (peak RSS) when 5 is written to clear_refs; elsewhere the peak stays process-wide."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _rss_mib(field: str = "VmHWM") -> float | None:
    """Peak (VmHWM) or current (VmRSS) resident memory of this process, from /proc (Linux only)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


# ---------------------------------------------------------------- the timed steps


class Stepper:
    """One implementation's training step over a fixed batch stream; ``run(n)`` returns (data s, step s)."""

    def __init__(self, step: Callable[[torch.Tensor], object], blocks: Blocks, sampler: StepSampler,
                 device: str) -> None:
        self.step, self.blocks, self.sampler, self.device = step, blocks, sampler, device
        self.k = 0

    def run(self, n: int) -> tuple[float, float]:
        data_s = step_s = 0.0
        for _ in range(n):
            t0 = time.perf_counter()
            batch = self.blocks[self.sampler.global_batch(self.k)].to(self.device, non_blocking=True)  # (B, T + 1)
            t1 = time.perf_counter()
            self.step(batch)
            if self.device != "cpu":
                torch.cuda.synchronize()
            t2 = time.perf_counter()
            data_s, step_s, self.k = data_s + t1 - t0, step_s + t2 - t1, self.k + 1
        return data_s, step_s


def _seconds_per_call(fn: Callable[[], None], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def _train_step(model: nn.Module, loss_fn: Callable[[torch.Tensor], torch.Tensor], opt: torch.optim.Optimizer,
                clip: float | None, precision: str, device: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """forward + loss under autocast (as Lightning's bf16-mixed does), backward, clipping, optimizer step;
    the step returns its loss, detached (read it with ``.item()`` outside a timed window: that syncs)."""
    # cache_enabled=False as Lightning's bf16-mixed plugin sets it
    bf16 = precision == "bf16-mixed"
    autocast = torch.autocast(torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False) if bf16 \
        else nullcontext()

    def step(batch: torch.Tensor) -> torch.Tensor:
        with autocast:
            loss = loss_fn(batch)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def build_ours(case: Case, vocab: int, device: str, compile_: bool,
               extra: list[str] | None = None) -> tuple[Callable[[torch.Tensor], torch.Tensor], int]:
    """Our training step for ``case`` (plus config overrides ``extra``) on a corpus of ``vocab`` tokens, and its
    FLOPs per token. Seed torch first: the weights are drawn here, and under MLM each step's masks."""
    cfg = compose(case.overrides(vocab) + list(extra or []))
    objective = build_objective(cfg.objective, cfg.mlm, vocab)
    model = TransformerLM(model_config(cfg, vocab_size=model_vocab_size(objective.name, vocab))).to(device)
    module = LitLM(model, cfg.optim, max_steps=1000, objective=objective, fused_loss=cfg.impl.fused_loss)
    if compile_ or cfg.impl.compile:  # --compile, or --ablate impl.compile=true: compiled vs eager in one run
        model.compile()  # in place, as train.py's impl.compile (the first warm-up step pays the compile)
    opt = build_optimizer(model, cfg.optim)
    return _train_step(model, lambda b: module.loss(b, "mean"), opt, cfg.optim.grad_clip, case.precision, device), \
        training_flops_per_token(model, case.seq)


def build_hf(case: Case, vocab: int, device: str) -> tuple[Callable[[torch.Tensor], torch.Tensor], int]:
    """HF GPT-2 at our shape: what a user would train instead (dense GELU FFN of the model's d_ff); causal only."""
    if case.objective != "clm":
        raise ValueError(f"the hf peer is GPT-2, a causal LM: no peer for objective={case.objective}")
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # its notes on loss_type and token ids concern generation, not this step

    cfg = compose(case.overrides(vocab))
    m = cfg.model
    hf_cfg = GPT2Config(
        vocab_size=vocab, n_positions=case.seq, n_embd=m.d_model, n_layer=m.n_layers, n_head=m.n_heads,
        n_inner=m.d_ff, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
    )
    model = GPT2LMHeadModel._from_config(hf_cfg, attn_implementation="sdpa").to(device).train()
    o = cfg.optim
    opt = torch.optim.AdamW(param_groups(model, o.weight_decay), lr=o.lr, betas=tuple(o.betas), eps=o.eps,
                            fused=True)

    def loss_fn(batch: torch.Tensor) -> torch.Tensor:
        x = batch[:, :-1]  # (B, T): the same T tokens per row as ours; HF shifts the labels itself
        return model(input_ids=x, labels=x).loss

    n = sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    flops = 6 * n + 12 * m.n_layers * m.d_model * case.seq
    return _train_step(model, loss_fn, opt, o.grad_clip, case.precision, device), flops


def run_trainer(case: Case, vocab: int, steps: int, threads: int, out: Path) -> float | None:
    """The real ``train.py`` path for ``steps`` steps (one validation at the end, outside the timed window)."""
    from ffn_zoo.train import run

    cfg = compose(case.overrides(vocab) + [
        f"trainer.max_steps={steps}", f"trainer.val_check_interval={steps}", "data.val_tokens=4096",
        f"data.train_tokens={max(65536, 4 * case.batch * (case.seq + 1) * steps)}", f"impl.threads={threads}",
        "trainer.accelerator=cpu" if not torch.cuda.is_available() else "trainer.accelerator=gpu",
    ])
    out.mkdir(parents=True, exist_ok=True)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # its banners would break up the table
    with open(out / "train.log", "w") as log, redirect_stdout(log), redirect_stderr(log):  # keep the table readable
        return run(cfg, out)["train_tokens_per_s"]


# ---------------------------------------------------------------- the run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", nargs="+", default=["bert_base"], help="model presets (configs/model)")
    p.add_argument("--ffn", nargs="+", default=["gelu"], help="FFN variants (configs/ffn)")
    p.add_argument("--seq", nargs="+", type=int, default=[128])
    p.add_argument("--batch", nargs="+", type=int, default=[4])
    p.add_argument("--precision", nargs="+", default=["32-true"], choices=sorted(PRECISIONS))
    p.add_argument("--objective", nargs="+", default=["clm"], choices=OBJECTIVES,
                   help="clm: next-token, causal; mlm: BERT masked LM (--peer hf times only the clm cases)")
    p.add_argument("--vocab", type=int, default=8192, help="vocabulary size (the toy corpus's own is 2048)")
    p.add_argument("--peer", choices=["hf"], default=None,
                   help="also time HF GPT2LMHeadModel, interleaved (causal cases)")
    p.add_argument("--trainer", action="store_true", help="also time the whole train.py run (Lightning) per case")
    p.add_argument("--trainer-steps", type=int, default=30, help="steps of each --trainer run (first 5 untimed)")
    p.add_argument("--gemm-floor", action="store_true",
                   help="also time our step's own GEMMs alone (its matmul calls as torch.profiler lists them)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile our model (--ablate impl.compile=true times compiled beside eager instead)")
    p.add_argument("--ablate", nargs="*", default=[], metavar="KEY=VALUE",
                   help="also time our step with this config override, e.g. optim.fused=false model.bias=true")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=5, help="timed steps per repeat")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps before the first repeat")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", type=Path, default=None, help="append one JSON line per case to this file")
    return p.parse_args(argv)


def benchmark(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the cases the command line names; print the table and JSON lines; return the rows."""
    args = parse_args(argv)
    if any(a.partition("=")[0] == "impl.flush_denormal" for a in args.ablate):
        raise SystemExit("error: --ablate impl.flush_denormal cannot be timed beside the default in one process: the "
                         "intra-op threads take it when they start. scripts/bench_denormals.py times it, each arm in "
                         "its own process, on a trained checkpoint (a fresh model has no denormals to flush)")
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    device = args.device
    cases = [Case(m, f, s, b, p, o) for m in args.model for f in args.ffn for s in args.seq for b in args.batch
             for p in args.precision for o in args.objective]
    # "ours+KEY=VALUE" is our step with that config override: a lever measured against "ours" in the same run
    impls = ["ours"] + [f"ours+{o}" for o in args.ablate] + (["hf"] if args.peer else []) \
        + (["trainer"] if args.trainer else [])
    # the peer is GPT-2, a causal LM: an MLM case is timed without it (its row has no "vs hf")
    case_impls = {c: [i for i in impls if i != "hf" or c.objective == "clm"] for c in cases}
    if args.peer and not any("hf" in v for v in case_impls.values()):
        print(f"note: --peer {args.peer} times causal cases only; none asked for (--objective clm)", flush=True)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"benchmark {when}: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {threads} threads, "
          f"torch {torch.__version__}, device {device}, load {os.getloadavg()[0]:.2f}", flush=True)
    if device == "cpu":
        print(f"CPU bf16: {BF16_ON_CPU[bf16_support(cpu_flags())]}", flush=True)

    # every stepper built (and warmed) up front, so each repeat times all of them back to back
    steppers: dict[tuple[Case, str], Stepper] = {}
    results: dict[tuple[Case, str], Result] = {}
    floors: dict[Case, Callable[[], None]] = {}  # --gemm-floor: each case's GEMMs, replayed
    attn_floors: dict[Case, Callable[[], None]] = {}  # and the products its fused attention calls hide
    rng = np.random.default_rng(0)
    for case in cases:
        blocks = Blocks(rng.integers(0, args.vocab, size=(256, case.seq + 1), dtype=np.int64))  # (N, T + 1)
        for impl in case_impls[case]:
            torch.manual_seed(0)
            rss_before = _rss_mib("VmRSS")
            if impl == "trainer":
                results[(case, impl)] = Result(case, impl, results[(case, "ours")].flops_per_token)
                continue
            if impl.startswith("ours"):
                step, flops = build_ours(case, args.vocab, device, args.compile, impl.split("+", 1)[1:])
            else:
                step, flops = build_hf(case, args.vocab, device)
            stepper = Stepper(step, blocks, StepSampler(len(blocks.blocks), case.batch, seed=0), device)
            _reset_peak_rss()
            if device != "cpu":
                torch.cuda.reset_peak_memory_stats()
            stepper.run(args.warmup)  # optimizer state allocated here, so the peak includes it
            hwm = _rss_mib()
            res = Result(case, impl, flops, peak_rss_mib=hwm - rss_before if hwm and rss_before else None,
                         steps=args.steps)
            if device != "cpu":
                res.peak_dev_mib = torch.cuda.max_memory_allocated() / 2**20
            steppers[(case, impl)], results[(case, impl)] = stepper, res
            if args.gemm_floor and impl == "ours":
                profiled = gemm_floor.profile_gemms(lambda: stepper.run(1))
                floors[case] = gemm_floor.replay(profiled.gemms, PRECISIONS[case.precision], device)
                floors[case]()  # warm-up: its tensors allocated, the BLAS kernels chosen
                if profiled.attention:
                    attn_floors[case] = gemm_floor.replay(profiled.attention, PRECISIONS[case.precision], device)
                    attn_floors[case]()
                print(f"GEMM floor {case.model} {case.ffn} B{case.batch} {case.precision}: "
                      f"{gemm_floor.describe(profiled)}", flush=True)

    peak: dict[str, list[float]] = {p: [] for p in args.precision}
    with tempfile.TemporaryDirectory(prefix="ffnzoo-bench-") as tmp:
        for rep in range(args.repeats):
            for p in args.precision:
                peak[p].append(gemm_peak_flops(seconds=0.3, dtype=PRECISIONS[p], device=device))
            for case in cases:
                for impl in case_impls[case]:
                    res = results[(case, impl)]
                    if impl == "trainer":
                        tps = run_trainer(case, args.vocab, args.trainer_steps, threads, Path(tmp) / f"r{rep}")
                        torch.set_num_threads(threads)
                        res.tokens_per_s.append(tps or float("nan"))
                    else:
                        data_s, step_s = steppers[(case, impl)].run(args.steps)
                        res.data_s.append(data_s)
                        res.step_s.append(step_s)
                        res.tokens_per_s.append(args.steps * case.batch * case.seq / (data_s + step_s))
                        if impl == "ours" and case in floors:  # right after the steps it is the floor of
                            res.floor_s.append(_seconds_per_call(floors[case], args.steps))
                        if impl == "ours" and case in attn_floors:
                            res.attn_floor_s.append(_seconds_per_call(attn_floors[case], args.steps))
                    res.load.append(os.getloadavg()[0])

    rows = []
    for case in cases:
        ours = results[(case, "ours")]
        for impl in case_impls[case]:
            res = results[(case, impl)]
            row = summarize(res, peak, results.get((case, "hf")) if impl != "hf" else None)
            if impl != "ours":
                row["vs_ours"] = statistics.median(a / b for a, b in zip(res.tokens_per_s, ours.tokens_per_s))
            row.update(date=when, threads=threads, device=device, torch=torch.__version__, steps=args.steps,
                       command=" ".join(["ffn-zoo-bench", *(argv if argv is not None else sys.argv[1:])]))
            rows.append(row)
    print(format_table(rows), flush=True)
    print("GEMM peak GFLOP/s (best of repeats; median): "
          + ", ".join(f"{p} {max(v) / 1e9:.0f}; {statistics.median(v) / 1e9:.0f}" for p, v in peak.items()))
    for row in rows:
        line = json.dumps(row, default=float)
        print("json " + line)
        if args.json:
            with args.json.open("a") as fh:
                fh.write(line + "\n")
    return rows


def main(argv: list[str] | None = None) -> None:
    """``ffn-zoo-bench`` (= ``python -m ffn_zoo.tools.benchmark``)."""
    benchmark(argv)


if __name__ == "__main__":
    main()
