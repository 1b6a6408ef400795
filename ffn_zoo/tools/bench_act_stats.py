"""What the activation-statistics callback costs, as a fraction of the training time between two measurements.

    ffn-zoo-bench-act-stats model=mini             # the quick-start shape, default settings

Interleaved rounds: ``every_n_steps`` AdamW training steps at the configured batch, then one full
measurement (forward with hooks, statistics, TensorBoard scalars and histograms written). The ratio
of the medians is the slowdown the callback adds at that setting. Random tokens: speed only.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.utils.tensorboard import SummaryWriter

from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.training.reporting.instruments import ActivationStats
from ffn_zoo.nn.model import TransformerLM


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("overrides", nargs="*", help="train.py overrides (default model=mini ffn=gelu)")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_intermixed_args()
    cfg = compose(["model=mini", *args.overrides] if not any(o.startswith("model=") for o in args.overrides)
                  else args.overrides)
    inst, B, T = cfg.instruments, cfg.data.batch_size, cfg.data.seq_len
    vocab = cfg.data.vocab_size
    torch.manual_seed(0)
    model = TransformerLM(model_config(cfg, vocab_size=vocab))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    stats = ActivationStats(torch.randint(0, vocab, (inst.batch_rows, T)), inst.every_n_steps, inst.dead_eps,
                            inst.sat_tol, inst.histograms)
    writer = SummaryWriter(tempfile.mkdtemp(prefix="bench_act_stats_"))

    def train_steps(n: int) -> float:
        start = time.perf_counter()
        for _ in range(n):
            x = torch.randint(0, vocab, (B, T + 1))
            loss = F.cross_entropy(model(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        return time.perf_counter() - start

    def record(step: int) -> float:
        start = time.perf_counter()
        scalars, hists = stats.measure(model)
        for k, v in scalars.items():
            writer.add_scalar(k, v, step)
        for k, v in hists.items():
            writer.add_histogram(k, v, step)
        writer.flush()
        return time.perf_counter() - start

    train_steps(2), record(0)  # warm-up
    block, meas = [], []
    for r in range(args.rounds):
        block.append(train_steps(inst.every_n_steps))
        meas.append(record(r + 1))
    b, m = statistics.median(block), statistics.median(meas)
    print(f"{cfg.model.name} ffn={cfg.ffn.name}, batch {B}×{T}, {torch.get_num_threads()} threads, "
          f"every_n_steps={inst.every_n_steps}, batch_rows={inst.batch_rows}, histograms={inst.histograms}")
    print(f"{inst.every_n_steps} training steps: median {b:.2f} s ({1e3 * b / inst.every_n_steps:.0f} ms/step); "
          f"one measurement: median {1e3 * m:.0f} ms; overhead {100 * m / b:.2f}% of training time "
          f"({args.rounds} interleaved rounds)")


if __name__ == "__main__":
    main()
