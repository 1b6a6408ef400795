"""An endless training stream: documents (shuffled, seeded) -> tokens -> packed blocks, on the fly.

Used for corpora too large to pack ahead (the hub's C4). Batch k is a pure function of
(seed, k): the documents come in a seeded order, are packed exactly as finite corpora are
(``EOT doc EOT doc ...``, windows of T + 1 with stride T), and resuming at step k replays the
stream and skips the first k global batches (deterministic re-skipping: it costs re-tokenizing
them, never a different batch). Runs in one DataLoader worker, so tokenization overlaps training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ffn_zoo.data.blocks import rank_slice
from ffn_zoo.data.pack import batched
from ffn_zoo.data.tokenizer import Tokenizer
from ffn_zoo.errors import DataError


@dataclass
class TokenStream:
    """Documents in a seeded order, packed into (seq_len + 1)-token windows.

    ``docs(seed, epoch)`` yields the documents of one pass; a pass that ends starts the next epoch.
    """

    docs: Callable[[int, int], Iterable[str]]
    tokenizer: Tokenizer
    seq_len: int
    chunk_docs: int = 64  # documents tokenized per call (the Rust tokenizer parallelises within a call)

    def blocks(self, seed: int) -> Iterator[np.ndarray]:
        T, eot = self.seq_len, np.array([self.tokenizer.eot_id], dtype=np.int32)
        buf = eot
        epoch = 0
        while True:
            produced = False
            for docs in batched(self.docs(seed, epoch), self.chunk_docs):
                ids = self.tokenizer.encode_batch(docs)
                buf = np.concatenate([buf, *[np.concatenate([i.astype(np.int32, copy=False), eot]) for i in ids]])
                n = (len(buf) - 1) // T
                for i in range(n):
                    produced = True
                    yield buf[i * T : i * T + T + 1]  # (T + 1,)
                buf = buf[n * T :]  # the last target is the next window's first input
            if not produced:
                raise DataError("the training stream yielded no complete block")
            epoch += 1

    def batches(self, batch_size: int, seed: int, start_step: int = 0) -> Iterator[np.ndarray]:
        """Global batches (batch_size, T + 1) from step ``start_step`` on."""
        blocks = self.blocks(seed)
        for _ in range(start_step * batch_size):  # deterministic re-skipping to the resume point
            next(blocks)
        while True:
            yield np.stack([next(blocks) for _ in range(batch_size)])


class StreamBatches(IterableDataset):
    """Each rank's slice of global batch k, for k = start_step, start_step + 1, ..."""

    def __init__(self, stream: TokenStream, batch_size: int, seed: int, rank: int = 0, world_size: int = 1) -> None:
        self.stream, self.batch_size, self.seed = stream, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.share = rank_slice(batch_size, rank, world_size)
        self.start_step = 0  # set by resume

    def __iter__(self) -> Iterator[torch.Tensor]:
        info = get_worker_info()
        if info is not None and info.num_workers > 1:
            raise RuntimeError("a token stream must be read by one DataLoader worker, or its batches would repeat")
        for batch in self.stream.batches(self.batch_size, self.seed, self.start_step):
            yield torch.from_numpy(batch[self.share]).long()  # (B / world_size, T + 1)
