"""The hub code paths with the hub mocked at its boundary (``datasets.load_dataset``,
``tokenizers.Tokenizer.from_pretrained``): streamed C4 is deterministic and resumable, its validation
prefix is cached, hub presets load, and an unreachable hub is a one-line DataError."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import tokenizers

from ffn_zoo.data import build_corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.data.stream import StreamBatches
from ffn_zoo.errors import DataError

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def fake_docs(split: str, n: int) -> list[dict]:
    rng = np.random.default_rng(0 if split == "train" else 1)
    return [{"text": f"{split} doc {i}: " + " ".join(rng.choice(WORDS, size=rng.integers(5, 40))), "url": "u"}
            for i in range(n)]


class FakeHub:
    """Stands in for ``datasets.load_dataset``: real ``datasets`` objects, made locally."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __call__(self, name, config=None, split=None, streaming=False, **kw):
        self.calls.append((name, config, split, streaming))
        rows = fake_docs(split, 400 if split == "train" else 60)
        if streaming:
            return datasets.IterableDataset.from_generator(lambda: iter(rows))
        return datasets.Dataset.from_list(rows)


@pytest.fixture
def hub(monkeypatch) -> FakeHub:
    fake = FakeHub()
    monkeypatch.setattr(datasets, "load_dataset", fake)
    return fake


def c4_cfg(tmp_path, **kw) -> dict:
    return {"name": "c4", "seq_len": 16, "data_dir": None, "train_files": None, "val_files": None, "text_field": "text",
            "val_tokens": 256, "hub_name": "allenai/c4", "hub_config": "en", "hub_train_split": "train",
            "hub_val_split": "validation", "shuffle_buffer": 50, "cache_dir": str(tmp_path / "cache"),
            "tokenizer": {"kind": "bpe", "vocab_size": 300, "min_frequency": 2, "train_docs": 200}, **kw}


def test_streamed_c4_is_deterministic_and_resumable(tmp_path, hub):
    corpus = build_corpus(c4_cfg(tmp_path))
    assert corpus.train is None and corpus.val.shape == (16, 17)  # val_tokens 256 = 16 blocks of 16 targets
    assert ("allenai/c4", "en", "validation", True) in hub.calls
    stream = corpus.train_stream
    full = StreamBatches(stream, batch_size=4, seed=3)
    first = [b for b, _ in zip(full, range(6))]
    assert all(b.shape == (4, 17) for b in first)
    assert int(max(b.max() for b in first)) < corpus.vocab_size
    resumed = StreamBatches(stream, batch_size=4, seed=3)
    resumed.start_step = 4
    again = [b for b, _ in zip(resumed, range(2))]
    assert all(np.array_equal(a, b) for a, b in zip(again, first[4:]))  # batch k depends on (seed, k) only
    other = [b for b, _ in zip(StreamBatches(stream, batch_size=4, seed=4), range(2))]
    assert not np.array_equal(other[0], first[0])  # the seed shuffles the documents
    halves = [next(iter(StreamBatches(stream, 4, seed=3, rank=r, world_size=2))) for r in (0, 1)]
    assert np.array_equal(np.concatenate(halves), first[0])  # ranks split the same global batch


def test_stream_packs_consecutive_windows(tmp_path, hub):
    corpus = build_corpus(c4_cfg(tmp_path))
    blocks = corpus.train_stream.blocks(seed=0)
    a, b = next(blocks), next(blocks)
    assert a[0] == corpus.train_stream.tokenizer.eot_id and a[-1] == b[0]  # overlap by one token, no padding


def test_datamodule_streams_in_a_worker(tmp_path, hub):
    corpus = build_corpus(c4_cfg(tmp_path))
    dm = LMDataModule(corpus, batch_size=4, val_batch_size=8, seed=3)
    loader = dm.train_dataloader()
    assert loader.num_workers == 1 and dm.stream is not None
    got = [b for b, _ in zip(loader, range(3))]
    direct = [b for b, _ in zip(StreamBatches(corpus.train_stream, 4, seed=3), range(3))]
    assert all(np.array_equal(x, y) for x, y in zip(got, direct))


def test_validation_prefix_is_cached(tmp_path, hub):
    first = build_corpus(c4_cfg(tmp_path))
    n_val_calls = sum(c[2] == "validation" for c in hub.calls)
    second = build_corpus(c4_cfg(tmp_path))
    assert sum(c[2] == "validation" for c in hub.calls) == n_val_calls  # not streamed again
    assert np.array_equal(first.val, second.val) and first.val_bytes == second.val_bytes


def test_hub_unreachable_is_one_line(tmp_path, monkeypatch):
    def offline(*a, **k):
        raise ConnectionError("Couldn't reach 'allenai/c4' on the Hub (LocalEntryNotFoundError)\nmore detail")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match="cannot stream 'allenai/c4'.*data.data_dir") as e:
        build_corpus(c4_cfg(tmp_path))
    assert "\n" not in str(e.value)
    text = {"name": "wikitext2", "seq_len": 16, "train": None, "val": None, "val_fraction": 0.1, "val_tokens": None,
            "hub_name": "Salesforce/wikitext", "hub_config": "wikitext-2-v1", "hub_train_split": "train",
            "hub_val_split": "validation", "cache_dir": str(tmp_path / "cache"), "tokenizer": {"kind": "bytes"}}
    with pytest.raises(DataError, match="cannot load 'Salesforce/wikitext'.*data.train"):
        build_corpus(text)


def test_text_preset_from_hub(tmp_path, hub):
    cfg = {"name": "wikitext2", "seq_len": 16, "train": None, "val": None, "val_fraction": 0.1, "val_tokens": None,
           "hub_name": "Salesforce/wikitext", "hub_config": "wikitext-2-v1", "hub_train_split": "train",
           "hub_val_split": "validation", "cache_dir": str(tmp_path / "cache"), "tokenizer": {"kind": "bytes"}}
    corpus = build_corpus(cfg)
    val_text = "\n".join(r["text"] for r in fake_docs("validation", 60))
    n_bytes = len(val_text.encode())
    targets = (n_bytes + 1) // 16 * 16  # stream EOT + bytes + EOT: (len - 1) // 16 whole blocks of 16 targets
    assert corpus.val_bytes == min(targets, n_bytes)  # every scored target but an EOT is one byte
    assert ("Salesforce/wikitext", "wikitext-2-v1", "train", False) in hub.calls


def sentencepiece_like() -> tokenizers.Tokenizer:
    """A small Metaspace (SentencePiece-style) tokenizer with </s>, as t5-base's tokenizer.json is."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=60, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tok.train_from_iterator([d["text"] for d in fake_docs("train", 200)], trainer=trainer)
    return tok


def test_hf_tokenizer_from_the_hub(tmp_path, hub, monkeypatch):
    asked = []

    def from_pretrained(name, revision="main", **kw):
        asked.append(name)
        return sentencepiece_like()

    monkeypatch.setattr(tokenizers.Tokenizer, "from_pretrained", staticmethod(from_pretrained))
    corpus = build_corpus(c4_cfg(tmp_path, tokenizer={"kind": "hf", "name": "google-t5/t5-base", "eot": None}))
    assert asked[0] == "google-t5/t5-base"
    tok = corpus.train_stream.tokenizer
    assert tok.eot_id == 1 and corpus.vocab_size == tok.vocab_size  # </s> joins documents
    doc = fake_docs("train", 1)[0]["text"]  # characters the tokenizer knows (an <unk> would decode to nothing)
    assert tok.text_bytes(np.concatenate([[1], tok.encode_batch([doc])[0], [1]])) == len(doc.encode())


def test_hf_tokenizer_offline(tmp_path, monkeypatch):
    def offline(*a, **k):
        raise Exception("Model \"google-t5/t5-base\" on the Hub doesn't have a tokenizer")

    monkeypatch.setattr(tokenizers.Tokenizer, "from_pretrained", staticmethod(offline))
    text = tmp_path / "a.txt"
    text.write_text("hello world\n" * 100)
    cfg = {"name": "text", "seq_len": 16, "train": str(text), "val": None, "val_fraction": 0.1, "val_tokens": None,
           "cache_dir": str(tmp_path / "cache"), "tokenizer": {"kind": "hf", "name": "google-t5/t5-base"}}
    with pytest.raises(DataError, match="cannot load hub tokenizer 'google-t5/t5-base'.*tokenizer=bpe"):
        build_corpus(cfg)


def test_training_run_on_the_mocked_hub_stream(tmp_path, hub):
    """train.run end to end on the streamed path: the stream worker feeds Lightning, val/bpb is logged."""
    from ffn_zoo.training.recipe.build import compose
    from ffn_zoo.train import run

    cfg = compose(["model=tiny", "data=c4", "model.seq_len=16", "data.val_tokens=256", "data.batch_size=4",
                   "data.shuffle_buffer=50", f"data.cache_dir={tmp_path / 'cache'}", "tokenizer.vocab_size=300",
                   "tokenizer.train_docs=200", "trainer.max_steps=4", "trainer.val_check_interval=2",
                   "trainer.enable_progress_bar=false", "logger=csv", "impl.threads=1"])
    (tmp_path / "run").mkdir()
    m = run(cfg, tmp_path / "run")
    assert m["status"] == "ok" and m["steps"] == 4 and m["tokens_seen"] == 4 * 4 * 16
    assert m["val_bpb"] is not None and m["val_bpb"] > 0
