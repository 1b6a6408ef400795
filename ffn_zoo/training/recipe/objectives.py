"""Training objectives: a batch of token rows -> (model inputs, targets). ``objective=clm|mlm``.

- ``clm`` (default): next-token prediction with causal attention. A row of seq_len + 1 tokens gives
  inputs ``row[:-1]`` and targets ``row[1:]``; every position is scored.
- ``mlm``: BERT's masked language modelling (Devlin et al. 2018, §3.1) with bidirectional attention.
  The inputs are the *same* first seq_len tokens of each row (the last token is unused, so both
  objectives read the same text at the same context length); 15% of positions are chosen, of which
  80% become [MASK], 10% a random token, 10% stay as they are. Only chosen positions are scored
  (targets elsewhere are :data:`IGNORE_INDEX`), so ``val/ppl`` is the *masked-token* perplexity.

[MASK] is one extra id past the corpus vocabulary: the model's vocabulary is ``corpus vocab + 1``
under MLM (:func:`model_vocab_size`), and random replacements are drawn from the corpus vocabulary only.
Validation masks are a fixed function of each row's tokens and ``mask_seed`` (:func:`fixed_masks`),
so every variant, seed, batch size and device count is scored on exactly the same masked positions.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from typing import Any

import numpy as np
import torch

from ffn_zoo.data.types import Corpus
from ffn_zoo.errors import ConfigError, UnknownNameError

IGNORE_INDEX = -100  # F.cross_entropy's default ignore_index: targets that carry no loss
OBJECTIVES = ("clm", "mlm")


def check_objective(name: str) -> str:
    if name not in OBJECTIVES:
        raise UnknownNameError("objective", name, OBJECTIVES)
    return name


def model_vocab_size(objective: str, corpus_vocab: int) -> int:
    """The model's vocabulary: the corpus's, plus the [MASK] id (= ``corpus_vocab``) under MLM."""
    return corpus_vocab + 1 if check_objective(objective) == "mlm" else corpus_vocab


def mask_tokens(
    tokens: torch.Tensor, vocab_size: int, mask_id: int, *, mask_prob: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of ``tokens`` (B, T): (inputs (B, T), targets (B, T) with IGNORE_INDEX where unchosen).

    Each position is chosen independently with ``mask_prob``; a chosen one becomes ``mask_id`` with
    probability 0.8, a uniform random id in [0, vocab_size) with 0.1, and stays itself with 0.1.
    """
    draw_on = generator.device if generator is not None else tokens.device  # a generator draws on its own device
    u = torch.rand(tokens.shape, generator=generator, device=draw_on).to(tokens.device)  # (B, T): choose
    r = torch.rand(tokens.shape, generator=generator, device=draw_on).to(tokens.device)  # (B, T): how to corrupt
    rand_ids = torch.randint(0, vocab_size, tokens.shape, generator=generator, device=draw_on).to(tokens.device)
    chosen = u < mask_prob  # (B, T)
    targets = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE_INDEX))
    inputs = torch.where(chosen & (r < 0.8), torch.full_like(tokens, mask_id), tokens)
    inputs = torch.where(chosen & (r >= 0.8) & (r < 0.9), rand_ids, inputs)
    return inputs, targets


def fixed_masks(tokens: torch.Tensor, vocab_size: int, mask_id: int, seed: int, mask_prob: float = 0.15
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`mask_tokens` with a generator seeded per row from (``seed``, the row's tokens): the same
    row is always masked the same way, however the validation split is batched or sharded."""
    rows = tokens.detach().cpu()
    out_in, out_tg = [], []
    for row in rows:  # (T,)
        digest = hashlib.blake2b(row.numpy().astype(np.int64).tobytes(), digest_size=8).digest()
        g = torch.Generator().manual_seed((int.from_bytes(digest, "little") ^ seed) & (2**63 - 1))
        x, y = mask_tokens(row[None], vocab_size, mask_id, mask_prob=mask_prob, generator=g)
        out_in.append(x)
        out_tg.append(y)
    return torch.cat(out_in).to(tokens.device), torch.cat(out_tg).to(tokens.device)


class Objective:
    """Turns a batch of rows (B, seq_len + 1) into (inputs (B, T), targets (B, T)) for the loss."""

    def __init__(self, name: str = "clm", corpus_vocab: int | None = None, mask_prob: float = 0.15,
                 mask_seed: int = 0) -> None:
        self.name = check_objective(name)
        self.corpus_vocab, self.mask_prob, self.mask_seed = corpus_vocab, mask_prob, mask_seed
        if self.name == "mlm" and corpus_vocab is None:
            raise ValueError("mlm needs the corpus vocabulary size (the [MASK] id is corpus_vocab)")

    @property
    def mask_id(self) -> int | None:
        return self.corpus_vocab if self.name == "mlm" else None

    def __call__(self, batch: torch.Tensor, train: bool) -> tuple[torch.Tensor, torch.Tensor]:
        if self.name == "clm":
            return batch[:, :-1], batch[:, 1:]  # (B, T) inputs, (B, T) next-token targets
        tokens = batch[:, :-1]  # (B, T): the same text the CLM inputs are
        if train:
            return mask_tokens(tokens, self.corpus_vocab, self.mask_id, mask_prob=self.mask_prob)
        return fixed_masks(tokens, self.corpus_vocab, self.mask_id, self.mask_seed, self.mask_prob)

    def inputs(self, batch: torch.Tensor) -> torch.Tensor:
        """Model inputs of a validation batch (what the activation statistics run on)."""
        return self(batch, train=False)[0]


def build_objective(name: str, mlm: Any, corpus_vocab: int) -> Objective:
    """The objective ``objective`` names; under MLM with the ``mlm`` config's masking (``mask_prob``, ``mask_seed``)."""
    if check_objective(str(name)) == "clm":
        return Objective("clm")
    mask_prob = float(mlm.mask_prob)
    if not 0.0 < mask_prob < 1.0:
        raise ConfigError(f"mlm.mask_prob={mask_prob} must be in (0, 1)")
    return Objective("mlm", corpus_vocab, mask_prob, int(mlm.mask_seed))


def prepare_objective(name: str, mlm: Any, corpus: Corpus) -> tuple[Corpus, Objective]:
    """The run's objective (``objective``, and the ``mlm`` config under MLM) and the corpus as it sees it.

    Under MLM the corpus's CLM floor (``optimal_val_loss``) and bits-per-byte do not apply to a
    masked-token loss, so they are dropped rather than reported beside a number they do not bound.
    """
    objective = build_objective(name, mlm, corpus.vocab_size)
    if objective.name == "clm":
        return corpus, objective
    desc = f"{corpus.description}; objective mlm ({objective.mask_prob:.0%} masked, [MASK] = id {corpus.vocab_size})"
    seen = copy.copy(corpus)  # shallow: shares the token arrays, and skips re-validating (a scan of train)
    seen.optimal_val_loss, seen.val_bytes, seen.description = None, None, desc
    seen.extra_val = {k: dataclasses.replace(v, val_bytes=None) for k, v in corpus.extra_val.items()}
    return seen, objective
