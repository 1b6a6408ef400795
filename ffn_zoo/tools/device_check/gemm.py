"""Part gemm: dense bf16, TF32 and fp32 matmul probes, the measured peak next to the vendor's nominal figure."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ffn_zoo.tools.device_check.part import Part, matmul_precision, sync
from ffn_zoo.tools.device_check.sizes import Sizes

# Dense (no sparsity) tensor-core peaks of the SXM parts, TFLOP/s. NVIDIA's H100/H200 SXM datasheets list the
# tensor-core figures with 2:4 sparsity (bf16 1979, TF32 989); dense is half of that. fp32 (no tensor cores): 67.
NOMINAL_TFLOPS = {
    "H200": {"bf16": 989.0, "tf32": 495.0, "fp32": 67.0},
    "H100": {"bf16": 989.0, "tf32": 495.0, "fp32": 67.0},
}
NOMINAL_SOURCE = ("NVIDIA H100/H200 SXM datasheets, dense: half the listed sparse bf16 1979 and TF32 989 TFLOP/s; "
                  "fp32 67")
PRECISIONS = (("bf16", torch.bfloat16, False), ("tf32", torch.float32, True), ("fp32", torch.float32, False))


@dataclass
class Probe:
    tflops: float
    of_nominal: float | None  # None: no nominal figure for this GPU


@dataclass
class GemmResult:
    n: int | None = None
    seconds: float | None = None
    gpu: str | None = None
    nominal_tflops: dict[str, float] | None = None
    nominal_source: str | None = None
    bf16: Probe | None = None
    tf32: Probe | None = None
    fp32: Probe | None = None


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


def gpu_name(s: Sizes) -> str | None:
    return torch.cuda.get_device_name(0) if s.device == "cuda" else None


def run(p: Part[GemmResult]) -> None:
    s, r = p.sizes, p.result
    r.gpu = gpu_name(s)
    r.n, r.seconds, r.nominal_tflops, r.nominal_source = s.gemm_n, s.gemm_s, nominal_for(r.gpu), NOMINAL_SOURCE
    for name, dtype, tf32 in PRECISIONS:
        with matmul_precision(tf32):
            best = max(matmul_flops(s.gemm_n, dtype, s.device, s.gemm_s) for _ in range(2)) / 1e12
        nominal = r.nominal_tflops[name] if r.nominal_tflops else None
        setattr(r, name, Probe(best, best / nominal if nominal else None))
        p.log(f"{name} {best:.4g} TFLOP/s" + (f" ({best / nominal:.0%} of nominal)" if nominal else ""))
        p.save()


def peaks_of(p: Part, gemm: GemmResult | None) -> dict[str, float]:
    """Measured FLOP/s of bf16 and TF32 from part gemm, or probed now (shortly) where it did not run."""
    out = {}
    for name, dtype, tf32 in PRECISIONS[:2]:
        probe = getattr(gemm, name) if gemm else None
        if probe is not None:
            out[name] = probe.tflops * 1e12
        else:
            with matmul_precision(tf32):
                out[name] = matmul_flops(p.sizes.gemm_n, dtype, p.sizes.device, p.sizes.gemm_s / 2)
    return out
