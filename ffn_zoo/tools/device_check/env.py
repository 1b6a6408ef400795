"""Part env: GPU name, memory, SMs, driver, CUDA, cuDNN, torch and library versions, bf16, the SDPA backends that run."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ffn_zoo.tools.device_check.part import Part, sync


@dataclass
class EnvResult:
    package: str | None = None  # the ffn_zoo the parts run: its version and folder
    python: str | None = None
    torch: str | None = None
    cuda: str | None = None
    cudnn: int | None = None
    lightning: str | None = None
    transformers: str | None = None
    hydra: str | None = None  # "missing (...)" where it does not import
    omegaconf: str | None = None
    cpus: int | None = None
    host: str | None = None
    device: str | None = None
    gpu: str | None = None
    gpu_memory_gib: float | None = None
    sms: int | None = None
    capability: str | None = None
    bf16: bool | str | None = None  # "cpu autocast" off CUDA
    nvidia_smi: str | None = None
    driver: str | None = None
    sdpa: dict[str, str] = field(default_factory=dict)  # kernel -> ok | no (why)


def run(p: Part[EnvResult]) -> None:
    import lightning
    import transformers

    r, device = p.result, p.sizes.device
    r.package = package_origin()
    r.python, r.torch, r.cuda = platform.python_version(), torch.__version__, torch.version.cuda
    r.cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    r.lightning, r.transformers = lightning.__version__, transformers.__version__
    r.cpus, r.host, r.device = os.cpu_count(), platform.node(), device
    try:
        import hydra
        import omegaconf
        r.hydra, r.omegaconf = hydra.__version__, omegaconf.__version__
    except ImportError as e:
        r.hydra = f"missing ({e})"
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        r.gpu, r.gpu_memory_gib, r.sms = props.name, props.total_memory / 2**30, props.multi_processor_count
        r.capability, r.bf16 = f"{props.major}.{props.minor}", torch.cuda.is_bf16_supported()
        r.nvidia_smi, r.driver = nvidia_smi()
    else:
        r.bf16 = "cpu autocast"
    p.save()
    r.sdpa = sdpa_backends(device)
    p.save()


def package_origin() -> str:
    """The ffn_zoo the parts import: its distribution's version (if any) and its folder."""
    import ffn_zoo

    try:
        v = importlib.metadata.version("ffn-zoo")
    except importlib.metadata.PackageNotFoundError:
        v = "(no distribution)"
    return f"ffn-zoo {v} at {Path(ffn_zoo.__file__).resolve().parent}"


def nvidia_smi() -> tuple[str, str | None]:
    """nvidia-smi's one line on GPU 0 (or why it failed) and the driver version in it."""
    q = "driver_version,name,memory.total,clocks.max.sm,power.limit"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"failed: {e}", None
    line = out.stdout.strip() or out.stderr.strip()
    return line, line.split(",")[0].strip() if out.returncode == 0 else None


def sdpa_backends(device: str) -> dict[str, str]:
    """Which scaled-dot-product-attention kernels run a causal bf16 (GPU) / fp32 (CPU) attention here."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    q, k, v = (torch.randn(2, 12, 512 if device == "cuda" else 16, 64, device=device, dtype=dtype)  # (B, H, T, hd)
               for _ in range(3))
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
