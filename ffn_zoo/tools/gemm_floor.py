"""A training step's GEMM floor: the step's own matrix multiplies, timed alone, back to back.

``ffn-zoo-bench --gemm-floor`` profiles one step of ours (torch.profiler, input shapes recorded), takes every
matmul call it lists, forward and backward, in order (``aten::mm``, ``addmm``, ``addmm_``, ``bmm``, ``baddbmm``; a call
inside another of them is counted once, at the outer one), and replays exactly those calls on random tensors of
the same shapes and dtype. The step's time ÷ that replay's time says how far the step is from doing nothing but
its GEMMs, on the shapes actually trained: the most any speed-up outside the GEMMs could still give.

The replay reuses one tensor per shape and uses contiguous inputs (the profiler records shapes, not strides), so
it sees caches at least as warm as the step does: the floor is, if anything, low.

A fused attention kernel (SDPA's flash or memory-efficient path) does its products inside one call, so the
profiler lists no matmul for them and the floor above counts them as overhead. ``attention_products`` writes them
out from each such call's shapes: Q·Kᵀ and P·V forward, dV, dP, dQ and dK backward (a recomputed Q·Kᵀ is the
kernel's choice, not counted), each with half its rows under a causal mask (the least a kernel must do); SDPA's math
path runs its products as ``bmm`` calls, which the list above already has. The benchmark times them apart, so both
floors show.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
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
    attention: list[Gemm] = field(default_factory=list)  # the products fused attention calls hide (attention_products)


SDPA = "aten::scaled_dot_product_attention"  # (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def attention_products(q: tuple[int, ...], k: tuple[int, ...], v: tuple[int, ...], causal: bool) -> list[Gemm]:
    """The six batched products of one attention's forward and backward, as bmm calls over the batch × heads of
    ``q`` (..., Tq, D), ``k`` (..., Tk, D), ``v`` (..., Tk, Dv); under a causal mask each keeps half its rows."""
    bh = 1
    for n in q[:-2]:
        bh *= n
    (tq, d), tk, dv = q[-2:], k[-2], v[-1]
    half = (lambda m: (m + 1) // 2) if causal else (lambda m: m)

    def bmm(m: int, kk: int, n: int) -> Gemm:
        return Gemm("aten::bmm", ((bh, half(m), kk), (bh, kk, n)))

    return [bmm(tq, d, tk), bmm(tq, tk, dv),                     # forward: S = Q·Kᵀ, O = P·V
            bmm(tk, tq, dv), bmm(tq, dv, tk),                    # backward: dV = Pᵀ·dO, dP = dO·Vᵀ
            bmm(tq, tk, d), bmm(tk, tq, d)]                      # backward: dQ = dS·K, dK = dSᵀ·Q


def _fused_attention(event: object) -> bool:
    """An SDPA call that dispatched to a fused kernel (its products invisible), not to the math path (bmm calls)."""
    kids = [c.name for c in getattr(event, "cpu_children", [])]
    return any(n.startswith("aten::_scaled_dot_product_") and "math" not in n for n in kids)


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
    attention = []
    fused = (e for e in prof.events() if e.name == SDPA and _fused_attention(e))
    for e in sorted(fused, key=lambda e: e.time_range.start):
        q, k, v, mask = (tuple(s) for s in e.input_shapes[:4])
        flags = e.concrete_inputs
        # is_causal; a kernel skips nothing under an explicit mask, so that one counts whole
        causal = len(flags) > 5 and bool(flags[5]) and not mask
        attention += attention_products(q, k, v, causal)
    return Profiled(gemms, sum(e.cpu_time_total for e in events) / wall_us if wall_us else 0.0, attention)


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
    line = (f"{len(p.gemms)} GEMM calls ({len(set(p.gemms))} distinct), "
            f"{sum(g.flops() for g in p.gemms) / 1e9:.2f} GFLOP, {p.gemm_share:.0%} of the profiled step")
    if p.attention:
        line += (f"; fused attention's products: {len(p.attention)} bmm, "
                 f"{sum(g.flops() for g in p.attention) / 1e9:.2f} GFLOP")
    return line
