"""Packing loses and adds no tokens; tokenizers count text bytes exactly; val/bpb matches a hand computation."""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import pytest
import torch
from torch import nn

from ffn_zoo.data import build_corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.data.pack import blocks_of, pack_stream, scored_targets
from ffn_zoo.data.tokenizer import EOT, ByteTokenizer, HFTokenizer, train_bpe
from ffn_zoo.training.recipe.module import LitLM

TEXTS = ["The quick brown fox jumps over the lazy dog. " * 3, "Zoë's café — naïve façade, 東京 and 😀 emoji.",
         "Line one\nLine two\n\n  indented\ttab", "short"]


@pytest.fixture(scope="module")
def bpe() -> HFTokenizer:
    return HFTokenizer(train_bpe(TEXTS * 50, vocab_size=400, min_frequency=2), "bpe", EOT, byte_level=True)


def test_pack_stream_is_eot_joined_documents():
    tok = ByteTokenizer()
    stream = pack_stream(TEXTS, tok, chunk=3)  # chunk < len(TEXTS): grouping must not matter
    expect = [256]
    for t in TEXTS:
        expect += list(t.encode()) + [256]
    assert stream.tolist() == expect


@pytest.mark.parametrize("seq_len", [1, 7, 16, 1000])
def test_blocks_lose_and_add_no_tokens(seq_len):
    stream = pack_stream(TEXTS, ByteTokenizer())
    blocks = blocks_of(stream, seq_len)
    n = (len(stream) - 1) // seq_len
    assert blocks.shape == (n, seq_len + 1)
    if n == 0:
        return
    # consecutive blocks overlap by exactly one token; inputs + last target rebuild the stream's prefix
    rebuilt = np.concatenate([blocks[:, :-1].ravel(), blocks[-1, -1:]])
    assert rebuilt.tolist() == stream[: n * seq_len + 1].tolist()
    targets = blocks[:, 1:].ravel()
    assert targets.tolist() == scored_targets(stream, seq_len).tolist()  # every target once, none invented
    assert len(stream) - 1 - len(targets) < seq_len  # only the incomplete tail is left out


def test_pieces_of_one_document_join_without_eot():
    stream = pack_stream([["abc", "def"], "gh"], ByteTokenizer())
    assert stream.tolist() == [256, *b"abcdef", 256, *b"gh", 256]


def test_bpe_roundtrip_and_exact_byte_counts(bpe):
    stream = pack_stream(TEXTS, bpe)
    assert bpe.eot_id == 0 and bpe.vocab_size <= 400
    docs = np.split(stream, np.flatnonzero(stream == bpe.eot_id))
    decoded = [bpe.tok.decode(d[1:].tolist()) for d in docs[1:-1]]
    assert decoded == TEXTS
    assert bpe.text_bytes(stream) == sum(len(t.encode("utf-8")) for t in TEXTS)
    for t in TEXTS:  # per document too, including multi-byte characters split across tokens
        assert bpe.text_bytes(bpe.encode_batch([t])[0]) == len(t.encode("utf-8"))


class Uniform(nn.Module):
    """Equal logits: NLL = ln V for every token, so the expected bpb is computable by hand."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.dummy = nn.Parameter(torch.zeros(()))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.zeros(*idx.shape, self.vocab) + 0 * self.dummy  # (B, T, V)


def test_bpb_matches_hand_computation(tmp_path):
    train, val = tmp_path / "train.txt", tmp_path / "val.txt"
    train.write_text("some training text, long enough for a block or two.\n" * 4)
    val.write_text("hello wörld\n")  # 12 characters, 13 UTF-8 bytes (ö is two)
    cfg = {"name": "text", "seq_len": 14, "train": str(train), "val": str(val), "val_fraction": None, "val_tokens": None,
           "cache_dir": str(tmp_path / "cache"), "tokenizer": {"kind": "bytes"}}
    corpus = build_corpus(cfg)
    # stream: EOT + 13 bytes + EOT = 15 tokens -> one block of 14 targets: the 13 bytes and the closing EOT
    assert corpus.val.shape == (1, 15)
    assert corpus.val_bytes == 13
    module = LitLM(Uniform(257), {"name": "adamw"}, max_steps=1, val_bytes=corpus.val_bytes, fused_loss=False)
    dm = LMDataModule(corpus, batch_size=1, val_batch_size=4, seed=0)
    trainer = L.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.validate(module, dataloaders=dm.val_dataloader(), verbose=False)
    hand = 14 * math.log2(257) / 13  # bits of all scored tokens / bytes of the text they stand for
    assert module.last_val["val/bpb"] == pytest.approx(hand, rel=1e-6)
    assert module.last_val["val/loss"] == pytest.approx(math.log(257), rel=1e-6)
