"""Data-pipeline benchmark: tokenization and loader throughput, and the loader's share of a model=mini step.

    flock /tmp/ffnzoo-cpu.lock ffn-zoo-bench-data            # C4 sample in ../shared/data
    ffn-zoo-bench-data --train-files a.jsonl --val-files b.json.gz --steps 20

Prints one line per measurement. The cache goes to a fresh temporary folder, so the cold numbers
are really cold. Run it alone on the machine (under the CPU lock): it measures wall time.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.data import build_corpus
from ffn_zoo.data.types import Corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.data.files import expand_files, iter_documents
from ffn_zoo.data.pack import batched
from ffn_zoo.data.stream import StreamBatches, TokenStream
from ffn_zoo.data.tokenizer import ByteTokenizer
from ffn_zoo.nn.model import TransformerLM

SHARED = Path("../shared/data")  # beside the checkout, as the data configs expect (run from the repo root)


def tokens_per_s(tok, docs: list[str], chunk: int = 256) -> tuple[float, float]:
    """(tokens/s, MB of text/s) of encode_batch over ``docs``, best of 3 passes."""
    best, n_tokens = float("inf"), 0
    for _ in range(3):
        t = time.perf_counter()
        n_tokens = sum(len(ids) for group in batched(docs, chunk) for ids in tok.encode_batch(group))
        best = min(best, time.perf_counter() - t)
    return n_tokens / best, sum(len(d.encode()) for d in docs) / best / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    c4 = SHARED / "c4"
    ap.add_argument("--train-files", nargs="+", default=[str(c4 / "c4-train.00000-of-01024.first1000.jsonl")])
    ap.add_argument("--val-files", nargs="+", default=[str(c4 / "c4-sample.00000-of-00001.json.gz")])
    ap.add_argument("--vocab-size", type=int, default=8192)
    ap.add_argument("--model", default="mini")
    ap.add_argument("--steps", type=int, default=20, help="training steps timed for the loader's share")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as cache:
        overrides = [f"model={args.model}", "data=c4", f"data.train_files=[{','.join(args.train_files)}]",
                     f"data.val_files=[{','.join(args.val_files)}]", f"tokenizer.vocab_size={args.vocab_size}",
                     f"data.cache_dir={cache}"]
        cfg = compose(overrides)
        data = OmegaConf.to_container(cfg.data, resolve=True)
        t = time.perf_counter()
        corpus = build_corpus(data)
        cold = time.perf_counter() - t
        t = time.perf_counter()
        build_corpus(data)
        warm = time.perf_counter() - t
        print(f"corpus build   cold {cold:.2f} s (train BPE + tokenize + pack + cache), cached {warm:.3f} s; "
              f"{corpus.description}")

        docs = list(iter_documents(expand_files(args.train_files, "--train-files")))
        tok = corpus.tokenizer
        for name, tk in (("bpe", tok), ("bytes", ByteTokenizer())):
            tps, mbs = tokens_per_s(tk, docs)
            print(f"tokenize       {name:5s} {tps / 1e6:.2f} M tokens/s ({mbs:.1f} MB text/s; "
                  f"the Rust tokenizer uses its own thread pool)")

        B, T = cfg.data.batch_size, cfg.data.seq_len
        packed = iter(LMDataModule(corpus, B, cfg.data.val_batch_size, seed=0).train_dataloader())
        fetch = seconds_per_batch(packed, 200)
        print(f"loader packed  {B * T / fetch / 1e6:.2f} M tokens/s ({fetch * 1e3:.3f} ms per {B}x{T} batch, main process)")
        # the hub path's on-the-fly packing, fed the local documents (no network)
        stream = TokenStream(lambda seed, epoch: iter(docs), tok, T)
        sfetch = seconds_per_batch(iter(StreamBatches(stream, B, seed=0)), 50)
        print(f"loader stream  {B * T / sfetch / 1e6:.2f} M tokens/s ({sfetch * 1e3:.2f} ms per batch: tokenize + pack "
              f"on the fly, main process)")

        streamed = Corpus("c4", corpus.vocab_size, None, corpus.val, train_stream=stream, tokenizer=tok)
        for name, source in (("packed", corpus), ("stream", streamed)):
            loader = LMDataModule(source, B, cfg.data.val_batch_size, seed=0).train_dataloader()  # stream: 1 worker
            fetch_s, step_s, worst = step_share(cfg, corpus.vocab_size, iter(loader), args.steps)
            print(f"step share     model={args.model} {name}: batch fetch {fetch_s * 1e3:.2f} ms of a "
                  f"{step_s * 1e3:.0f} ms step = {fetch_s / step_s:.2%} (worst fetch {worst * 1e3:.2f} ms, "
                  f"{args.steps} steps, {torch.get_num_threads()} torch threads)")


def seconds_per_batch(it, n: int) -> float:
    next(it)  # warm-up: workers, first chunk
    t = time.perf_counter()
    for _ in range(n):
        next(it)
    return (time.perf_counter() - t) / n


def step_share(cfg, vocab_size: int, it, steps: int) -> tuple[float, float, float]:
    """(mean fetch s, mean step s incl. fetch, worst fetch s) over ``steps`` AdamW steps after 2 warm-up steps."""
    torch.manual_seed(0)
    model = TransformerLM(model_config(cfg, vocab_size=vocab_size))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fetch_t, step_t = [], []
    for step in range(steps + 2):
        t0 = time.perf_counter()
        batch = next(it)  # (B, T + 1)
        t1 = time.perf_counter()
        logits = model(batch[:, :-1])  # (B, T, V)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= 2:
            fetch_t.append(t1 - t0)
            step_t.append(time.perf_counter() - t0)
    return float(np.mean(fetch_t)), float(np.mean(step_t)), max(fetch_t)


if __name__ == "__main__":
    main()
