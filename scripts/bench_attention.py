"""Causal self-attention alone, forward + backward, at a model's training shape: SDPA's default (flash) kernel, SDPA's
math kernel, and the same product written out (q·kᵀ, mask, softmax, ·v), interleaved.

    python scripts/bench_attention.py [--model mini] [--batch 32] [--seq 128] [--repeats 7] [--threads 2]

Why it exists: attention is the largest piece of the `mini` step outside its GEMMs (docs/benchmarks.md, "The step
against its GEMM floor"), so it is the first place to look for a cheaper step. Prints each form's largest
difference from the flash kernel (output and gradients) and its median time with the spread (max − min) / median.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from ffn_zoo import build_model


def shape(model: str, seq: int) -> tuple[int, int]:
    """(heads, head width) of a model preset."""
    cfg = build_model(model, "gelu", vocab_size=256, seq_len=seq).cfg
    return cfg.n_heads, cfg.d_model // cfg.n_heads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mini")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5, help="forward + backward calls timed per repeat")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    heads, width = shape(args.model, args.seq)
    B, H, T, D = args.batch, heads, args.seq, width
    g = torch.Generator().manual_seed(0)
    qkv = torch.randn(B, T, 3, H, D, generator=g, requires_grad=True)  # the model's layout: one projection, split
    grad_out = torch.randn(B, H, T, D, generator=g)
    mask = torch.full((T, T), float("-inf")).triu(1)  # (T, T) additive causal mask

    def split() -> tuple[torch.Tensor, ...]:
        return qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 × (B, H, T, D)

    def flash() -> torch.Tensor:
        return F.scaled_dot_product_attention(*split(), is_causal=True)

    def sdpa_math() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(*split(), is_causal=True)

    def written_out() -> torch.Tensor:
        q, k, v = split()
        att = (q * (1 / math.sqrt(D))) @ k.transpose(-2, -1) + mask  # (B, H, T, T)
        return att.softmax(-1) @ v  # (B, H, T, D)

    forms = {"SDPA (flash)": flash, "SDPA math": sdpa_math, "written out": written_out}

    def run(f) -> tuple[torch.Tensor, torch.Tensor]:
        qkv.grad = None
        out = f()
        out.backward(grad_out)
        return out.detach(), qkv.grad.clone()

    ref_out, ref_grad = run(flash)
    print(f"attention of {args.model}: batch {B}, {H} heads × {D}, seq {T}, causal, fp32, {args.threads} threads")
    times: dict[str, list[float]] = {name: [] for name in forms}
    for _ in range(args.repeats):  # interleaved: a neighbour slows every form alike
        for name, f in forms.items():
            run(f)  # warm
            start = time.perf_counter()
            for _ in range(args.calls):
                run(f)
            times[name].append((time.perf_counter() - start) / args.calls)
    for name, f in forms.items():
        out, grad = run(f)
        t = times[name]
        med = statistics.median(t)
        print(f"{name:14s} {med * 1e3:7.2f} ms (spread {(max(t) - min(t)) / med:.0%})  "
              f"max |Δ| vs flash: out {(out - ref_out).abs().max():.1e}, grad {(grad - ref_grad).abs().max():.1e}")


if __name__ == "__main__":
    main()
