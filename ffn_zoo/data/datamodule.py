"""LightningDataModule over a :class:`Corpus`: step-indexed training batches, the whole fixed validation split.

Finite corpora sample blocks with :class:`StepSampler`; a streamed corpus (hub C4) packs its
stream in one background DataLoader worker. Either way batch k depends on (seed, k) only.
"""

from __future__ import annotations

import os
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from ffn_zoo.data.blocks import Blocks, StepSampler
from ffn_zoo.data.stream import StreamBatches
from ffn_zoo.data.types import Corpus


class LMDataModule(L.LightningDataModule):
    def __init__(self, corpus: Corpus, batch_size: int, val_batch_size: int, seed: int, num_workers: int = 0) -> None:
        super().__init__()
        self.corpus, self.batch_size, self.val_batch_size = corpus, batch_size, val_batch_size
        self.seed, self.num_workers = seed, num_workers
        self.sampler: StepSampler | None = None
        self.stream: StreamBatches | None = None  # set instead of the sampler for a streamed corpus

    def _on_cuda(self) -> bool:
        """Pinned host batches on a GPU: ``transfer_batch_to_device``'s non-blocking copy is then truly asynchronous."""
        return self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"

    def _rank_world(self) -> tuple[int, int]:
        return (self.trainer.global_rank, self.trainer.world_size) if self.trainer is not None else (0, 1)

    def train_dataloader(self) -> DataLoader:
        rank, world = self._rank_world()
        start = self.trainer.global_step if self.trainer is not None else 0  # resume at the exact next batch
        if self.corpus.train_stream is not None:
            self.stream = StreamBatches(self.corpus.train_stream, self.batch_size, self.seed, rank, world)
            self.stream.start_step = start
            # one worker: a second would repeat the stream; the parent tokenized validation with the Rust
            # thread pool, which must not be used across fork (tokenizers would warn and disable it anyway)
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
            return DataLoader(self.stream, batch_size=None, num_workers=1, prefetch_factor=8,
                              pin_memory=self._on_cuda())
        self.sampler = StepSampler(len(self.corpus.train), self.batch_size, self.seed, rank, world)
        self.sampler.start_step = start
        return DataLoader(
            Blocks(self.corpus.train), sampler=self.sampler, batch_size=None, num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0, pin_memory=self._on_cuda(),
        )

    def _val_loader(self, blocks: np.ndarray) -> DataLoader:
        rank, world = self._rank_world()
        rows = list(range(rank, len(blocks), world))  # each rank a disjoint share; sums are all-reduced
        batches = [rows[i : i + self.val_batch_size] for i in range(0, len(rows), self.val_batch_size)]
        return DataLoader(Blocks(blocks), sampler=batches, batch_size=None)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """The main split; with data.extra_val, a list: the main split first (dataloader 0), then each set."""
        main = self._val_loader(self.corpus.val)
        if not self.corpus.extra_val:
            return main
        return [main, *(self._val_loader(s.val) for s in self.corpus.extra_val.values())]

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "batch_size": self.batch_size}

    def transfer_batch_to_device(self, batch: torch.Tensor, device: torch.device, dataloader_idx: int) -> torch.Tensor:
        return batch.to(device, non_blocking=True)
