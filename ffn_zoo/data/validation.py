"""A validation split's tokens: a prefix of its packed stream cut to whole blocks (at most ``val_tokens`` scored
targets), packed once and cached. The hub's C4 and the extra held-out sets (``data.extra_val``) both end here."""

from __future__ import annotations

from typing import Any, Callable, Iterable

import numpy as np

from ffn_zoo.data.cache import TokenCache
from ffn_zoo.data.pack import Document, documents_in, n_blocks, pack_stream, storage_dtype
from ffn_zoo.data.tokenizer import Tokenizer
from ffn_zoo.errors import DataError


def cut_validation(stream: np.ndarray, seq_len: int, val_tokens: int | None) -> np.ndarray:
    """The validation stream cut to whole blocks, at most ``val_tokens`` scored targets."""
    n = n_blocks(len(stream), seq_len)
    if val_tokens is not None:
        n = min(n, val_tokens // seq_len)
    return stream[: n * seq_len + 1] if n else stream[:0]


def cached_validation(
    cache: TokenCache, docs: Callable[[], Iterable[Document]], tok: Tokenizer, seq_len: int, val_tokens: int | None,
    label: str,
) -> tuple[np.ndarray, dict[str, Any], str]:
    """A validation prefix (the first ``val_tokens`` scored targets, whole blocks) as int32, its metadata and where it
    came from: the cache, or ``docs()`` packed now and cached."""
    hit = cache.load(["val"])
    if hit is not None:
        arrays, meta = hit
        return np.asarray(arrays["val"], dtype=np.int32), meta, f"cached {cache.dir}"
    val = pack_stream(docs(), tok, None if val_tokens is None else val_tokens + 1, dtype=storage_dtype(tok.vocab_size))
    if n_blocks(len(val), seq_len) == 0:
        raise DataError(f"{label} gives {max(len(val) - 1, 0)} tokens, fewer than one block of data.seq_len={seq_len}")
    val = cut_validation(val, seq_len, val_tokens)
    meta = {"vocab_size": tok.vocab_size, "tokenizer": tok.fingerprint, "val_tokens": int(len(val) - 1),
            "val_bytes": tok.text_bytes(val[1:]), "val_docs": documents_in(val, tok.eot_id)}
    cache.save({"val": val}, meta)
    return val.astype(np.int32), meta, f"tokenized, cached in {cache.dir}"  # int32, as a cache hit loads it
