"""Tokenizers by kind (``tokenizer.kind`` in ``configs/tokenizer/*.yaml``): text -> token ids.

- ``bytes``: the 256 UTF-8 byte values plus ``<|endoftext|>`` (id 256). No training, no dependency.
- ``bpe``: a byte-level BPE (GPT-2's scheme) trained with HF ``tokenizers`` on the training split,
  cached under ``<cache>/tokenizers/`` keyed by (training files, settings): a sweep trains it once.
- ``hf``: any tokenizer on the Hugging Face hub with a ``tokenizer.json``, e.g. ``google-t5/t5-base``
  (the SentencePiece vocabulary Shazeer 2020 used). Needs the hub or its local cache.

Every tokenizer has an end-of-text id that separates packed documents, and can say how many bytes
of text a run of token ids stands for (the denominator of bits-per-byte).
"""

from __future__ import annotations

import hashlib
import itertools
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ffn_zoo.atomic import atomic_write_bytes
from ffn_zoo.data.cache import fingerprint
from ffn_zoo.errors import ConfigError, DataError, UnknownNameError, require_positive

EOT = "<|endoftext|>"
HUB_EOT_CANDIDATES = (EOT, "</s>", "<eos>", "<|end_of_text|>", "[SEP]")


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, end-of-text 256."""

    kind = "bytes"
    vocab_size = 257
    eot_id = 256
    fingerprint = "bytes-v1"

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8"), dtype=np.uint8).astype(np.int32) for t in texts]

    def text_bytes(self, ids: np.ndarray) -> int:
        return int((np.asarray(ids) < 256).sum())


@lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level map, inverted: the printable character standing for each byte -> the byte."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:  # bytes that are not printable Latin-1 are shifted past 255
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` (trained BPE or from the hub) behind the same small interface."""

    def __init__(self, tok: Any, kind: str, eot: str, byte_level: bool) -> None:
        eot_id = tok.token_to_id(eot)
        if eot_id is None:
            raise ConfigError(f"tokenizer has no end-of-text token {eot!r}; set tokenizer.eot")
        self.tok, self.kind, self.eot_id = tok, kind, int(eot_id)
        self.vocab_size = int(tok.get_vocab_size(with_added_tokens=True))
        self.fingerprint = f"{kind}-" + hashlib.sha256(tok.to_str().encode()).hexdigest()[:16]
        self._byte_lengths: np.ndarray | None = None
        if byte_level:  # exact bytes per token: map each token's characters back to the bytes they encode
            alphabet, specials = byte_level_alphabet(), set(tok.get_added_tokens_decoder())  # specials: 0 bytes
            lengths = np.zeros(self.vocab_size, dtype=np.int64)
            for token, i in tok.get_vocab(with_added_tokens=True).items():
                if i not in specials and token != eot:
                    lengths[i] = sum(1 for ch in token if ch in alphabet)
            self._byte_lengths = lengths

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        # encode_batch_fast: the same ids without character offsets, which we never read
        return [np.asarray(e.ids, dtype=np.int32) for e in self.tok.encode_batch_fast(texts, add_special_tokens=False)]

    def text_bytes(self, ids: np.ndarray) -> int:
        ids = np.asarray(ids)
        if self._byte_lengths is not None:
            return int(self._byte_lengths[ids].sum())
        # a SentencePiece-style vocabulary: the UTF-8 length of the decoded text, one document at a time
        bounds = np.flatnonzero(ids == self.eot_id)
        total, start = 0, 0
        for end in [*bounds.tolist(), len(ids)]:
            if end > start:
                total += len(self.tok.decode(ids[start:end].tolist(), skip_special_tokens=True).encode("utf-8"))
            start = end + 1
        return total


Tokenizer = ByteTokenizer | HFTokenizer


def train_bpe(texts: Iterable[str], vocab_size: int, min_frequency: int) -> Any:
    """A byte-level BPE with ``<|endoftext|>`` as id 0, trained on ``texts``."""
    from tokenizers import Tokenizer as HFTok, decoders, models, pre_tokenizers, trainers

    tok = HFTok(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


def load_bpe(
    cfg: Mapping[str, Any], source_id: Any, train_texts: Callable[[], Iterable[str]], cache: Path
) -> HFTokenizer:
    """The BPE for this training data and these settings: from the cache, or trained now and cached.

    ``source_id`` identifies the training data (file identities or a hub name); ``train_texts``
    yields the training documents and is only called on a cache miss.
    """
    from tokenizers import Tokenizer as HFTok

    require_positive(**{"tokenizer.vocab_size": cfg["vocab_size"], "tokenizer.train_docs": cfg.get("train_docs")})
    if cfg["vocab_size"] <= 257:
        raise ConfigError(f"tokenizer.vocab_size={cfg['vocab_size']} must exceed the 256 byte symbols + end-of-text")
    settings = {k: cfg.get(k) for k in ("vocab_size", "min_frequency", "train_docs")}
    path = cache / "tokenizers" / f"bpe-{fingerprint('bpe', source_id, settings)}.json"
    if path.is_file():
        try:
            return HFTokenizer(HFTok.from_file(str(path)), "bpe", EOT, byte_level=True)
        except Exception:  # an unreadable file (should not happen with atomic writes): retrain
            pass
    limit = cfg.get("train_docs")
    print(f"tokenizer: training a byte-level BPE (vocab {cfg['vocab_size']:,}) on at most {limit or 'all'} "
          f"training documents (tokenizer.train_docs); cached in {path.parent}", file=sys.stderr, flush=True)
    texts = itertools.islice(train_texts(), limit)  # stops reading a stream after ``limit`` documents
    tok = train_bpe(texts, int(cfg["vocab_size"]), int(cfg.get("min_frequency") or 2))
    atomic_write_bytes(path, tok.to_str().encode())
    return HFTokenizer(tok, "bpe", EOT, byte_level=True)


def load_hub_tokenizer(cfg: Mapping[str, Any]) -> HFTokenizer:
    """A hub tokenizer by name (``tokenizer.name``); one-line error when the hub is unreachable."""
    from tokenizers import Tokenizer as HFTok

    name = cfg.get("name")
    if not name:
        raise ConfigError("tokenizer=hf needs tokenizer.name, e.g. tokenizer.name=google-t5/t5-base")
    try:
        tok = HFTok.from_pretrained(name, revision=cfg.get("revision") or "main")
    except Exception as e:  # offline, unknown repo, no tokenizer.json
        first = str(e).splitlines()[0][:200] if str(e) else ""
        raise DataError(f"cannot load hub tokenizer {name!r} ({type(e).__name__}: {first}); "
                        f"offline, use tokenizer=bpe or tokenizer=bytes") from None
    eot = cfg.get("eot")
    if not eot:
        vocab = tok.get_vocab(with_added_tokens=True)
        eot = next((c for c in HUB_EOT_CANDIDATES if c in vocab), None)
        if eot is None:
            raise ConfigError(f"hub tokenizer {name!r} has none of {HUB_EOT_CANDIDATES}; set tokenizer.eot")
    byte_level = type(tok.pre_tokenizer).__name__ == "ByteLevel" if tok.pre_tokenizer is not None else False
    return HFTokenizer(tok, "hf", eot, byte_level=byte_level)


TOKENIZER_KINDS = ("bpe", "hf", "bytes")


def build_tokenizer(
    cfg: Mapping[str, Any] | None, source_id: Any, train_texts: Callable[[], Iterable[str]], cache: Path
) -> Tokenizer:
    """The tokenizer ``cfg`` names; ``train_texts`` is used only to train a BPE that is not cached yet."""
    kind = (cfg or {}).get("kind", "bpe")
    if kind == "bytes":
        return ByteTokenizer()
    if kind == "bpe":
        return load_bpe(cfg, source_id, train_texts, cache)
    if kind == "hf":
        return load_hub_tokenizer(cfg)
    raise UnknownNameError("tokenizer", kind, TOKENIZER_KINDS)
