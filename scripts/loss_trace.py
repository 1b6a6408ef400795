"""Train a model preset a few steps and write its per-step losses, or compare them with a trace written before:
the check that a change to the training step moves no result beyond rounding.

    python scripts/loss_trace.py --model mini --steps 50 --out before.json         # on the code before the change
    python scripts/loss_trace.py --model mini --steps 50 --against before.json     # after: max |Δloss|, exit 1 > tol

The step is ``ffn-zoo-bench``'s own (``build_ours``: ``LitLM.loss``, backward, global-norm clipping, the
configured optimizer at its base lr, no schedule) on a seeded stream of random batches of 32 × 128 tokens
(vocabulary 8,192), fp32. Extra ``KEY=VALUE`` arguments are config overrides (e.g. ``impl.fused_loss=false
objective=mlm``). To trace older code, run that checkout's copy of this script with the checkout first on the
path: ``PYTHONPATH=<old> python <old>/scripts/loss_trace.py ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

if not __package__:  # run as `python scripts/loss_trace.py`: the repository root (or PYTHONPATH's checkout) imports
    sys.path.append(str(Path(__file__).resolve().parent.parent))
from ffn_zoo.tools.bench_results import Case  # noqa: E402
from ffn_zoo.tools.benchmark import build_ours  # noqa: E402


def trace(model: str, ffn: str, steps: int, batch: int, seq: int, vocab: int, overrides: list[str]) -> list[float]:
    """The training losses of ``steps`` steps from a seeded init on seeded random batches."""
    torch.manual_seed(0)  # the weights, and under MLM each step's masks
    step, _ = build_ours(Case(model, ffn, seq, batch, "32-true"), vocab, "cpu", False, overrides)
    g = torch.Generator().manual_seed(1)
    return [step(torch.randint(0, vocab, (batch, seq + 1), generator=g)).item() for _ in range(steps)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="mini")
    p.add_argument("--ffn", default="gelu")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", type=Path, help="write the trace here")
    p.add_argument("--against", type=Path, help="compare with this trace")
    p.add_argument("--tol", type=float, default=1e-5, help="largest |Δloss| accepted by --against")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    losses = trace(args.model, args.ffn, args.steps, args.batch, args.seq, args.vocab, args.overrides)
    print(f"{args.model} {args.ffn} {args.steps} steps: loss {losses[0]:.6f} -> {losses[-1]:.6f}")
    if args.out:
        given = argv if argv is not None else sys.argv[1:]  # the arguments this trace was made with
        args.out.write_text(json.dumps({"losses": losses, "argv": given}) + "\n")
    if args.against:
        before = json.loads(args.against.read_text())["losses"]
        if len(before) != len(losses):
            print(f"{args.against} has {len(before)} steps, this run {len(losses)}")
            return 1
        worst = max(range(len(losses)), key=lambda i: abs(losses[i] - before[i]))
        diff = abs(losses[worst] - before[worst])
        ok = diff <= args.tol
        print(f"max |Δloss| {diff:.3g} at step {worst + 1} (tolerance {args.tol:g}): {'ok' if ok else 'MOVED'}")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
