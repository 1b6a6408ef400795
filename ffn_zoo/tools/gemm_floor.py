"""A training step's GEMM floor: the step's own matrix multiplies, timed alone, back to back.

``ffn-zoo-bench --gemm-floor`` profiles one step of ours (torch.profiler, input shapes recorded), takes every
matmul call it lists, forward and backward, in order (``aten::mm``, ``addmm``, ``addmm_``, ``bmm``, ``baddbmm``; a call
inside another of them is counted once, at the outer one), and replays exactly those calls on random tensors of
the same shapes and dtype. The step's time ÷ that replay's time says how far the step is from doing nothing but
its GEMMs, on the shapes actually trained: the most any speed-up outside the GEMMs could still give.

The replay reuses one tensor per shape and uses contiguous inputs (the profiler records shapes, not strides), so
it sees caches at least as warm as the step does: the floor is, if anything, low.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm")
ACCUMULATE = ("aten::addmm", "aten::addmm_", "aten::baddbmm")  # (self, a, b): the product's operands come second


@dataclass(frozen=True)
class Gemm:
    op: str                                  # e.g. aten::addmm
    shapes: tuple[tuple[int, ...], ...]      # its tensor inputs' shapes, as the profiler lists them (mm's out= too)

    def operands(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The shapes of the two factors: after the accumulator of addmm and baddbmm, before mm's ``out=``."""
        return (self.shapes[1], self.shapes[2]) if self.op in ACCUMULATE else (self.shapes[0], self.shapes[1])

    def flops(self) -> int:
        """2·M·N·K (times the batch for bmm): the multiply-adds of the product itself."""
        (*batch, m, k), (*_, n) = self.operands()
        return 2 * m * n * k * (batch[0] if batch else 1)


@dataclass
class Profiled:
    gemms: list[Gemm]        # in call order
    gemm_share: float        # of the profiled step's wall time spent in these calls (profiler overhead included)


def _inside_gemm(event: object) -> bool:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if parent.name in GEMM_OPS:
            return True
        parent = parent.cpu_parent
    return False


def profile_gemms(step: Callable[[], object]) -> Profiled:
    """The matmul calls of one ``step()`` (forward and backward), as torch.profiler lists them."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        t0 = time.perf_counter()
        step()
        wall_us = (time.perf_counter() - t0) * 1e6
    events = sorted((e for e in prof.events() if e.name in GEMM_OPS and not _inside_gemm(e)),
                    key=lambda e: e.time_range.start)
    gemms = [Gemm(e.name, tuple(tuple(s) for s in e.input_shapes if s)) for e in events]  # [] = a scalar argument
    return Profiled(gemms, sum(e.cpu_time_total for e in events) / wall_us if wall_us else 0.0)


def replay(gemms: list[Gemm], dtype: torch.dtype, device: str) -> Callable[[], None]:
    """A function that makes exactly these calls, back to back, on random inputs of their shapes."""
    tensors: dict[tuple[int, ...], torch.Tensor] = {}
    calls = []
    for g in gemms:
        args = [tensors.setdefault(s, torch.randn(s, dtype=dtype, device=device)) for s in g.shapes]
        name = g.op.split("::")[1]
        if name.endswith("_"):  # in place on its first argument (the fused loss's gradient accumulation)
            calls.append((getattr(torch.Tensor, name), args, {}))
        elif g.op not in ACCUMULATE and len(args) == 3:  # mm(a, b, out=c): the product written into a kept buffer
            calls.append((getattr(torch, name), args[:2], {"out": args[2]}))
        else:
            calls.append((getattr(torch, name), args, {}))

    def run() -> None:
        for fn, args, kwargs in calls:
            fn(*args, **kwargs)
        if device != "cpu":
            torch.cuda.synchronize()

    return run


def describe(p: Profiled) -> str:
    """One line: how many GEMM calls, how many distinct shapes, their FLOPs, their share of the profiled step."""
    return (f"{len(p.gemms)} GEMM calls ({len(set(p.gemms))} distinct), "
            f"{sum(g.flops() for g in p.gemms) / 1e9:.2f} GFLOP, {p.gemm_share:.0%} of the profiled step")
