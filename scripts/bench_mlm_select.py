"""An MLM training step with the output layer on every position against one on the chosen positions only.

    python scripts/bench_mlm_select.py [--model mini] [--ffn gelu] [--repeats 5] [--threads 2]

Both steps are forward, backward and a fused AdamW step of the same network on the same masked batch (32 × 128,
15% chosen), interleaved, so a busy moment hits both alike; prints the medians and the ratio's median and range.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch.nn.functional as F

from ffn_zoo.training.recipe.objectives import IGNORE_INDEX

if not __package__:  # run as `python scripts/bench_mlm_select.py`: the repository root, so `scripts` imports
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from scripts.profile_step import setup  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mini")
    ap.add_argument("--ffn", default="gelu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    model, opt, x, y = setup(args.model, args.ffn, args.threads, mlm=True)  # the profile script's seeded setup
    chosen = y != IGNORE_INDEX

    def every_position() -> None:
        F.cross_entropy(model(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX).backward()
        opt.step(), opt.zero_grad(set_to_none=True)

    def chosen_only() -> None:
        F.cross_entropy(model(x, select=chosen), y[chosen]).backward()
        opt.step(), opt.zero_grad(set_to_none=True)

    steps = {"every position": every_position, "chosen only": chosen_only}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for step in steps.values():
        step()  # warm-up
    for _ in range(args.repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - start)
    ratios = [a / b for a, b in zip(times["every position"], times["chosen only"])]
    print(f"{args.model} {args.ffn}, {args.threads} threads: " + ", ".join(
        f"{name} {statistics.median(t) * 1e3:.0f} ms" for name, t in times.items())
        + f"; chosen-only is {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
