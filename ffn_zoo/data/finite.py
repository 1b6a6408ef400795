"""Any finite text corpus -> tokenizer -> packed, cached token blocks -> :class:`Corpus`.

The C4 shards reader and the plain-text reader both end here. On a cache hit no text is read
or tokenized: the packed streams are memory-mapped from ``<cache>/tokens/<key>/``. The corpus carries its
extra held-out sets (``data.extra_val``), tokenized with its tokenizer.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ffn_zoo.data.cache import TokenCache, cache_root, fingerprint
from ffn_zoo.data.extra_val import build_extra_val
from ffn_zoo.data.pack import Document, blocks_of, documents_in, n_blocks, pack_stream, storage_dtype
from ffn_zoo.data.tokenizer import build_tokenizer
from ffn_zoo.data.types import Corpus
from ffn_zoo.data.validation import cut_validation
from ffn_zoo.errors import ConfigError, DataError, require_positive


def take(docs: Iterable[Document], limit: int | None) -> Iterable[Document]:
    for i, d in enumerate(docs):
        if limit is not None and i >= limit:
            return
        yield d


def build_packed_corpus(
    name: str,
    cfg: Mapping[str, Any],
    source_id: Any,
    train_docs: Callable[[], Iterable[Document]],
    val_docs: Callable[[], Iterable[Document]],
    train_label: str,
    val_label: str,
) -> Corpus:
    """Tokenize (or load from the cache) and pack a finite corpus.

    ``source_id`` = {"train": ..., "val": ...} identifies the inputs (file identities, split settings);
    with the tokenizer and ``seq_len`` it keys the cache. ``*_label`` name the inputs in error messages.
    """
    seq_len, val_tokens, limit = int(cfg["seq_len"]), cfg.get("val_tokens"), cfg.get("train_docs")
    require_positive(**{"data.seq_len": seq_len, "data.val_tokens": val_tokens, "data.train_docs": limit})
    if val_tokens is not None and val_tokens < seq_len:
        raise ConfigError(f"data.val_tokens={val_tokens} is less than one block of data.seq_len={seq_len}")
    root = cache_root(cfg.get("cache_dir"))
    # the tokenizer depends on the training data only, so changing the validation split keeps it
    tok = build_tokenizer(cfg.get("tokenizer"), [source_id["train"], limit], lambda: take(train_docs(), limit), root)

    cache = TokenCache(root, f"{name}-{fingerprint(name, source_id, tok.fingerprint, seq_len, val_tokens, limit)}")
    hit = cache.load(["train", "val"])
    if hit is not None:
        arrays, meta = hit
        train, val = np.asarray(arrays["train"], dtype=np.int32), np.asarray(arrays["val"], dtype=np.int32)
        where = f"cached {cache.dir}"
    else:
        dtype = storage_dtype(tok.vocab_size)  # uint16 for vocabularies up to 65,536: half of int32's memory
        train = pack_stream(take(train_docs(), limit), tok, dtype=dtype, progress=f"{name} train")
        val = pack_stream(val_docs(), tok, None if val_tokens is None else val_tokens + 1, dtype=dtype)
        for split, stream, label in (("train", train, train_label), ("validation", val, val_label)):
            if n_blocks(len(stream), seq_len) == 0:
                raise DataError(
                    f"{label}: the {split} text gives {max(len(stream) - 1, 0)} tokens, "
                    f"fewer than one block of data.seq_len={seq_len}"
                )
        val = cut_validation(val, seq_len, val_tokens)
        meta = {
            "vocab_size": tok.vocab_size, "tokenizer": tok.fingerprint, "seq_len": seq_len,
            "train_tokens": int(len(train)), "val_tokens": int(len(val) - 1), "val_bytes": tok.text_bytes(val[1:]),
            "val_docs": documents_in(val, tok.eot_id),
        }
        cache.save({"train": train, "val": val}, meta)
        train, val = train.astype(np.int32), val.astype(np.int32)  # as a cache hit loads them
        where = f"tokenized, cached in {cache.dir}"
    return Corpus(
        name=name, vocab_size=tok.vocab_size, train=blocks_of(train, seq_len), val=blocks_of(val, seq_len),
        val_bytes=int(meta["val_bytes"]), tokenizer=tok, extra_val=build_extra_val(cfg, tok),
        description=f"{name}: {len(train):,} train / {meta['val_tokens']:,} val tokens "
        f"({meta['val_bytes']:,} val bytes, {meta['val_docs']:,} val docs), "
        f"tokenizer {tok.kind} vocab {tok.vocab_size:,}; {where}",
    )
