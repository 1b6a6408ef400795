"""Reading local inputs: C4 JSON lines (.jsonl == .json.gz), globs, and every bad input -> one-line DataError."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ffn_zoo.data import build_corpus
from ffn_zoo.data.files import expand_files, iter_documents, iter_jsonl_texts, read_text
from ffn_zoo.errors import ConfigError, DataError

DOCS = ["Hello world.\nSecond line with ümlauts — and dashes.", "Another document 123.", "日本語のテキスト"]


def write_jsonl(path: Path, docs: list[str], gz: bool = False, extra: dict | None = None) -> Path:
    lines = "".join(json.dumps({"text": d, "url": "u", **(extra or {})}) + "\n" for d in docs).encode()
    path.write_bytes(gzip.compress(lines) if gz else lines)
    return path


def c4_cfg(tmp_path: Path, train, val, **kw) -> dict:
    return {"name": "c4", "seq_len": 8, "train_files": train, "val_files": val, "data_dir": None, "text_field": "text",
            "val_tokens": None, "cache_dir": str(tmp_path / "cache"), "tokenizer": {"kind": "bytes"}, **kw}


def test_jsonl_and_json_gz_give_the_same_documents(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", DOCS)
    b = write_jsonl(tmp_path / "b.json.gz", DOCS, gz=True)
    assert list(iter_jsonl_texts(a)) == list(iter_jsonl_texts(b)) == DOCS


def test_shared_c4_jsonl_and_gz_read(shared_data):
    train = list(iter_jsonl_texts(shared_data / "c4" / "c4-train.00000-of-01024.first1000.jsonl"))
    val = list(iter_jsonl_texts(shared_data / "c4" / "c4-sample.00000-of-00001.json.gz"))
    assert len(train) == len(val) == 1000
    assert train[0].startswith("Beginners BBQ Class")
    assert val[0].startswith("The woman who died after falling from a bridge")


def test_shared_c4_roundtrip_through_gzip(shared_data, tmp_path):
    src = shared_data / "c4" / "c4-train.00000-of-01024.first1000.jsonl"
    gz = tmp_path / "c4-train.00000-of-00001.json.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert list(iter_jsonl_texts(gz)) == list(iter_jsonl_texts(src))


def test_glob_expands_sorted_and_list_keeps_order(tmp_path):
    for name in ("c4-train.00001-of-00002.jsonl", "c4-train.00000-of-00002.jsonl"):
        write_jsonl(tmp_path / name, DOCS)
    got = expand_files(str(tmp_path / "c4-train.*.jsonl"), "data.train_files")
    assert [p.name for p in got] == ["c4-train.00000-of-00002.jsonl", "c4-train.00001-of-00002.jsonl"]
    assert len(list(iter_documents(got))) == 2 * len(DOCS)


@pytest.mark.parametrize("case", ["missing", "glob", "empty", "directory"])
def test_bad_paths(tmp_path, case):
    ok = write_jsonl(tmp_path / "ok.jsonl", DOCS)
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "sub").mkdir()
    spec = {"missing": str(tmp_path / "nope.jsonl"), "glob": str(tmp_path / "*.parquet"),
            "empty": str(tmp_path / "empty.jsonl"), "directory": str(tmp_path / "sub")}[case]
    expect = {"missing": "no such file", "glob": "matches no file", "empty": "is empty", "directory": "not a file"}[case]
    with pytest.raises(DataError, match=expect) as e:
        build_corpus(c4_cfg(tmp_path, [str(ok)], spec))
    assert "data.val_files" in str(e.value) and "\n" not in str(e.value)


def test_missing_data_dir(tmp_path):
    with pytest.raises(DataError, match="data.data_dir: no such directory"):
        build_corpus(c4_cfg(tmp_path, None, None, data_dir=str(tmp_path / "en")))


def test_data_dir_layout(tmp_path):
    en = tmp_path / "en"
    en.mkdir()
    write_jsonl(en / "c4-train.00000-of-01024.json.gz", DOCS * 20, gz=True)
    write_jsonl(en / "c4-validation.00000-of-00008.json.gz", DOCS * 5, gz=True)
    corpus = build_corpus(c4_cfg(tmp_path, None, None, data_dir=str(en)))
    assert corpus.vocab_size == 257 and corpus.train.shape[1] == 9


def test_broken_json_line_names_file_and_line(tmp_path):
    p = write_jsonl(tmp_path / "bad.jsonl", DOCS)
    p.write_bytes(p.read_bytes() + b'{"text": "unterminated\n')
    with pytest.raises(DataError, match=rf"{p}:4: not valid JSON"):
        list(iter_jsonl_texts(p))


def test_missing_text_field_names_file_and_line(tmp_path):
    p = tmp_path / "nofield.jsonl"
    p.write_text(json.dumps({"text": "fine"}) + "\n" + json.dumps({"content": "no text"}) + "\n")
    with pytest.raises(DataError, match=rf"{p}:2: no 'text' field"):
        list(iter_jsonl_texts(p))


def test_non_utf8_bytes(tmp_path):
    p = tmp_path / "latin1.jsonl"
    p.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=rf"{p}:2: bytes are not UTF-8"):
        list(iter_jsonl_texts(p))
    t = tmp_path / "latin1.txt"
    t.write_bytes(b"line one\nline two\ncaf\xe9\n")
    with pytest.raises(DataError, match=rf"{t}:3: bytes are not UTF-8"):
        read_text(t)


def test_not_gzip(tmp_path):
    p = tmp_path / "fake.json.gz"
    p.write_bytes(b'{"text": "plain, not gzip"}\n')
    with pytest.raises(DataError, match="not a readable gzip file"):
        list(iter_jsonl_texts(p))


def test_corpus_smaller_than_one_block(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", DOCS * 10)
    val = write_jsonl(tmp_path / "val.jsonl", ["tiny"])
    with pytest.raises(DataError, match=r"val.jsonl: the validation text gives 5 tokens, fewer than one block of data.seq_len=8"):
        build_corpus(c4_cfg(tmp_path, str(train), str(val)))
    assert not (tmp_path / "cache" / "tokens").exists() or not any((tmp_path / "cache" / "tokens").rglob("meta.json"))


def test_only_one_of_train_and_val_files(tmp_path):
    train = write_jsonl(tmp_path / "train.jsonl", DOCS)
    with pytest.raises(ConfigError, match="data.val_files is not set"):
        build_corpus(c4_cfg(tmp_path, str(train), None))


def test_text_bad_inputs(tmp_path):
    blank = tmp_path / "blank.txt"
    blank.write_text("   \n\n")
    cfg = {"name": "text", "seq_len": 8, "train": str(blank), "val": None, "val_fraction": 0.1, "val_tokens": None,
           "cache_dir": str(tmp_path / "cache"), "tokenizer": {"kind": "bytes"}}
    with pytest.raises(DataError, match="holds no text"):
        build_corpus(cfg)
    with pytest.raises(ConfigError, match="data.train="):
        build_corpus({**cfg, "train": None, "hub_name": None})
    with pytest.raises(ConfigError, match="val_fraction"):
        build_corpus({**cfg, "train": str(tmp_path / "*.txt"), "val_fraction": 1.5})
