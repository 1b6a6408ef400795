"""impl.flush_denormal on a trained checkpoint: the same training steps with FTZ/DAZ off and on, each arm in its own
process (the intra-op threads take the flag when they start), alternated; per-step time and loss.

    python scripts/bench_denormals.py --ckpt RUN/checkpoints/last.ckpt --tokens TRAIN.npy [--steps 5] [--pairs 2]
        [--profile] [--init]

A fresh model has no denormals to flush: they appear as training sharpens attention (docs/benchmarks.md,
"Denormals"), so this times a checkpoint a run wrote. ``--tokens``: a token file of the run's corpus, e.g. its
cache's ``train.npy`` under $FFNZOO_CACHE/tokens/. Each arm rebuilds the model and its optimizer from the checkpoint
(weights, AdamW moments, the lr it stopped at) and trains ``--steps`` batches of the run's shape read from the start
of the token file, so both arms see the same batches. Prints each arm's losses and step times, the largest loss
difference between arms (0 where flushing changed nothing) and the off ÷ on time ratio, median of the per-pair
ratios of median step times. Exit 1 if the losses differ by more than ``--tol``. ``--profile``: one more step under
torch.profiler per arm, its largest operators by self time; ``--init``: the weights the run's config and seed draw
(a fresh AdamW), not the checkpoint's: the same step before training has made any denormals.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def arm(ckpt: str, tokens: str, steps: int, on: bool, threads: int, profile: bool = False, init: bool = False) -> dict:
    """One arm, in this (fresh) process: FTZ/DAZ set first, then everything else."""
    import torch

    from ffn_zoo.training.recipe.denormals import denormals_flushed, flush_denormals

    flush_denormals(on)  # before the first parallel op: every intra-op thread inherits it
    torch.set_num_threads(threads)
    import numpy as np
    from omegaconf import OmegaConf

    from ffn_zoo.nn.model import TransformerLM
    from ffn_zoo.tools.benchmark import _train_step
    from ffn_zoo.training.lifecycle.checkpoint import load_checkpoint
    from ffn_zoo.training.recipe.build import model_config
    from ffn_zoo.training.recipe.module import LitLM
    from ffn_zoo.training.recipe.objectives import build_objective
    from ffn_zoo.training.recipe.optim import build_optimizer

    state = load_checkpoint(ckpt)
    cfg = OmegaConf.create(state["ffn_zoo"]["config"])
    weights = {k.removeprefix("model."): v for k, v in state["state_dict"].items()}
    vocab = weights["tok_emb.weight"].shape[0]
    objective = build_objective(cfg.objective, cfg.mlm, vocab - (cfg.objective == "mlm"))
    torch.manual_seed(int(cfg.seed))
    model = TransformerLM(model_config(cfg, vocab_size=vocab))
    if not init:
        model.load_state_dict(weights)
    module = LitLM(model, cfg.optim, max_steps=int(cfg.trainer.max_steps), objective=objective,
                   fused_loss=cfg.impl.fused_loss)
    opt = build_optimizer(model, cfg.optim)
    if not init:
        opt.load_state_dict(state["optimizer_states"][0])  # the moments and the lr the run had reached
    B, T = int(cfg.data.batch_size), int(cfg.data.seq_len)
    data = np.load(tokens, mmap_mode="r")
    torch.manual_seed(0)  # MLM draws its masks from torch's generator: the same in both arms
    out: dict = {"on": on, "flushed": denormals_flushed(), "loss": [], "s": []}
    precision = "bf16-mixed" if cfg.impl.precision == "bf16-mixed" else "32-true"
    train_step = _train_step(model, lambda b: module.loss(b, "mean"), opt, cfg.optim.grad_clip, precision, "cpu")

    def step(i: int) -> torch.Tensor:  # batch i of the token file, through the benchmark's own training step
        return train_step(torch.from_numpy(np.array(data[i * B * (T + 1):(i + 1) * B * (T + 1)],
                                                    dtype=np.int64)).view(B, T + 1))

    for i in range(steps):
        start = time.perf_counter()
        loss = step(i)
        out["s"].append(time.perf_counter() - start)
        out["loss"].append(loss.item())
    if profile:
        from torch.profiler import ProfilerActivity
        from torch.profiler import profile as profiler

        with profiler(activities=[ProfilerActivity.CPU]) as prof:
            step(steps)
        ops = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:8]
        out["profile_ms"] = {e.key: round(e.self_cpu_time_total / 1e3, 1) for e in ops}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ckpt", required=True, help="a checkpoint a run wrote (its config rebuilds the model)")
    p.add_argument("--tokens", required=True, help="a .npy token file of the run's corpus")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--pairs", type=int, default=2, help="off/on pairs, alternated")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tol", type=float, default=1e-5, help="largest loss difference between arms accepted")
    p.add_argument("--json", default=None, help="append each arm's JSON line to this file")
    p.add_argument("--profile", action="store_true", help="one more step per arm under torch.profiler")
    p.add_argument("--init", action="store_true", help="the run's freshly drawn weights, not the checkpoint's")
    p.add_argument("--arm", choices=("on", "off"), help=argparse.SUPPRESS)  # internal: one arm, this process
    args = p.parse_args(argv)
    if args.arm:
        print(json.dumps(arm(args.ckpt, args.tokens, args.steps, args.arm == "on", args.threads, args.profile,
                             args.init)), flush=True)
        return 0
    arms = []
    for _ in range(args.pairs):
        for side in ("off", "on"):
            cmd = [sys.executable, __file__, "--ckpt", args.ckpt, "--tokens", args.tokens, "--steps", str(args.steps),
                   "--threads", str(args.threads), "--arm", side, *(["--profile"] if args.profile else []),
                   *(["--init"] if args.init else [])]
            line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            arms.append(json.loads(line))
            a = arms[-1]
            print(f"FTZ/DAZ {side:3s} (flushed {a['flushed']:.0%}): step s {' '.join(f'{s:.2f}' for s in a['s'])}; "
                  f"loss {' '.join(f'{v:.6f}' for v in a['loss'])}", flush=True)
            for op, ms in a.get("profile_ms", {}).items():
                print(f"    {ms:9.1f} ms  {op}")
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps({**a, "ckpt": args.ckpt, "init": args.init}) + "\n")
    base = arms[0]["loss"]
    diff = max(abs(x - y) for a in arms for x, y in zip(a["loss"], base))
    ratios = [statistics.median(off["s"]) / statistics.median(on["s"]) for off, on in zip(arms[::2], arms[1::2])]
    print(f"largest loss difference between arms: {diff:.3g}; "
          f"off ÷ on step time: median {statistics.median(ratios):.3f} "
          f"(pairs {', '.join(f'{r:.3f}' for r in ratios)})")
    return 0 if diff <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
