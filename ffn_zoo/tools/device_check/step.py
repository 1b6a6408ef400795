"""Part step: our training step (the benchmark's) at BERT-base shape, seq 512, at the largest batch that fits.

Doubled until OOM; then TF32 vs bf16-mixed, eager vs torch.compile: tokens/s, MFU against part gemm's measured
peak, peak memory, host syncs in the step; HF GPT-2 of the same shape (ratio); GEGLU, SwiGLU vs GELU. The eager bf16
GELU step sizes part glu's ladders.
"""

from __future__ import annotations

import statistics
import time
import warnings
from dataclasses import dataclass, field, replace
from typing import Callable

import torch

from ffn_zoo.tools.device_check.gemm import GemmResult, gpu_name, nominal_for, peaks_of
from ffn_zoo.tools.device_check.part import Part, free_memory, matmul_precision, sync
from ffn_zoo.tools.device_check.sizes import Sizes


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


@dataclass
class StepRow:
    """One case measured: median tokens/s over the repeats and what follows from it."""

    case: StepCase
    batch: int
    tokens_per_s: float
    repeats: list[float]  # tokens/s of each repeat
    spread: float  # (max - min) / median of the repeats
    step_ms: float
    flops_per_token: float
    mfu: float  # against the measured peak of the precision
    mfu_nominal: float | None  # against the datasheet's
    peak_mem_gib: float | None  # CUDA only
    warmup_s: float  # build + warm-up steps (the compile)
    host_syncs_per_step: int | None  # CUDA's sync debug mode; the first case only


@dataclass
class Ratio:
    what: str
    value: float
    batches: list[int]  # the two rows' batches


@dataclass
class StepResult:
    peaks_tflops: dict[str, float] = field(default_factory=dict)
    batch: int | None = None
    batch_search_s: float | None = None
    batch_rule: str | None = None
    rows: list[StepRow] = field(default_factory=list)
    ratios: list[Ratio] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def row(self, case: StepCase) -> StepRow | None:
        return next((x for x in self.rows if x.case == case), None)


def reference_case(s: Sizes, compile_: bool) -> StepCase:
    """The big-shape bf16 GELU step: sizes the batch; part train repeats it with Lightning around it."""
    return StepCase("ours", "gelu", "bf16-mixed", compile_, s.model, s.seq)


def step_cases(s: Sizes) -> list[StepCase]:
    """In priority order: a part that runs out of time drops the tail."""
    big = lambda impl, ffn, prec, comp: StepCase(impl, ffn, prec, comp, s.model, s.seq)  # noqa: E731
    # first what later parts use (the eager bf16 step sizes part glu, the compiled one is part train's reference)
    cases = [reference_case(s, False), big("hf", "gelu", "bf16-mixed", False)]
    cases += [reference_case(s, True)] if s.compile else []
    cases += [big("ours", "gelu", "tf32", False), big("ours", "geglu", "bf16-mixed", False),
              big("ours", "swiglu", "bf16-mixed", False), big("hf", "gelu", "tf32", False)]
    if s.compile:
        cases += [big("ours", "geglu", "bf16-mixed", True), big("ours", "swiglu", "bf16-mixed", True),
                  big("ours", "gelu", "tf32", True)]
    return cases


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
    from ffn_zoo.tools.bench_results import Case
    from ffn_zoo.tools.benchmark import build_hf, build_ours

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
            check_syncs: bool = False) -> StepRow:
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
    row = StepRow(case, batch, med, tps, spread=(max(tps) - min(tps)) / med, step_ms=1e3 * batch * case.seq / med,
                  flops_per_token=flops, mfu=med * flops / peaks[peak_key],
                  mfu_nominal=med * flops / (nominal[peak_key] * 1e12) if nominal else None,
                  peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None,
                  warmup_s=warmup_s, host_syncs_per_step=syncs)
    del step, batches
    free_memory()
    return row


def measure_fitting(case: StepCase, batch: int, s: Sizes, peaks: dict[str, float],
                    nominal: dict[str, float] | None, check_syncs: bool = False) -> StepRow:
    """``measure``, halving the batch on OOM (at most twice): fp32 activations need twice bf16's memory."""
    for attempt in range(3):
        try:
            return measure(case, batch, s, peaks, nominal, check_syncs)
        except RuntimeError as e:
            if not is_oom(e) or attempt == 2:
                raise
        free_memory()
        batch //= 2
    raise AssertionError("unreachable")


def search_batch(p: Part[StepResult]) -> int | None:
    """The largest batch at which the reference step runs (None: not even the first)."""
    s = p.sizes

    def attempt(b: int) -> None:
        step, _ = build_step(reference_case(s, False), b, s.vocab, s.device)
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

    return largest_batch(fits, s.batch_start, s.batch_max)


def run(p: Part[StepResult]) -> None:
    s, r = p.sizes, p.result
    peaks = peaks_of(p, p.prior("gemm", GemmResult))
    nominal = nominal_for(gpu_name(s))
    r.peaks_tflops = {k: v / 1e12 for k, v in peaks.items()}
    t0 = time.perf_counter()
    r.batch = search_batch(p)
    r.batch_search_s = time.perf_counter() - t0
    r.batch_rule = f"doubling from {s.batch_start} up to {s.batch_max} (bf16-mixed, gelu, eager)"
    p.save()
    if r.batch is None:
        raise RuntimeError(f"not even batch {s.batch_start} fits")
    for i, case in enumerate(step_cases(s)):
        if p.left() < 20 + (60 if case.compile else 0):  # BERT-base compiles in ~40-60 s (not measured here yet)
            r.skipped.append(case.label)
            continue
        try:
            row = measure_fitting(case, r.batch, s, peaks, nominal, check_syncs=i == 0)
        except Exception as e:  # one case's failure is a finding, not the end of the part
            r.errors.append(f"{case.label}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
            free_memory()
            continue
        r.rows.append(row)
        p.log(f"{case.label} B={row.batch}: {row.tokens_per_s:,.0f} tok/s, MFU {row.mfu:.2f}, "
              f"warm-up {row.warmup_s:.1f} s")
        p.save()
    r.ratios = step_ratios(r)
    p.save()


def step_ratios(r: StepResult) -> list[Ratio]:
    """ours / HF (same precision, eager), gated / GELU and compile / eager tokens/s, from the rows."""
    out = []
    for row in r.rows:
        c = row.case
        if c.impl == "hf":
            ours = r.row(replace(c, impl="ours", ffn="gelu", compile=False))
            if ours:
                out.append(Ratio(f"ours / HF GPT-2 tokens/s, {c.precision}", ours.tokens_per_s / row.tokens_per_s,
                                 [ours.batch, row.batch]))
        elif c.ffn != "gelu":
            dense = r.row(replace(c, ffn="gelu"))
            if dense:
                out.append(Ratio(f"{c.ffn} / gelu step time, {c.precision}{' compiled' if c.compile else ''}",
                                 dense.tokens_per_s / row.tokens_per_s, [row.batch, dense.batch]))
        elif c.compile:
            eager = r.row(replace(c, compile=False))
            if eager:
                out.append(Ratio(f"compile / eager tokens/s, {c.model} {c.precision}",
                                 row.tokens_per_s / eager.tokens_per_s, [row.batch, eager.batch]))
    return out
