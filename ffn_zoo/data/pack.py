"""Packing documents into one token stream and cutting it into fixed blocks (no padding).

The stream is ``EOT doc_1 EOT doc_2 EOT ... doc_n EOT``: every document is preceded by the
end-of-text token, so the first token of every document is predicted from an end-of-text
context and no text token is lost to being the first of the stream. Block i is the window
``stream[i*T : i*T + T + 1]`` (T = seq_len): consecutive blocks overlap by one token, so each
token after the first is a target exactly once, and only the incomplete tail (< T tokens) is dropped.
"""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator

import numpy as np

from ffn_zoo.data.tokenizer import Tokenizer


def batched(texts: Iterable, n: int) -> Iterator[list]:
    chunk: list[str] = []
    for t in texts:
        chunk.append(t)
        if len(chunk) == n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


Document = str | list[str]  # a document, or a long one as pieces tokenized in parallel and joined without EOT


def pack_stream(
    docs: Iterable[Document], tok: Tokenizer, max_tokens: int | None = None, chunk: int = 256,
    dtype: type = np.int32, progress: str | None = None,
) -> np.ndarray:
    """``EOT doc EOT doc ... EOT`` as one ``dtype`` array; stops after the document that reaches ``max_tokens``.

    Pieces are kept in ``dtype`` as they come (uint16 for a BPE vocabulary: 2 bytes a token, so ~50 M tokens
    hold ~100 MB, twice that while joined); ``progress`` names the stream in a line to stderr every ~10 s.
    """
    eot = np.array([tok.eot_id], dtype=dtype)
    out, n, n_docs = [eot], 1, 0
    started = last_report = time.monotonic()
    for group in batched(docs, chunk):
        parts = [[d] if isinstance(d, str) else list(d) for d in group]
        # one call for the whole group: the Rust tokenizer encodes it in parallel
        ids = iter(tok.encode_batch([p for doc in parts for p in doc]))
        for doc in parts:
            for _ in doc:
                piece = next(ids)
                out.append(piece.astype(dtype, copy=False))
                n += len(piece)
            out.append(eot)
            n += 1
            n_docs += 1
            if max_tokens is not None and n >= max_tokens:
                return np.concatenate(out)
        if progress and time.monotonic() - last_report > 10:
            last_report = time.monotonic()
            print(f"tokenizing {progress}: {n:,} tokens, {n_docs:,} documents, {last_report - started:.0f} s",
                  file=sys.stderr, flush=True)
    return np.concatenate(out)


def n_blocks(stream_len: int, seq_len: int) -> int:
    return max(0, (stream_len - 1) // seq_len)


def blocks_of(stream: np.ndarray, seq_len: int) -> np.ndarray:
    """(N, seq_len + 1) windows with stride ``seq_len``: a view, no copy."""
    n = n_blocks(len(stream), seq_len)
    if n == 0:
        return np.empty((0, seq_len + 1), dtype=stream.dtype)
    return np.lib.stride_tricks.sliding_window_view(stream[: n * seq_len + 1], seq_len + 1)[::seq_len]


def scored_targets(stream: np.ndarray, seq_len: int) -> np.ndarray:
    """The tokens the blocks score as targets: ``stream[1 : N*T + 1]``."""
    return stream[1 : n_blocks(len(stream), seq_len) * seq_len + 1]


def documents_in(stream: np.ndarray, eot: int) -> int:
    """How many documents a packed stream (starting with EOT) touches, a cut last one included."""
    return int((stream == eot).sum()) - 1 + int(stream[-1] != eot)


def storage_dtype(vocab_size: int) -> type:
    return np.uint16 if vocab_size <= 2**16 else np.uint32
