"""A run's training speed over its steps: `train/tokens_per_s` from its TensorBoard events, per window of steps.

    python scripts/train_rate.py RUN [RUN ...] [--window 60]

RUN is a run folder (a ladder's ``trunk/``, a branch, a plain run) holding ``events.out.tfevents.*``. Prints, per
window, the logged points' mean, min and max, then the last window's mean ÷ the first's. A step that slows as the
model trains (denormals at `bert_base`: docs/benchmarks.md) shows as a falling column; a whole-run mean hides it.
"""

from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path

TAG = "train/tokens_per_s"


def rate_points(run: Path) -> list[tuple[int, float]]:
    """(step, tokens/s) of every logged point, all event files of the folder, in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    points: dict[int, float] = {}
    for f in sorted(glob.glob(glob.escape(str(run)) + "/events.out.tfevents.*")):  # ladder names hold [ ]
        ea = EventAccumulator(f, size_guidance={"scalars": 0})
        ea.Reload()
        if TAG in ea.Tags()["scalars"]:
            points.update((e.step, e.value) for e in ea.Scalars(TAG))
    return sorted(points.items())


def windows(points: list[tuple[int, float]], width: int) -> list[tuple[int, int, list[float]]]:
    """(first step, last step, values) per window of ``width`` steps that holds a point."""
    out: dict[int, list[float]] = {}
    for step, value in points:
        out.setdefault(step // width, []).append(value)
    return [(k * width, (k + 1) * width - 1, v) for k, v in sorted(out.items())]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--window", type=int, default=60, help="steps per window (default 60)")
    args = ap.parse_args(argv)
    if args.window < 1:
        ap.error("--window must be at least 1")
    status = 0
    for run in args.runs:
        points = rate_points(run)
        if not points:
            print(f"{run}: no {TAG} in its TensorBoard events", file=sys.stderr)
            status = 1
            continue
        print(f"{run} ({len(points)} points of {TAG})")
        rows = windows(points, args.window)
        for lo, hi, v in rows:
            mean = sum(v) / len(v)
            print(f"  steps {lo:4d}-{hi:4d}: n={len(v):3d} mean {mean:8.1f} min {min(v):8.1f} max {max(v):8.1f}")
        first, last = rows[0][2], rows[-1][2]
        print(f"  last window ÷ first: {(sum(last) / len(last)) / (sum(first) / len(first)):.3f}")
    return status


if __name__ == "__main__":
    sys.exit(main())
