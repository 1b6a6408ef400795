"""The output layer + cross-entropy alone, forward and backward: the plain path (logits, then F.cross_entropy)
against nn/losses.py's fused one at several row-chunk sizes, interleaved, median of the repeats. Shapes default to
``mini``'s step (32 × 128 rows, d 256, vocabulary 8,192).

    python scripts/bench_fused_loss.py --chunks 128 256 512 1024 4096 --repeats 5 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from ffn_zoo.nn.losses import linear_cross_entropy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=32 * 128)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--chunks", type=int, nargs="+", default=[128, 256, 512, 1024, 4096])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="timed calls per repeat")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    x0 = torch.randn(args.rows, args.width, generator=g)
    w0 = torch.randn(args.vocab, args.width, generator=g) * 0.02
    t = torch.randint(0, args.vocab, (args.rows,), generator=g)

    def plain() -> None:
        x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
        F.cross_entropy((x @ w.T).float(), t).backward()

    def fused(chunk: int):
        def run() -> None:
            x, w = x0.clone().requires_grad_(), w0.clone().requires_grad_()
            linear_cross_entropy(x, w, t, chunk_rows=chunk).backward()
        return run

    cases = {"plain": plain, **{f"fused/{c}": fused(c) for c in args.chunks}}
    times: dict[str, list[float]] = {k: [] for k in cases}
    for f in cases.values():  # warm-up
        f()
    for _ in range(args.repeats):  # interleaved: a load change hits every case alike
        for name, f in cases.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                f()
            times[name].append((time.perf_counter() - start) / args.steps)
    print(f"{'case':<12} {'ms':>8} {'plain ÷ case':>13}  (rows {args.rows}, d {args.width}, vocab {args.vocab}, "
          f"{torch.get_num_threads()} threads, median of {args.repeats})")
    for name, ts in times.items():
        ratios = [a / b for a, b in zip(times["plain"], ts)]
        print(f"{name:<12} {statistics.median(ts) * 1e3:8.1f} {statistics.median(ratios):12.2f}× "
              f"({min(ratios):.2f}–{max(ratios):.2f})")


if __name__ == "__main__":
    main()
