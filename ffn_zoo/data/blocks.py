"""Fixed-length token blocks and the step-indexed sampler every finite corpus trains from.

A corpus's split is an int array of shape (N, seq_len + 1): each row is an input block plus the
next-token target shifted by one. Batch k of training is a pure function of (seed, k):
the sample stream is the concatenation of per-epoch permutations, so resuming at step k
reproduces exactly the batches an uninterrupted run would see, and every variant trained
with the same seed sees the same data in the same order.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ffn_zoo.errors import DataError


class Blocks(Dataset):
    """Indexed by a *list* of rows, so one fancy-index builds a whole batch (no per-sample collate)."""

    def __init__(self, blocks: np.ndarray) -> None:
        blocks = np.ascontiguousarray(blocks)
        if not blocks.flags.writeable:  # a read-only view of a packed stream (or a memmap): own a copy
            blocks = blocks.copy()
        self.blocks = torch.from_numpy(blocks)

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, rows: list[int]) -> torch.Tensor:
        return self.blocks[rows].long()  # (B, T + 1)


def rank_slice(batch_size: int, rank: int, world_size: int) -> slice:
    """This rank's share of a global batch: ``world_size`` equal, disjoint slices of it."""
    if batch_size % world_size:
        raise DataError(f"global batch {batch_size} is not divisible by {world_size} devices")
    per_rank = batch_size // world_size
    return slice(rank * per_rank, (rank + 1) * per_rank)


class StepSampler(Sampler[list[int]]):
    """Infinite stream of batches; batch k is determined by (seed, k) alone.

    With ``world_size`` > 1 each rank takes its slice of the same global batch, so the
    global batch and the data order do not depend on the number of devices.
    """

    def __init__(self, n: int, batch_size: int, seed: int, rank: int = 0, world_size: int = 1) -> None:
        self.n, self.batch_size, self.seed = n, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.share = rank_slice(batch_size, rank, world_size)
        self.start_step = 0  # set by resume
        self._perm_epoch, self._perm = -1, np.empty(0, dtype=np.int64)

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._perm_epoch = epoch
        return self._perm

    def global_batch(self, step: int) -> list[int]:
        start = step * self.batch_size
        out = []
        for g in range(start, start + self.batch_size):
            out.append(int(self._permutation(g // self.n)[g % self.n]))
        return out

    def __iter__(self) -> Iterator[list[int]]:
        step = self.start_step
        while True:
            yield self.global_batch(step)[self.share]
            step += 1
