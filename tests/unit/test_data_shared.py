"""The real corpora in ../shared/data build as the documented commands configure them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.data import build_corpus
from ffn_zoo.data.text import split_tail

pytestmark = pytest.mark.data


def data_cfg(overrides: list[str], cache: Path) -> dict:
    return OmegaConf.to_container(compose([*overrides, f"data.cache_dir={cache}"]).data, resolve=True)


def test_c4_sample_and_more_with_bpe(shared_data: Path, tmp_path: Path) -> None:
    c4, more = shared_data / "c4", shared_data / "c4-more"
    train = [c4 / "c4-train.00000-of-01024.first1000.jsonl", more / "princeton-nlp_LLM-Shearing.sample_c4-rp2.jsonl",
             more / "intel_e2eAIOK.tiny_c4_sample.dedup.jsonl.gz"]
    cfg = data_cfg(["model=mini", "data=c4", f"data.train_files=[{','.join(map(str, train))}]",
                    f"data.val_files={c4 / 'c4-sample.00000-of-00001.json.gz'}", "tokenizer=bpe",
                    "tokenizer.vocab_size=4096"], tmp_path)
    corpus = build_corpus(cfg)
    assert corpus.vocab_size == 4096 and corpus.seq_len == 128
    assert corpus.val.shape == (1024, 129)  # data.val_tokens = 131,072 scored tokens by default
    assert 3 < corpus.val_bytes / (1024 * 128) < 6  # bytes per BPE token on English web text
    assert corpus.train.size > 1_000_000


def test_tinyshakespeare_split(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "tinyshakespeare" / "input.txt"
    head, tail = split_tail(path.read_text(), 0.1)
    assert head + tail == path.read_text() and head.endswith("\n")
    assert abs(len(tail) / 1_115_394 - 0.1) < 0.001
    corpus = build_corpus(data_cfg(["data=tinyshakespeare", f"data.train={path}", "tokenizer=bytes"], tmp_path))
    # bytes tokenizer: EOT + tail bytes + EOT, cut to whole blocks of 128; every target but an EOT is a byte
    n_bytes = len(tail.encode())
    assert corpus.val_bytes == min((n_bytes + 1) // 128 * 128, n_bytes)
    assert corpus.val.shape[0] == (n_bytes + 1) // 128


def test_wikitext2_valid_and_test(shared_data: Path, tmp_path: Path) -> None:
    wt = shared_data / "wikitext-2"
    corpus = build_corpus(data_cfg(["data=wikitext2", f"data.train={wt / 'wiki.valid.tokens'}",
                                    f"data.val={wt / 'wiki.test.tokens'}", "tokenizer=bytes", "data.val_tokens=65536"],
                                   tmp_path))
    assert corpus.val.shape == (512, 129) and corpus.val_bytes == 65536  # one document: no EOT among the targets


def test_wikipedia_shard_subset_with_a_c4_held_out_set(shared_data: Path, tmp_path: Path) -> None:
    c4_val = shared_data / "c4" / "c4-sample.00000-of-00001.json.gz"
    root = shared_data / "wikipedia-en"
    cfg = data_cfg(["model=mini", "data=wikipedia", f"data.root={root}", "data.train_shards=1", "data.train_docs=60",
                    "tokenizer.vocab_size=1024", "tokenizer.train_docs=60", "data.val_tokens=16384",
                    f"+data.extra_val.c4.files={c4_val}"], tmp_path)
    corpus = build_corpus(cfg)
    assert corpus.name == "wikipedia" and corpus.vocab_size == 1024
    assert corpus.val.shape == (128, 129) and corpus.extra_val["c4"].val.shape == (128, 129)  # 16,384 tokens each
    assert corpus.train.size > 500_000  # 60 long articles (~17 k characters each)
    assert corpus.train.dtype == corpus.val.dtype == corpus.extra_val["c4"].val.dtype
    assert not np.array_equal(corpus.val, corpus.extra_val["c4"].val)
    assert 2 < corpus.extra_val["c4"].val_bytes / 16384 < 5  # bytes per token of a 1,024-entry BPE on English
    again = build_corpus(cfg)
    assert "cached" in again.description and "cached" in again.extra_val["c4"].description
    np.testing.assert_array_equal(again.train, corpus.train)
