"""Data sources by name (``data.name`` in ``configs/data/*.yaml``) -> a :class:`Corpus` of token blocks."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ffn_zoo.data.blocks import Corpus
from ffn_zoo.data.c4 import build_c4, build_local_shards
from ffn_zoo.data.extra_val import build_extra_val
from ffn_zoo.data.text import build_text
from ffn_zoo.data.toy import ToyHMM, toy_splits
from ffn_zoo.errors import UnknownNameError


def build_toy(cfg: Mapping[str, Any]) -> Corpus:
    hmm = ToyHMM(
        vocab_size=cfg["vocab_size"], n_states=cfg["n_states"], support=cfg["support"],
        zipf_exponent=cfg["zipf_exponent"], concentration=cfg["concentration"], seed=cfg["corpus_seed"],
    )
    train, val = toy_splits(hmm, cfg["seq_len"], cfg["train_tokens"], cfg["val_tokens"])
    nll, count = hmm.optimal_nll(val)
    return Corpus(
        name="toy", vocab_size=hmm.vocab_size, train=train, val=val, optimal_val_loss=nll / count,
        description=f"toy HMM ({hmm.n_states} states, vocab {hmm.vocab_size}, Zipf {hmm.zipf_exponent}), "
        f"{train.size:,} train / {val[:, 1:].size:,} val tokens",
    )


# name -> builder. Real text: C4 (hub stream or local shards), Wikipedia (local shards), local text files and presets.
CORPORA: dict[str, Callable[[Mapping[str, Any]], Corpus]] = {
    "toy": build_toy,
    "c4": build_c4,
    "wikipedia": build_local_shards,
    "text": build_text,
    "tinyshakespeare": build_text,
    "wikitext2": build_text,
    "wikitext103": build_text,
}


def build_corpus(cfg: Mapping[str, Any]) -> Corpus:
    name = cfg["name"]
    if name not in CORPORA:
        raise UnknownNameError("data", name, CORPORA)
    corpus = CORPORA[name](cfg)
    corpus.extra_val = build_extra_val(cfg, corpus.tokenizer)  # tokenized with the run's tokenizer
    return corpus


__all__ = ["CORPORA", "Corpus", "build_corpus"]
