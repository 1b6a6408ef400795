"""Where one training step's time goes, by operator and input shape (torch.profiler), for a model preset.

    python scripts/profile_step.py [--model mini] [--ffn gelu] [--objective clm|mlm] [--loss fused|plain] [--threads 2]

A step is forward, cross-entropy, backward and a fused AdamW step on a random batch of 32 × 128 tokens (vocabulary
8,192); two warm-up steps, then one profiled. Under ``--objective mlm`` 15% of positions are chosen and only they go
through the output layer, as in training. ``--loss fused`` (the default, as ``impl.fused_loss``): the output layer
and its cross-entropy by row chunks (ffn_zoo/nn/losses.py); ``plain``: the logits, then ``F.cross_entropy``.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from ffn_zoo import build_model
from ffn_zoo.nn.losses import linear_cross_entropy
from ffn_zoo.training.recipe.objectives import IGNORE_INDEX, mask_tokens


VOCAB = 8192


def setup(model_name: str, ffn: str, threads: int, mlm: bool) -> tuple[torch.nn.Module, torch.optim.Optimizer,
                                                                      torch.Tensor, torch.Tensor]:
    """A seeded model (vocabulary 8,192, + [MASK] under MLM), its fused AdamW and one batch of 32 × 128:
    (model, optimizer, inputs, targets); under MLM the targets are IGNORE_INDEX off the chosen positions."""
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    model = build_model(model_name, ffn, vocab_size=VOCAB + mlm, seq_len=128)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    tokens = torch.randint(0, VOCAB, (32, 129))
    if mlm:
        x, y = mask_tokens(tokens[:, :-1], VOCAB, VOCAB, generator=torch.Generator().manual_seed(0))
    else:
        x, y = tokens[:, :-1], tokens[:, 1:]
    return model, opt, x, y


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="mini")
    ap.add_argument("--ffn", default="gelu")
    ap.add_argument("--objective", choices=("clm", "mlm"), default="clm")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--loss", choices=("fused", "plain"), default="fused")
    ap.add_argument("--rows", type=int, default=14)
    args = ap.parse_args()
    mlm = args.objective == "mlm"
    model, opt, x, y = setup(args.model, args.ffn, args.threads, mlm)

    def step() -> None:
        chosen = y != IGNORE_INDEX if mlm else None
        targets = y[chosen] if mlm else y.flatten()
        if args.loss == "fused":
            h = model(x, select=chosen, head=False).flatten(0, -2)  # (N, C)
            loss = linear_cross_entropy(h, model.head.weight, targets)
        else:
            loss = F.cross_entropy(model(x, select=chosen).flatten(0, -2), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(2):
        step()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    print(prof.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=args.rows,
                                                             max_name_column_width=40, max_shapes_column_width=50))


if __name__ == "__main__":
    main()
