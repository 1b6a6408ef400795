"""``impl.flush_denormal``: subnormal floats flushed to zero on the CPU (x86 FTZ/DAZ), on every intra-op thread.

Why: as a model trains, its attention sharpens and the softmax's backward meets probabilities below fp32's smallest
normal (1.2e-38); on Intel CPUs every such operand costs a microcode assist. On a 2-core Xeon, BERT-base's SDPA
backward took 3.4× as long at step 410 as at init and the whole step ~1.2×; from that checkpoint, 5 steps with the
flag ran 1.16× faster with bitwise equal losses (docs/benchmarks.md, "Denormals"). A GPU is not affected.

The flag is per thread, and a thread inherits it from the one that starts it: it reaches the intra-op workers only
if it is set before the process's first parallel op, which is why ``train.run`` sets it first.
``denormals_flushed`` measures what actually holds.
"""

from __future__ import annotations

import torch

_PROBE_ELEMENTS = 1 << 20  # large enough that an element-wise op is split over every intra-op thread


def flush_denormals(on: bool) -> bool:
    """Set (or clear) FTZ/DAZ on the calling thread; False where the CPU has no such mode (then nothing changed).
    Threads started afterwards inherit it; threads already running keep what they had."""
    return torch.set_flush_denormal(bool(on))


def denormals_flushed() -> float:
    """The fraction of a parallel element-wise op's outputs that came out flushed: 1.0 every intra-op thread
    flushes denormals, 0.0 none does, between: some threads started before the flag was set (they keep denormals)."""
    # a subnormal fp32 (5.9e-39; the smallest normal is 1.18e-38) written as its bits: a float constant would be
    # flushed on the way in by this thread's own FTZ, and the probe would see zeros it did not make
    tiny = torch.full((_PROBE_ELEMENTS,), 1 << 22, dtype=torch.int32).view(torch.float32)
    return float(((tiny * 1.0) == 0).float().mean())  # DAZ reads the operand as 0, FTZ flushes the product


def denormals_note(on: bool, flushed: float) -> str:
    """For the banner: what ``impl.flush_denormal`` asked for against what the threads do."""
    if on and flushed == 1.0:
        return "denormals flushed (FTZ/DAZ)"
    if not on and flushed == 0.0:
        return "denormals kept (impl.flush_denormal=false)"
    if on and flushed == 0.0:
        return "denormals kept: this CPU has no flush-to-zero mode"
    return (f"denormals flushed on {flushed:.0%} of the work only: the intra-op threads started before "
            "impl.flush_denormal was set keep their own mode (set it before the process's first parallel op)")
