"""Fixed-length token blocks and the step-indexed sampler every finite corpus trains from.

A corpus is an int array of shape (N, seq_len + 1): each row is an input block plus the
next-token target shifted by one. Batch k of training is a pure function of (seed, k):
the sample stream is the concatenation of per-epoch permutations, so resuming at step k
reproduces exactly the batches an uninterrupted run would see, and every variant trained
with the same seed sees the same data in the same order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import numpy as np
import torch
from torch.utils.data import Dataset, Sampler

from ffn_zoo.errors import DataError

if TYPE_CHECKING:
    from ffn_zoo.data.extra_val import ValSet
    from ffn_zoo.data.stream import TokenStream
    from ffn_zoo.data.tokenizer import Tokenizer


@dataclass
class Corpus:
    """What the training loop needs from any data source."""

    name: str
    vocab_size: int
    train: np.ndarray | None  # (N, seq_len + 1) token ids; None when training streams (train_stream)
    val: np.ndarray  # (M, seq_len + 1) token ids, identical for every variant and seed
    optimal_val_loss: float | None = None  # Bayes-optimal nats/token on val, when the generator is known
    val_bytes: int | None = None  # UTF-8 bytes of the text whose tokens val scores, for bits-per-byte
    description: str = ""
    train_stream: TokenStream | None = None  # an endless packed stream instead of train blocks (hub C4)
    tokenizer: Tokenizer | None = None  # real text: what made the ids (None for the toy corpus)
    extra_val: dict[str, ValSet] = field(default_factory=dict)  # data.extra_val: more held-out sets, by name

    def __post_init__(self) -> None:
        if (self.train is None) == (self.train_stream is None):
            raise DataError(f"{self.name}: give exactly one of train blocks and a train stream")
        for split in ("train", "val"):
            blocks = getattr(self, split)
            if blocks is not None and (blocks.ndim != 2 or len(blocks) == 0):
                raise DataError(f"{self.name}: the {split} split holds no complete block of seq_len + 1 tokens")
        top = int(max(self.train.max() if self.train is not None else 0, self.val.max()))
        if top >= self.vocab_size:
            raise DataError(f"{self.name}: token id {top} is outside the vocabulary of {self.vocab_size}")

    @property
    def seq_len(self) -> int:
        return self.val.shape[1] - 1


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
