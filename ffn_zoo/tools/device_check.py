"""The GPU device check: one command that measures ffn-zoo's GPU path in minutes and writes one report.

    python -m ffn_zoo.tools.device_check --out OUT              # on a CUDA machine: ~7 min (scripts/device_check.sh)
    python -m ffn_zoo.tools.device_check --dry-run --out OUT    # every part on the CPU at tiny sizes (the tests)

Five parts, each in its own process group with a hard time budget, so a crash, an OOM or a hang in one is
recorded in the report and the others still run:

  env    GPU name, memory, SMs, driver, CUDA, cuDNN, torch and library versions, bf16, the SDPA backends that run
  gemm   dense bf16, TF32 and fp32 matmul probes: the measured peak next to the vendor's nominal figure
  step   our training step (benchmark.py's) at BERT-base shape, seq 512, at the largest batch that fits (doubled
         until OOM): TF32 vs bf16-mixed, eager vs torch.compile; tokens/s, MFU against the measured peak, peak
         memory, host syncs in the step; HF GPT-2 of the same shape (ratio); GEGLU, SwiGLU vs GELU; and the
         mini-shape step that sizes part glu
  train  train.py end to end (trainer=gpu, bf16-mixed, compile): trains, validates, checkpoints, is SIGKILLed
         after a checkpoint and resumes; its tokens/s against the bare step of part step
  glu    gelu, relu, geglu, swiglu x 2 seeds (the glu_variants_cpu recipe, model=mini) on Wikipedia, tokens per
         run sized from part step's throughput, several runs at once on the one GPU; then the compare table

``report.json`` and ``report.md`` under ``--out`` are rewritten after every part (a timeout still leaves the
parts so far); the Markdown is printed at the end. Nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

REPO = Path(__file__).resolve().parents[2]
PARTS = ("env", "gemm", "step", "train", "glu")
CPU_RECIPE_TOKENS = 983_040  # tokens per run of experiment=glu_variants_cpu (240 x 32 x 128), the CPU table

# Dense (no sparsity) tensor-core peaks of the SXM parts, TFLOP/s. bf16 and fp32: the device docs
# (/work/.library/device/H200.md: "dense bf16 about 990 TFLOP/s, plain fp32 about 67, by that datasheet");
# TF32: NVIDIA's H100/H200 SXM datasheet gives 989 TFLOP/s *with* 2:4 sparsity, i.e. ~495 dense.
NOMINAL_TFLOPS = {
    "H200": {"bf16": 989.0, "tf32": 495.0, "fp32": 67.0},
    "H100": {"bf16": 989.0, "tf32": 495.0, "fp32": 67.0},
}
NOMINAL_SOURCE = ("NVIDIA H100/H200 SXM datasheet, dense: bf16 ~989 and fp32 ~67 TFLOP/s as quoted in the "
                  "device docs (H200.md); TF32 ~495 = half the datasheet's 989 with sparsity")


@dataclass(frozen=True)
class Sizes:
    """Everything that differs between the GPU check and its CPU dry run."""

    dry_run: bool
    model: str = "bert_base"
    seq: int = 512
    vocab: int = 8192  # our BPE vocabulary; HF's peer gets the same
    batch_start: int = 8
    batch_max: int = 512
    warmup: int = 2  # untimed steps (compile happens in the first)
    steps: int = 5  # timed steps per repeat
    repeats: int = 2
    gemm_n: int = 8192
    gemm_s: float = 1.0  # seconds of matmuls per probe
    compile: bool = True  # dry run: off (inductor on a CPU takes minutes; tests/smoke/test_compile.py covers it)
    train_steps: int = 40  # part train: killed after steps/2, resumed to steps (at part step's batch)
    glu_model: str = "mini"
    glu_batch: int = 32  # the CPU recipe's 32 x 128
    glu_ffns: tuple[str, ...] = ("gelu", "relu", "geglu", "swiglu")
    glu_seeds: tuple[int, ...] = (0, 1)
    glu_tokens_floor: int = 10 * CPU_RECIPE_TOKENS  # the 10-50x the CPU table
    glu_tokens_cap: int = 50 * CPU_RECIPE_TOKENS
    glu_concurrency: int = 8  # train.py processes at once on the one GPU
    glu_gain: float = 1.5  # assumed aggregate speed-up of that many processes over one (a guess; see report)
    glu_shards: int = 5  # Wikipedia train shards (~2.5 M BPE tokens each; a run draws its own permutation)
    glu_train_docs: int | None = None  # read at most this many documents (dry run: a few)
    glu_tokenizer_docs: int = 1000  # BPE trained on the first N documents
    glu_tokenizer_vocab: int = 8192
    glu_val_tokens: int = 65536
    budgets: dict[str, float] = field(default_factory=lambda: {
        "env": 20, "gemm": 25, "step": 165, "train": 140, "glu": 120})  # 470 s: the check stays under 8 min

    @property
    def device(self) -> str:
        return "cpu" if self.dry_run else "cuda"


GPU = Sizes(dry_run=False)
DRY = Sizes(
    dry_run=True, model="tiny", seq=32, vocab=256, batch_start=2, batch_max=4, warmup=1, steps=2, repeats=1,
    gemm_n=256, gemm_s=0.05, compile=False, train_steps=8, glu_model="tiny", glu_batch=8,
    glu_ffns=("gelu", "swiglu"),
    glu_tokens_floor=0, glu_tokens_cap=8 * 8 * 32, glu_concurrency=2, glu_gain=1.0, glu_shards=1,
    glu_train_docs=20, glu_tokenizer_docs=20, glu_tokenizer_vocab=512, glu_val_tokens=1024,
    budgets={"env": 60, "gemm": 60, "step": 90, "train": 90, "glu": 120},
)


# ---------------------------------------------------------------- one part, in its own process


class Part:
    """A part's result, saved to ``<work>/<name>.json`` whenever it grows, so a killed part keeps what it had."""

    def __init__(self, name: str, sizes: Sizes, work: Path, deadline: float) -> None:
        self.name, self.sizes, self.work, self.deadline = name, sizes, work, deadline
        self.result: dict[str, Any] = {}

    def left(self) -> float:
        return self.deadline - time.time()

    def save(self) -> None:
        path = self.work / f"{self.name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.result, indent=1, default=str))
        os.replace(tmp, path)

    def prior(self, name: str) -> dict[str, Any]:
        """An earlier part's result ({} when it did not run or wrote nothing)."""
        path = self.work / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def log(self, msg: str) -> None:
        print(f"[{self.name} {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextmanager
def matmul_precision(tf32: bool) -> Iterator[None]:
    """fp32 matmuls on TF32 tensor cores (``high``, train.py's impl.matmul_precision=high) or strict fp32."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


# ---------------------------------------------------------------- part env


def part_env(p: Part) -> None:
    import lightning
    import transformers

    r = p.result
    r.update(python=platform.python_version(), torch=torch.__version__, cuda=torch.version.cuda,
             cudnn=torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
             lightning=lightning.__version__, transformers=transformers.__version__,
             cpus=os.cpu_count(), host=platform.node(), device=p.sizes.device)
    try:
        import hydra
        import omegaconf
        r.update(hydra=hydra.__version__, omegaconf=omegaconf.__version__)
    except ImportError as e:
        r["hydra"] = f"missing ({e})"
    if p.sizes.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        r.update(gpu=props.name, gpu_memory_gib=props.total_memory / 2**30, sms=props.multi_processor_count,
                 capability=f"{props.major}.{props.minor}", bf16=torch.cuda.is_bf16_supported())
        try:
            q = "driver_version,name,memory.total,clocks.max.sm,power.limit"
            out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=15)
            r["nvidia_smi"] = out.stdout.strip() or out.stderr.strip()
            r["driver"] = r["nvidia_smi"].split(",")[0].strip()
        except (OSError, subprocess.TimeoutExpired) as e:
            r["nvidia_smi"] = f"failed: {e}"
    else:
        r.update(gpu=None, bf16="cpu autocast")
    p.save()
    r["sdpa"] = sdpa_backends(p.sizes.device)
    p.save()


def sdpa_backends(device: str) -> dict[str, str]:
    """Which scaled-dot-product-attention kernels run a causal bf16 (GPU) / fp32 (CPU) attention here."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, k, v = (torch.randn(2, 12, 512 if device == "cuda" else 16, 64, device=device, dtype=dtype) for _ in range(3))
    out = {}
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            out[name.lower()] = "not in this torch"
            continue
        with warnings.catch_warnings(record=True) as why:  # torch says why a kernel was refused in a warning
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(backend):
                    torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
                sync(device)
                out[name.lower()] = "ok"
            except RuntimeError as e:
                reasons = [str(w.message) for w in why]  # on CUDA: "... not used because ..."
                reason = next((m for m in reasons if "because" in m), reasons[0] if reasons else str(e))
                out[name.lower()] = "no (" + reason.splitlines()[0][:100] + ")"
    return out


# ---------------------------------------------------------------- part gemm


def matmul_flops(n: int, dtype: torch.dtype, device: str, seconds: float) -> float:
    """FLOP/s of n×n×n matmuls, synchronised before and after the timed run (GPU launches are asynchronous)."""
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    sync(device)
    t0 = time.perf_counter()
    a @ b
    sync(device)
    reps = max(3, int(seconds / max(time.perf_counter() - t0, 1e-6)))
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t0)


def nominal_for(gpu: str | None) -> dict[str, float] | None:
    return next((v for k, v in NOMINAL_TFLOPS.items() if gpu and k in gpu), None)


def part_gemm(p: Part) -> None:
    s, r = p.sizes, p.result
    gpu = torch.cuda.get_device_name(0) if s.device == "cuda" else None
    nominal = nominal_for(gpu)
    r.update(n=s.gemm_n, seconds=s.gemm_s, gpu=gpu, nominal_tflops=nominal, nominal_source=NOMINAL_SOURCE)
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True),
                              ("fp32", torch.float32, False)):
        with matmul_precision(tf32):
            best = max(matmul_flops(s.gemm_n, dtype, s.device, s.gemm_s) for _ in range(2))
        r[name] = {"tflops": best / 1e12, "of_nominal": best / 1e12 / nominal[name] if nominal else None}
        p.log(f"{name} {best / 1e12:.4g} TFLOP/s" + (f" ({r[name]['of_nominal']:.0%} of nominal)" if nominal else ""))
        p.save()


def peaks_of(p: Part) -> dict[str, float]:
    """Measured FLOP/s per precision from part gemm, or probed now (shortly) if it did not run."""
    g = p.prior("gemm")
    out = {k: g[k]["tflops"] * 1e12 for k in ("bf16", "tf32") if isinstance(g.get(k), dict)}
    for name, dtype, tf32 in (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True)):
        if name not in out:
            with matmul_precision(tf32):
                out[name] = matmul_flops(p.sizes.gemm_n, dtype, p.sizes.device, p.sizes.gemm_s / 2)
    return out


# ---------------------------------------------------------------- part step


@dataclass(frozen=True)
class StepCase:
    impl: str  # ours | hf
    ffn: str
    precision: str  # tf32 (32-true on TF32 tensor cores) | bf16-mixed
    compile: bool
    model: str
    seq: int

    @property
    def label(self) -> str:
        return f"{self.impl} {self.model} {self.ffn} {self.precision}{' compile' if self.compile else ''}"


def largest_batch(fits: Callable[[int], bool], start: int, top: int) -> int | None:
    """The largest of start, 2·start, 4·start, … ≤ top for which ``fits`` holds (doubling; None if none)."""
    best, b = None, start
    while b <= top and fits(b):
        best, b = b, 2 * b
    return best


def is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def build_step(case: StepCase, batch: int, vocab: int, device: str) -> tuple[Callable[[torch.Tensor], None], int]:
    """benchmark.py's training step for this case: (step(batch), training FLOPs per token)."""
    from ffn_zoo.tools.benchmark import Case, build_hf, build_ours

    bench = Case(case.model, case.ffn, case.seq, batch, "32-true" if case.precision == "tf32" else case.precision)
    torch.manual_seed(0)
    if case.impl == "hf":
        return build_hf(bench, vocab, device)
    return build_ours(bench, vocab, device, case.compile)


def host_syncs(step: Callable[[torch.Tensor], None], batch: torch.Tensor, device: str) -> int | None:
    """CUDA's sync debug mode counts the synchronising calls one step makes (None off CUDA)."""
    if device != "cuda":
        return None
    sync(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step(batch)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    sync(device)
    return sum("synchroniz" in str(w.message) for w in caught)


def measure(case: StepCase, batch: int, s: Sizes, peaks: dict[str, float], nominal: dict[str, float] | None,
            check_syncs: bool = False) -> dict[str, Any]:
    """One case: build, warm up (compile), then ``repeats`` × ``steps`` timed steps, synchronised per repeat."""
    device = s.device
    with matmul_precision(case.precision == "tf32"):
        t0 = time.perf_counter()
        step, flops = build_step(case, batch, s.vocab, device)
        gen = torch.Generator(device=device).manual_seed(0)
        batches = [torch.randint(0, s.vocab, (batch, case.seq + 1), device=device, generator=gen)  # (B, T + 1)
                   for _ in range(2)]
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        for i in range(s.warmup):
            step(batches[i % 2])
        sync(device)
        warmup_s = time.perf_counter() - t0
        syncs = host_syncs(step, batches[0], device) if check_syncs else None
        tps = []
        for _ in range(s.repeats):
            sync(device)
            t1 = time.perf_counter()
            for i in range(s.steps):
                step(batches[i % 2])
            sync(device)
            tps.append(s.steps * batch * case.seq / (time.perf_counter() - t1))
    med = statistics.median(tps)
    peak_key = "bf16" if case.precision == "bf16-mixed" else "tf32"
    row = {**asdict(case), "batch": batch, "tokens_per_s": med, "repeats": tps,
           "spread": (max(tps) - min(tps)) / med, "step_ms": 1e3 * batch * case.seq / med,
           "flops_per_token": flops, "mfu": med * flops / peaks[peak_key],
           "mfu_nominal": med * flops / (nominal[peak_key] * 1e12) if nominal else None,
           "peak_mem_gib": torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
           "warmup_s": warmup_s, "host_syncs_per_step": syncs}
    del step, batches
    free_memory()
    return row


def measure_fitting(case: StepCase, batch: int, s: Sizes, peaks: dict[str, float],
                    nominal: dict[str, float] | None, **kw: Any) -> dict[str, Any]:
    """``measure``, halving the batch on OOM (at most twice): fp32 activations need twice bf16's memory."""
    for attempt in range(3):
        try:
            return measure(case, batch, s, peaks, nominal, **kw)
        except RuntimeError as e:
            if not is_oom(e) or attempt == 2:
                raise
        free_memory()
        batch //= 2
    raise AssertionError("unreachable")


def step_cases(s: Sizes) -> list[StepCase]:
    """In priority order: a part that runs out of time drops the tail."""
    big = lambda impl, ffn, prec, comp: StepCase(impl, ffn, prec, comp, s.model, s.seq)  # noqa: E731
    mini = lambda comp: StepCase("ours", "gelu", "bf16-mixed", comp, s.glu_model, glu_seq(s))  # noqa: E731
    # first what later parts use (the mini step sizes part glu, the compiled step is part train's reference)
    cases = [big("ours", "gelu", "bf16-mixed", False), big("hf", "gelu", "bf16-mixed", False), mini(False)]
    cases += [big("ours", "gelu", "bf16-mixed", True)] if s.compile else []
    cases += [big("ours", "gelu", "tf32", False), big("ours", "geglu", "bf16-mixed", False),
              big("ours", "swiglu", "bf16-mixed", False), big("hf", "gelu", "tf32", False)]
    if s.compile:
        cases += [big("ours", "geglu", "bf16-mixed", True), big("ours", "swiglu", "bf16-mixed", True),
                  mini(True), big("ours", "gelu", "tf32", True)]
    return cases


def part_step(p: Part) -> None:
    s, r = p.sizes, p.result
    peaks = peaks_of(p)
    nominal = nominal_for(torch.cuda.get_device_name(0) if s.device == "cuda" else None)
    r.update(peaks_tflops={k: v / 1e12 for k, v in peaks.items()}, rows=[], skipped=[], errors=[])

    def attempt(b: int) -> None:
        step, _ = build_step(StepCase("ours", "gelu", "bf16-mixed", False, s.model, s.seq), b, s.vocab, s.device)
        x = torch.randint(0, s.vocab, (b, s.seq + 1), device=s.device)  # (B, T + 1)
        for _ in range(2):  # the second step holds the optimizer state too
            step(x)
        sync(s.device)

    def fits(b: int) -> bool:
        try:
            attempt(b)
            ok = True
        except RuntimeError as e:
            if not is_oom(e):
                raise
            ok = False
        free_memory()  # after attempt's frame (and the exception's traceback) let go of its tensors
        p.log(f"batch {b}: {'fits' if ok else 'OOM'}")
        return ok

    t0 = time.perf_counter()
    batch = largest_batch(fits, s.batch_start, s.batch_max)
    r.update(batch=batch, batch_search_s=time.perf_counter() - t0,
             batch_rule=f"doubling from {s.batch_start} up to {s.batch_max} (bf16-mixed, gelu, eager)")
    p.save()
    if batch is None:
        raise RuntimeError(f"not even batch {s.batch_start} fits")
    for i, case in enumerate(step_cases(s)):
        if p.left() < 20 + (60 if case.compile else 0):  # BERT-base compiles in ~40-60 s (not measured here yet)
            r["skipped"].append(case.label)
            continue
        b = batch if case.model == s.model else s.glu_batch
        try:
            row = measure_fitting(case, b, s, peaks, nominal, check_syncs=i == 0)
        except Exception as e:  # one case's failure is a finding, not the end of the part
            r["errors"].append(f"{case.label}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
            free_memory()
            continue
        r["rows"].append(row)
        p.log(f"{case.label} B={row['batch']}: {row['tokens_per_s']:,.0f} tok/s, MFU {row['mfu']:.2f}, "
              f"warm-up {row['warmup_s']:.1f} s")
        p.save()
    r["ratios"] = step_ratios(r["rows"])
    p.save()


def step_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ours / HF (same precision, eager), gated / GELU and compile / eager step times, from the rows."""
    def find(**kw: Any) -> dict[str, Any] | None:
        return next((x for x in rows if all(x[k] == v for k, v in kw.items())), None)

    out = []
    for row in rows:
        key = {k: row[k] for k in ("model", "seq", "precision")}
        if row["impl"] == "hf":
            ours = find(impl="ours", ffn="gelu", compile=False, **key)
            if ours:
                out.append({"what": f"ours / HF GPT-2 tokens/s, {row['precision']}", "value":
                            ours["tokens_per_s"] / row["tokens_per_s"], "batches": [ours["batch"], row["batch"]]})
        elif row["ffn"] != "gelu":
            dense = find(impl="ours", ffn="gelu", compile=row["compile"], **key)
            if dense:
                out.append({"what": f"{row['ffn']} / gelu step time, {row['precision']}"
                            f"{' compiled' if row['compile'] else ''}", "value": dense["tokens_per_s"] /
                            row["tokens_per_s"], "batches": [row["batch"], dense["batch"]]})
        elif row["compile"]:
            eager = find(impl="ours", ffn="gelu", compile=False, **key)
            if eager:
                out.append({"what": f"compile / eager tokens/s, {row['model']} {row['precision']}", "value":
                            row["tokens_per_s"] / eager["tokens_per_s"], "batches": [row["batch"], eager["batch"]]})
    return out


# ---------------------------------------------------------------- part train


def train_command(overrides: list[str]) -> list[str]:
    return [sys.executable, str(REPO / "train.py"), *overrides]


def run_logged(cmd: list[str], log: Path, timeout: float) -> int | None:
    """Run ``cmd`` (its own process group) with output to ``log``: its return code, None if killed at ``timeout``."""
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                                env=child_env())
        return finish_child(proc, timeout)


def child_env() -> dict[str, str]:
    """This checkout first on the path (the device box has no install), then whatever was there (carried wheels)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "1", "PYTHONPATH": path}


def bare_reference(step: dict[str, Any], s: Sizes) -> dict[str, Any] | None:
    """Part step's row that part train's run repeats without Lightning: ours, gelu, bf16-mixed, compiled as part
    train is (else the eager row, and the report says so)."""
    rows = [x for x in step.get("rows", []) if x["impl"] == "ours" and x["ffn"] == "gelu" and
            x["precision"] == "bf16-mixed" and x["model"] == s.model]
    return next((x for x in rows if x["compile"] == s.compile), rows[0] if rows else None)


def part_train(p: Part) -> None:
    s, r = p.sizes, p.result
    ref = bare_reference(p.prior("step"), s)
    batch = ref["batch"] if ref else s.batch_start  # the bare step's batch, so the two compare
    n, half = s.train_steps, s.train_steps // 2
    root = p.work / "train"
    overrides = [
        f"model={s.model}", "ffn=gelu", "data=toy", f"data.vocab_size={s.vocab}", f"model.seq_len={s.seq}",
        f"data.seq_len={s.seq}", f"data.batch_size={batch}", f"data.train_tokens={2 * n * batch * (s.seq + 1)}",
        f"data.val_tokens={8 * s.seq * 8}", f"trainer={'cpu' if s.dry_run else 'gpu'}",
        "impl.precision=bf16-mixed", f"impl.compile={str(s.compile).lower()}", f"trainer.max_steps={n}",
        # validation at the end only: the killed run need not compile the eval graph
        f"trainer.val_check_interval={n}", f"checkpoint.every_n_steps={half}", "trainer.log_every_n_steps=10",
        "trainer.enable_progress_bar=false", f"log_dir={root}",
    ]
    r.update(batch=batch, steps=n, overrides=overrides, command="python train.py " + " ".join(overrides))
    t0 = time.perf_counter()
    rc = run_logged(train_command([*overrides, f"debug.kill_at_step={half}"]), p.work / "train_a.log",
                    p.left() * 0.55)  # the resumed run compiles from inductor's cache: a little faster
    runs = sorted(root.glob("runs/*"))
    ckpt = runs[-1] / "checkpoints" / "last.ckpt" if runs else None
    killed_at = torch.load(ckpt, map_location="cpu", weights_only=True)["global_step"] if ckpt and ckpt.is_file() \
        else None
    r.update(killed_rc=rc, killed_wall_s=time.perf_counter() - t0, checkpoint_step=killed_at,
             killed_as_planned=rc == -signal.SIGKILL and killed_at == half)
    p.save()
    t0 = time.perf_counter()
    rc = run_logged(train_command([*overrides, "ckpt_path=last"]), p.work / "train_b.log", p.left() - 5)
    r.update(resumed_rc=rc, resumed_wall_s=time.perf_counter() - t0)
    done = [d for d in sorted(root.glob("runs/*")) if (d / "metrics.json").is_file()]
    if rc != 0 or not done:
        tail = (p.work / "train_b.log").read_text()[-1500:]
        raise RuntimeError(f"resumed train.py exited {rc}:\n{tail}")
    m = json.loads((done[-1] / "metrics.json").read_text())
    r["metrics"] = {k: m.get(k) for k in ("status", "steps", "val_loss", "val_ppl", "train_tokens_per_s",
                                          "resumed_from", "wall_s", "tokens_seen")}
    r["learned"] = m.get("val_loss") is not None and m["val_loss"] < math.log(s.vocab)  # below uniform
    r["resumed_ok"] = m.get("status") == "ok" and m.get("steps") == n and bool(m.get("resumed_from"))
    r["best_ckpt"] = (done[-1] / "checkpoints" / "best.ckpt").is_file()
    if ref and m.get("train_tokens_per_s"):
        r["bare_step"] = {"tokens_per_s": ref["tokens_per_s"], "batch": ref["batch"], "compile": ref["compile"]}
        r["vs_bare_step"] = m["train_tokens_per_s"] / ref["tokens_per_s"] if ref["batch"] == batch else None
    p.save()


# ---------------------------------------------------------------- part glu


def wiki_dir() -> Path | None:
    """The Wikipedia shards: carried into .device/wikipedia-en for the GPU box, else ../shared/data beside us."""
    for d in (REPO / ".device" / "wikipedia-en", REPO.parent / "shared" / "data" / "wikipedia-en"):
        if sorted(d.glob("train-*.jsonl.gz")) and (d / "validation-00000.jsonl.gz").is_file():
            return d
    return None


def glu_data(s: Sizes, cache: Path) -> list[str]:
    """data overrides of part glu: data=wikipedia on the first ``glu_shards`` shards (toy if none are here).
    The files are named again because experiment=glu_variants_cpu sets its own C4 ones."""
    d = wiki_dir()
    if d is None:
        return ["data=toy", f"data.val_tokens={s.glu_val_tokens}"]  # dry run without ../shared: still runs
    out = ["data=wikipedia", f"data.root={d}", f"data.train_files={d}/train-*.jsonl.gz",
           f"data.val_files={d}/validation-*.jsonl.gz", f"data.train_shards={s.glu_shards}",
           f"data.cache_dir={cache}", f"data.val_tokens={s.glu_val_tokens}",
           f"tokenizer.train_docs={s.glu_tokenizer_docs}", f"tokenizer.vocab_size={s.glu_tokenizer_vocab}"]
    return out + ([f"data.train_docs={s.glu_train_docs}"] if s.glu_train_docs else [])


def glu_budget(tokens_per_s: float, window_s: float, runs: int, concurrency: int, gain: float,
               s: Sizes) -> tuple[int, float]:
    """Steps per run (a multiple of 6: six whole-split validations) the window fits, and the aggregate tokens/s
    assumed behind it: one process trains at ``tokens_per_s`` (part step's bare mini step), ``concurrency`` of
    them together ``gain`` times faster (a guess; the report measures it). Capped at 50x the CPU table."""
    aggregate = tokens_per_s * (gain if concurrency > 1 else 1.0)
    tokens = min(aggregate * window_s / runs, s.glu_tokens_cap)
    return 6 * max(1, int(tokens // (6 * s.glu_batch * glu_seq(s)))), aggregate


def job_groups(ffns: tuple[str, ...], seeds: tuple[int, ...], concurrency: int) -> list[tuple[list[str], int]]:
    """Split the ffn × seed jobs into ≤ ``concurrency`` Cartesian groups, each one ``train.py -m`` process."""
    per_seed = max(1, min(len(ffns), concurrency // len(seeds)))
    chunk = math.ceil(len(ffns) / per_seed)
    return [(list(ffns[i: i + chunk]), seed) for seed in seeds for i in range(0, len(ffns), chunk)]


def glu_seq(s: Sizes) -> int:
    return s.seq if s.dry_run else 128  # the CPU recipe's context


def glu_base(s: Sizes, root: Path) -> list[str]:
    """train.py overrides every run of part glu shares: experiment=glu_variants_cpu on the Wikipedia shards."""
    data = glu_data(s, root / "cache")
    preset = "glu_variants_toy" if data[0] == "data=toy" else "glu_variants_cpu"
    return [f"experiment={preset}", f"model={s.glu_model}", f"model.seq_len={glu_seq(s)}",
            f"data.batch_size={s.glu_batch}", *data, "impl.precision=bf16-mixed",
            f"trainer.accelerator={'cpu' if s.dry_run else 'gpu'}", "trainer.enable_progress_bar=false",
            "impl.threads=2", f"log_dir={root}"]


def part_prep(p: Part) -> None:
    """Part glu's corpus (BPE + packing, CPU only), cached once for all its runs; started in the background
    at the beginning of the check, while the GPU parts run."""
    from ffn_zoo.training.build import compose
    from ffn_zoo.data import build_corpus
    from omegaconf import OmegaConf

    t0 = time.perf_counter()
    corpus = build_corpus(OmegaConf.to_container(compose(glu_base(p.sizes, p.work / "glu")).data, resolve=True))
    tokens = int(len(corpus.train) * corpus.seq_len) if corpus.train is not None else 0
    p.result.update(corpus=corpus.description, corpus_train_tokens=tokens, prep_s=time.perf_counter() - t0)
    p.save()


def part_glu(p: Part) -> None:
    from ffn_zoo.analysis.compare import compare

    s, r = p.sizes, p.result
    root, seq = p.work / "glu", glu_seq(s)
    base = glu_base(s, root)
    if not p.prior("prep").get("corpus"):  # the background prep failed or did not run: do it here
        part_prep(Part("prep", s, p.work, p.deadline))
    r.update({k: v for k, v in p.prior("prep").items() if k in ("corpus", "corpus_train_tokens", "prep_s")})
    p.save()

    step = p.prior("step").get("rows", [])
    mini = next((x for x in step if x["impl"] == "ours" and x["model"] == s.glu_model and x["seq"] == seq
                 and x["batch"] == s.glu_batch and not x["compile"]), None)
    tps = mini["tokens_per_s"] if mini else (2e5 if not s.dry_run else 1e4)  # a guess when part step failed
    groups = job_groups(s.glu_ffns, s.glu_seeds, s.glu_concurrency)
    window = p.left() - 35  # startup (~10 s), the last validation, compare, a margin
    steps, aggregate = glu_budget(tps, window, len(s.glu_ffns) * len(s.glu_seeds), len(groups), s.glu_gain, s)
    vci, tokens = steps // 6, steps * s.glu_batch * seq
    r.update(step_tokens_per_s=tps, sized_from="part step, mini bf16 eager" if mini else "a guess (no step row)",
             assumed_aggregate_tokens_per_s=aggregate, window_s=window, tokens_per_run=tokens, steps=steps,
             x_cpu_table=tokens / CPU_RECIPE_TOKENS, meets_floor=tokens >= s.glu_tokens_floor,
             groups=[f"ffn={','.join(f)} seed={sd}" for f, sd in groups],
             corpus_epochs=tokens / max(r["corpus_train_tokens"], 1))
    p.log(f"{len(groups)} processes, {steps} steps x {s.glu_batch} x {seq} = {tokens / 1e6:.2f} M tokens per run "
          f"({tokens / CPU_RECIPE_TOKENS:.1f}x the CPU table)")
    p.save()

    t0 = time.perf_counter()
    procs = []
    for k, (ffns, seed) in enumerate(groups):
        cmd = train_command(["-m", *base, f"ffn={','.join(ffns)}", f"seed={seed}", f"trainer.max_steps={steps}",
                             f"trainer.val_check_interval={vci}", f"hydra.sweep.dir={root / f'g{k}'}"])
        log = open(p.work / f"glu_g{k}.log", "w")
        procs.append((subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=child_env(),
                                       start_new_session=True), log))
    r["command"] = " ".join(cmd[1:])
    stop_at = time.time() + p.left() - 15
    for proc, log in procs:
        try:
            proc.wait(timeout=max(stop_at - time.time(), 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)  # finish the step, checkpoint, metrics.json says interrupted
        log.close()
    for proc, _ in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    wall = time.perf_counter() - t0
    r.update(train_wall_s=wall, return_codes=[proc.returncode for proc, _ in procs],
             measured_aggregate_tokens_per_s=len(s.glu_ffns) * len(s.glu_seeds) * tokens / wall)
    p.save()
    report = compare([root / f"g{k}" for k in range(len(groups))], out=root / "compare", layout=False)
    r["table_md"] = (root / "compare" / "table.md").read_text()
    r["rows"] = report["rows"]
    r["problems"] = report["problems"]
    r["warnings"] = report["warnings"]
    r["pngs"] = report.get("pngs", [])
    p.save()


PART_FNS: dict[str, Callable[[Part], None]] = {
    "env": part_env, "gemm": part_gemm, "step": part_step, "train": part_train, "glu": part_glu, "prep": part_prep}


# ---------------------------------------------------------------- the orchestrator


def run_part(name: str, sizes: Sizes, work: Path, deadline: float) -> int:
    """The child: run one part, its result saved as it grows; an exception is recorded, exit code 1."""
    p = Part(name, sizes, work, deadline)
    try:
        PART_FNS[name](p)
        return 0
    except Exception as e:
        p.result["error"] = f"{type(e).__name__}: {e}"
        p.result["traceback"] = traceback.format_exc()[-4000:]
        p.save()
        traceback.print_exc()
        return 1


def start_child(name: str, sizes: Sizes, work: Path, budget: float, **env: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "ffn_zoo.tools.device_check", "--part", name, "--work", str(work),
           "--deadline", str(time.time() + budget - 5)] + (["--dry-run"] if sizes.dry_run else [])
    return subprocess.Popen(cmd, cwd=REPO, env={**child_env(), **env}, start_new_session=True)


def finish_child(proc: subprocess.Popen, timeout: float) -> int | None:
    """The child's exit code; None when it was still running at ``timeout`` and was killed, all its group."""
    try:
        return proc.wait(timeout=max(timeout, 0.1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def run_child(name: str, sizes: Sizes, work: Path, budget: float) -> dict[str, Any]:
    """A part in its own process group, killed (all of it: train.py children too) at its budget."""
    t0 = time.perf_counter()
    rc = finish_child(start_child(name, sizes, work, budget), budget)
    path = work / f"{name}.json"
    result = json.loads(path.read_text()) if path.is_file() else {}
    error = result.pop("error", None)
    status = "timeout" if rc is None else "ok" if rc == 0 and error is None else "failed"
    return {"status": status, "rc": rc, "wall_s": time.perf_counter() - t0, "budget_s": budget, "error": error,
            "result": result}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m ffn_zoo.tools.device_check", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("device_check"), help="report.json and report.md go here")
    ap.add_argument("--work", type=Path, default=None, help="runs, logs, caches (default: a temporary folder)")
    ap.add_argument("--dry-run", action="store_true", help="every part on the CPU at tiny sizes (< 1 min)")
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS, help="a subset, e.g. to re-run one")
    ap.add_argument("--part", choices=list(PART_FNS), help=argparse.SUPPRESS)  # the child
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the parts, write and print the report; exit code 0 when every part passed."""
    args = parse_args(argv)
    sizes = DRY if args.dry_run else GPU
    if args.part:
        return run_part(args.part, sizes, args.work, args.deadline)
    if not args.dry_run and not torch.cuda.is_available():
        print("error: no CUDA device; the check needs a GPU (--dry-run runs it on the CPU at tiny sizes)",
              file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="ffnzoo-device-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                              "dry_run": sizes.dry_run, "sizes": asdict(sizes), "work": str(work), "parts": {}}
    t0 = time.perf_counter()
    # part glu's tokenization needs no GPU: it runs beside the GPU parts, on a share of the cores
    cores = str(max(1, (os.cpu_count() or 2) // 4))
    prep = start_child("prep", sizes, work, sizes.budgets["glu"], CUDA_VISIBLE_DEVICES="", RAYON_NUM_THREADS=cores,
                       OMP_NUM_THREADS=cores) if "glu" in args.parts else None
    for name in args.parts:
        if name == "glu" and prep is not None:
            report["prep_rc"] = finish_child(prep, sizes.budgets["glu"] / 3)  # killed: part glu does it itself
        print(f"== part {name} (budget {sizes.budgets[name]:.0f} s)", flush=True)
        report["parts"][name] = run_child(name, sizes, work, sizes.budgets[name])
        report["wall_s"] = time.perf_counter() - t0
        write_report(report, args.out, work)
    print((args.out / "report.md").read_text())
    return int(any(part["status"] != "ok" for part in report["parts"].values()))


def write_report(report: dict[str, Any], out: Path, work: Path) -> None:
    from ffn_zoo.tools.device_report import markdown

    (out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "report.md").write_text(markdown(report))
    png = work / "glu" / "compare" / "loss_curves.png"
    if png.is_file():
        (out / "glu_loss_curves.png").write_bytes(png.read_bytes())


if __name__ == "__main__":
    sys.exit(main())
