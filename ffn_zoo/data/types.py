"""What a data source hands the training loop: the :class:`Corpus` (train and validation blocks, and what scores
them) and its extra held-out sets (:class:`ValSet`). Every builder in this package ends in one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ffn_zoo.errors import DataError

if TYPE_CHECKING:  # both lie below this module: the imports point down
    from ffn_zoo.data.stream import TokenStream
    from ffn_zoo.data.tokenizer import Tokenizer


@dataclass
class ValSet:
    """One extra held-out set (``data.extra_val``): its blocks, and the bytes of text its scored targets stand for."""

    name: str
    val: np.ndarray  # (M, seq_len + 1) token ids
    val_bytes: int | None
    description: str


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
