"""Parameters, FLOPs, activation evaluations and measured FFN time of every variant at one model shape.

    ffn-zoo-report model=bert_base               # the table at BERT-base, 512 tokens
    ffn-zoo-report model=mini --seq-len 128 --no-time
    python -m ffn_zoo.analysis.report model=bert_base model.vocab_size=30522

Positional arguments are ``train.py`` overrides (the model shape, ``ffn.match_params=false``, ...).
FLOPs are matmul FLOPs (2 per weight per token, ``ffn_zoo.nn.flops``); forward+backward is 3× forward.
Times are one FFN layer (or its activation alone) on a (1, seq_len, d_model) input, forward+backward,
median over interleaved repeats on this machine: compare rows, not absolute numbers across machines.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from typing import Any

import torch

from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.errors import FFNZooError
from ffn_zoo.nn.ffn import FFN_VARIANTS, FFNSpec, build_ffn, get_variant
from ffn_zoo.nn.flops import ffn_flops_per_token, ffn_weights, training_flops_per_token
from ffn_zoo.nn.model import TransformerLM


def variant_row(name: str, overrides: list[str], seq_len: int) -> dict[str, Any]:
    """Counts for variant ``name`` at the model the overrides give (no timing)."""
    cfg = compose([*overrides, f"ffn={name}"])
    mc = model_config(cfg, vocab_size=cfg.data.get("vocab_size"))
    with torch.device("meta"):  # shapes only: no memory, no init time
        model = TransformerLM(mc)
    fwd = ffn_flops_per_token(mc.d_model, mc.ffn.hidden, mc.ffn.gated) * mc.n_layers
    return {
        "variant": name,
        "form": "gated" if mc.ffn.gated else "dense",
        "activation": mc.ffn.activation,
        "hidden": mc.ffn.hidden,
        "ffn_weights_per_layer": ffn_weights(mc.d_model, mc.ffn.hidden, mc.ffn.gated),
        "params_ffn": model.num_params(ffn_only=True),
        "params_total": model.num_params(),
        "ffn_fwd_flops_per_token": fwd,
        "ffn_fwd_bwd_flops_per_token": 3 * fwd,
        "model_fwd_bwd_flops_per_token": training_flops_per_token(model, seq_len),
        "act_evals_per_forward": seq_len * mc.n_layers * mc.ffn.hidden,
        "d_model": mc.d_model, "n_layers": mc.n_layers, "vocab_size": mc.vocab_size,
    }


def _fwd_bwd_seconds(fn: Any, x: torch.Tensor) -> float:
    x.grad = None
    start = time.perf_counter()
    y = fn(x)
    y.backward(torch.ones_like(y))
    return time.perf_counter() - start


def measure_times(rows: list[dict[str, Any]], seq_len: int, repeats: int = 5, warmup: int = 2) -> None:
    """Add ``ffn_ms`` and ``act_ms`` (median forward+backward, interleaved across variants) to ``rows``."""
    torch.manual_seed(0)
    cases = []
    for row in rows:
        v = FFN_VARIANTS[row["variant"]]
        ffn = build_ffn(FFNSpec(v.gated, v.activation, row["hidden"]), row["d_model"])
        x = torch.randn(1, seq_len, row["d_model"], requires_grad=True)  # (1, T, C)
        h = torch.randn(1, seq_len, row["hidden"], requires_grad=True)  # (1, T, H): the activation's input
        cases.append((row, ffn, x, h, [], []))
    for rep in range(warmup + repeats):  # round-robin, so a busy moment hits every variant alike
        for row, ffn, x, h, ffn_t, act_t in cases:
            tf, ta = _fwd_bwd_seconds(ffn, x), _fwd_bwd_seconds(ffn.act, h)
            if rep >= warmup:
                ffn_t.append(tf)
                act_t.append(ta)
    for row, _, _, _, ffn_t, act_t in cases:
        row["ffn_ms"] = 1e3 * statistics.median(ffn_t)
        row["act_ms"] = 1e3 * statistics.median(act_t)


def report(overrides: list[str], seq_len: int, variants: list[str] | None = None, timing: bool = True,
           repeats: int = 5) -> list[dict[str, Any]]:
    names = variants or list(FFN_VARIANTS)
    for name in names:
        get_variant(name)  # an unknown name lists the valid ones
    rows = [variant_row(name, overrides, seq_len) for name in names]
    if timing:
        measure_times(rows, seq_len, repeats)
    return rows


def to_markdown(rows: list[dict[str, Any]], seq_len: int) -> str:
    """The table: counts are per token (FLOPs) or per forward pass of ``seq_len`` tokens (evaluations)."""
    timed = "ffn_ms" in rows[0]
    base = next((r for r in rows if r["variant"] == "gelu"), rows[0])
    head = ["variant", "form", "hidden", "FFN params/layer", "FFN params", "total params",
            "FFN fwd FLOPs/token", "FFN fwd+bwd FLOPs/token", "model fwd+bwd FLOPs/token",
            f"act evals/forward ({seq_len} tok)"]
    if timed:
        head += ["FFN fwd+bwd ms", f"× {base['variant']}", "act fwd+bwd ms"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["variant"], r["form"], str(r["hidden"])] + [f"{r[k]:,}" for k in (
            "ffn_weights_per_layer", "params_ffn", "params_total", "ffn_fwd_flops_per_token",
            "ffn_fwd_bwd_flops_per_token", "model_fwd_bwd_flops_per_token", "act_evals_per_forward")]
        if timed:
            cells += [f"{r['ffn_ms']:.1f}", f"{r['ffn_ms'] / base['ffn_ms']:.2f}", f"{r['act_ms']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def zoo_markdown(d_model: int = 768, d_ff: int = 3072) -> str:
    """The README's zoo table from ``FFN_VARIANTS``: each variant built at (d_model, dense d_ff), weights counted."""
    lines = ["| `ffn=` | form | activation | FFN(x) | hidden | weights / layer | reference |",
             "|---|---|---|---|---:|---:|---|"]
    for name, v in FFN_VARIANTS.items():
        ffn = build_ffn(FFNSpec.variant(name, d_ff), d_model)
        weights = sum(p.numel() for p in ffn.parameters())  # a learnable β counts too
        lines.append(f"| `{name}` | {v.form} | `{v.activation}` | {v.formula()} | {ffn.hidden:,} | {weights:,} | "
                     f"{v.paper} |")
    return "\n".join(lines)


GENERATED = re.compile(r"(<!-- gen:(?P<name>[\w-]+) -->)(?P<body>.*?)(<!-- /gen:(?P=name) -->)", re.S)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("overrides", nargs="*", help="train.py overrides, e.g. model=bert_base (the default)")
    parser.add_argument("--seq-len", type=int, default=512, help="tokens per sequence (default 512, BERT's)")
    parser.add_argument("--variants", default=None, help="comma-separated subset (default: all)")
    parser.add_argument("--no-time", action="store_true", help="counts only, no timing")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats per variant (median)")
    args = parser.parse_intermixed_args(argv)
    overrides = args.overrides if any(o.startswith("model=") for o in args.overrides) else \
        ["model=bert_base", *args.overrides]
    variants = args.variants.split(",") if args.variants else None
    try:
        rows = report(overrides, args.seq_len, variants, timing=not args.no_time, repeats=args.repeats)
    except FFNZooError as e:
        raise SystemExit(f"error: {e}") from None
    r = rows[0]
    print(f"{' '.join(overrides)}: d_model {r['d_model']}, {r['n_layers']} layers, vocab {r['vocab_size']}, "
          f"{args.seq_len} tokens/sequence" + (f"; times on {torch.get_num_threads()} CPU threads, median of "
                                              f"{args.repeats}" if not args.no_time else ""))
    print(to_markdown(rows, args.seq_len))


if __name__ == "__main__":
    main()
