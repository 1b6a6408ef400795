"""Data sources by name (``data.name`` in ``configs/data/*.yaml``) -> a :class:`Corpus` of token blocks."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ffn_zoo.data.c4 import build_c4, build_local_shards
from ffn_zoo.data.text import build_text
from ffn_zoo.data.toy import build_toy
from ffn_zoo.data.types import Corpus
from ffn_zoo.errors import UnknownNameError

# name -> builder. Real text: C4 (hub stream or local shards), Wikipedia (local shards), local text files and presets.
# A builder returns the whole corpus, its data.extra_val held-out sets included (tokenized with its tokenizer).
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
    if list(corpus.extra_val) != [str(k) for k in cfg.get("extra_val") or {}]:  # a bug, not the user's mistake
        raise RuntimeError(f"the data={name} builder dropped data.extra_val: pass extra_val=build_extra_val(...)")
    return corpus


__all__ = ["CORPORA", "Corpus", "build_corpus"]
