"""The token and tokenizer caches: reused (no re-tokenizing, identical arrays), invalidated by any change of
inputs or settings, and never left half-written."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

import ffn_zoo.data.cache as cache_mod
import ffn_zoo.data.tokenizer as tokenizer_mod
from ffn_zoo.data import build_corpus
from ffn_zoo.data.cache import cache_root

TRAIN = "".join(f"Line {i}: the cat sat on mat number {i % 7}, then ran to the door.\n" for i in range(300))


class Spy:
    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def __call__(self, *a, **k):
        self.calls += 1
        return self.fn(*a, **k)


@pytest.fixture
def spies(monkeypatch):
    encode = Spy(tokenizer_mod.HFTokenizer.encode_batch)
    monkeypatch.setattr(tokenizer_mod.HFTokenizer, "encode_batch", lambda self, texts: encode(self, texts))
    train = Spy(tokenizer_mod.train_bpe)
    monkeypatch.setattr(tokenizer_mod, "train_bpe", train)
    return encode, train


def cfg(tmp_path: Path, **kw) -> dict:
    path = tmp_path / "corpus.txt"
    if not path.exists():
        path.write_text(TRAIN)
    base = {"name": "text", "seq_len": 16, "train": str(path), "val": None, "val_fraction": 0.1, "val_tokens": None,
            "cache_dir": str(tmp_path / "cache"),
            "tokenizer": {"kind": "bpe", "vocab_size": 300, "min_frequency": 2, "train_docs": None}}
    return {**base, **kw}


def test_second_build_reuses_tokenizer_and_tokens(tmp_path, spies):
    encode, train = spies
    first = build_corpus(cfg(tmp_path))
    assert (train.calls, encode.calls) == (1, 2)  # trained once; train and val tokenized once each
    second = build_corpus(cfg(tmp_path))
    assert (train.calls, encode.calls) == (1, 2)  # nothing trained or tokenized again
    assert np.array_equal(first.train, second.train) and np.array_equal(first.val, second.val)
    assert (first.vocab_size, first.val_bytes) == (second.vocab_size, second.val_bytes)
    assert "cached" in second.description
    # another val_tokens setting: new packed streams, same tokenizer (it depends on the training data only)
    build_corpus(cfg(tmp_path, val_tokens=32))
    assert (train.calls, encode.calls) == (1, 4)


def test_the_same_bytes_elsewhere_or_touched_hit_the_cache(tmp_path, spies):
    """Keyed by content: a copy at another path, or the file re-laid with a new mtime, is the same input."""
    encode, train = spies
    first = build_corpus(cfg(tmp_path))
    src = Path(cfg(tmp_path)["train"])
    os.utime(src, (1_000_000_000, 1_000_000_000))  # a shared volume laid out afresh: same bytes, new mtime
    copy = tmp_path / "elsewhere" / src.name
    copy.parent.mkdir()
    copy.write_bytes(src.read_bytes())
    for path in (src, copy):
        again = build_corpus(cfg(tmp_path, train=str(path)))
        assert (train.calls, encode.calls) == (1, 2)  # neither re-trained nor re-tokenized
        assert np.array_equal(first.train, again.train) and "cached" in again.description


@pytest.mark.parametrize("change", ["file", "seq_len", "vocab", "tokenizer_kind"])
def test_changes_invalidate(tmp_path, spies, change):
    encode, train = spies
    base = build_corpus(cfg(tmp_path))
    calls = encode.calls
    if change == "file":
        p = Path(cfg(tmp_path)["train"])
        p.write_text(TRAIN + "A new line at the end.\n")
        new = build_corpus(cfg(tmp_path))
        assert train.calls == 2 and encode.calls == calls + 2
        assert new.train.size != base.train.size or not np.array_equal(new.val, base.val)
    elif change == "seq_len":
        new = build_corpus(cfg(tmp_path, seq_len=8))
        assert new.train.shape[1] == 9 and encode.calls == calls + 2 and train.calls == 1
    elif change == "vocab":
        new = build_corpus(cfg(tmp_path, tokenizer={"kind": "bpe", "vocab_size": 280, "min_frequency": 2, "train_docs": None}))
        assert train.calls == 2 and new.vocab_size <= 280
    else:
        new = build_corpus(cfg(tmp_path, tokenizer={"kind": "bytes"}))
        assert new.vocab_size == 257 and train.calls == 1


def test_interrupted_write_leaves_no_entry(tmp_path, monkeypatch):
    real = cache_mod._atomic_save_npy
    calls = []

    def dies_on_second(path, array):
        calls.append(path.name)
        if len(calls) == 2:
            raise KeyboardInterrupt  # killed while writing val.npy
        real(path, array)

    monkeypatch.setattr(cache_mod, "_atomic_save_npy", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        build_corpus(cfg(tmp_path))
    entries = list((tmp_path / "cache" / "tokens").iterdir())
    assert len(entries) == 1 and not (entries[0] / "meta.json").exists()  # incomplete: not used
    assert not [p for p in entries[0].iterdir() if p.name.startswith(".")]  # no temporary left behind
    monkeypatch.setattr(cache_mod, "_atomic_save_npy", real)
    corpus = build_corpus(cfg(tmp_path))  # rebuilt cleanly
    assert (entries[0] / "meta.json").exists() and corpus.train.shape[1] == 17


def test_a_full_disk_while_caching_names_the_file_and_leaves_no_entry(tmp_path, monkeypatch):
    real_save = np.save

    def fills_up(f, array):
        real_save(f, array[: len(array) // 2])  # half the array is on disk, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", fills_up)
    with pytest.raises(OSError, match=r"No space left on device: '.*\.npy'") as e:
        build_corpus(cfg(tmp_path))
    assert e.value.errno == errno.ENOSPC  # the cache's file, not the temporary, is named
    entries = list((tmp_path / "cache" / "tokens").iterdir())
    assert len(entries) == 1 and [p.name for p in entries[0].iterdir()] == []  # nothing half-written, no meta.json


def test_cache_root_setting_env_default(tmp_path, monkeypatch):
    monkeypatch.delenv("FFNZOO_CACHE", raising=False)
    assert cache_root(None) == Path(".cache/ffn_zoo")
    monkeypatch.setenv("FFNZOO_CACHE", str(tmp_path / "env"))
    assert cache_root(None) == tmp_path / "env"
    assert cache_root(str(tmp_path / "set")) == tmp_path / "set"
    assert os.fspath(cache_root("~/x")).startswith(os.path.expanduser("~"))
