"""``impl.precision``: the accepted values, what this CPU can do in bf16, and what ``auto`` picks.

bf16-mixed is only fast where the hardware has bf16 units: on a CPU, AMX tiles (Intel Sapphire Rapids on) or
AVX-512 BF16 dot products (AMD Zen 4 on, Intel Cooper Lake); elsewhere oneDNN emulates it, several times slower than
fp32. ``auto`` is bf16-mixed on a GPU and on a CPU with either, fp32 (32-true) elsewhere. A run records the precision
it actually used in metrics.json (``precision``), so ``auto`` never hides what ran.
"""

from __future__ import annotations

from pathlib import Path

from ffn_zoo.errors import ConfigError

PRECISIONS = ("32-true", "bf16-mixed", "16-mixed", "auto")  # what impl.precision accepts (Lightning's names + auto)
NATIVE_BF16 = ("amx", "avx512_bf16")

# a CPU's bf16 support in words, and what bf16-mixed does there: for the banner and ffn-zoo-bench
BF16_ON_CPU = {
    "amx": "native (AMX): bf16-mixed runs the matmuls in bf16, faster than fp32",
    "avx512_bf16": "native (AVX-512 BF16): bf16-mixed runs the matmuls in bf16, faster than fp32",
    "none": "none (no AMX, no AVX-512 BF16): bf16-mixed is emulated, several times slower than fp32",
    "unknown": "unknown (no /proc/cpuinfo to read): bf16-mixed may be emulated, slower than fp32",
}


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str] | None:
    """The CPU's feature flags (Linux's first ``flags`` line); None where there is no such file."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return None
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def bf16_support(flags: set[str] | None) -> str:
    """amx | avx512_bf16 | none | unknown (no flags to read)."""
    if flags is None:
        return "unknown"
    if "amx_bf16" in flags:
        return "amx"
    return "avx512_bf16" if "avx512_bf16" in flags else "none"


def check_precision(value: str) -> None:
    if value not in PRECISIONS:
        raise ConfigError(f"impl.precision={value!r} is not one of {', '.join(PRECISIONS)} (auto: bf16-mixed on a GPU "
                          f"or a CPU with native bf16, 32-true elsewhere)")


def resolve_precision(value: str, on_gpu: bool, support: str) -> str:
    """The precision a run uses: ``value`` itself, or for ``auto`` bf16-mixed on a GPU or a CPU with bf16 units."""
    check_precision(value)
    if value != "auto":
        return value
    return "bf16-mixed" if on_gpu or support in NATIVE_BF16 else "32-true"


def run_precision(value: str, accelerator: str) -> str:
    """What a run with ``impl.precision=value`` and ``trainer.accelerator=accelerator`` trains in, on this machine."""
    import torch

    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    return resolve_precision(value, on_gpu, bf16_support(cpu_flags()))


def precision_used(value: str, resolved: str) -> str:
    """The banner's words: the precision a run uses, and where auto chose it."""
    return f"auto -> {resolved}" if value == "auto" else resolved
