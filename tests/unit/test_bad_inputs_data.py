"""Bad data files (data=text, data=c4): one line naming the file (and line), never a traceback or a silent skip.

The readers are ffn_zoo/data/files.py; these rows belong to README's reliability table.
"""

import json
from pathlib import Path

import pytest

from ffn_zoo.errors import DataError, FFNZooError
from tests.helpers import FAST, train

# byte-level ids: no tokenizer training, no download; the toy corpus's own sizes do not apply
BASE = [a for a in FAST if not a.startswith("data.train_tokens")] + ["tokenizer=bytes"]


def text_run(tmp_path: Path, *overrides: str) -> None:
    train([f"data.cache_dir={tmp_path / 'cache'}", *overrides], tmp_path, base=["data=text", *BASE])


def c4_run(tmp_path: Path, train_file: Path, val_file: Path) -> None:
    train([f"data.cache_dir={tmp_path / 'cache'}", f"data.train_files={train_file}", f"data.val_files={val_file}"],
          tmp_path, base=["data=c4", *BASE])


@pytest.fixture
def good_jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "good.jsonl"
    path.write_text("".join(json.dumps({"text": f"document {i} " * 50}) + "\n" for i in range(20)))
    return path


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=rf"data.train: no such file: {tmp_path}/nope.txt"):
        text_run(tmp_path, f"data.train={tmp_path}/nope.txt")


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataError, match=rf"data.train: {tmp_path}/empty.txt is empty"):
        text_run(tmp_path, f"data.train={tmp_path}/empty.txt")


def test_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes(("hello world\n" * 50).encode() + "caf\xe9\n".encode("latin-1"))
    with pytest.raises(DataError, match=rf"{tmp_path}/latin1.txt:51: bytes are not UTF-8 \(b'\\xe9' at byte"):
        text_run(tmp_path, f"data.train={tmp_path}/latin1.txt")


def test_broken_json_line(tmp_path: Path, good_jsonl: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"text": "fine"}) + "\n" + '{"text": "no closing quote}\n')
    with pytest.raises(DataError, match=rf"{broken}:2: not valid JSON"):
        c4_run(tmp_path, broken, good_jsonl)


def test_json_line_without_text(tmp_path: Path, good_jsonl: Path) -> None:
    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text(json.dumps({"content": "the text is under another key"}) + "\n")
    with pytest.raises(DataError, match=rf"{no_text}:1: no 'text' field \(set data.text_field\)"):
        c4_run(tmp_path, good_jsonl, no_text)


def test_tokenizer_and_model_vocab_disagree(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("some text to train on\n" * 200)
    with pytest.raises(FFNZooError, match=r"model.vocab_size=1000 but the corpus/tokenizer has 257 tokens; "
                                                   r"set model.vocab_size=257 or null"):
        text_run(tmp_path, f"data.train={tmp_path}/a.txt", "model.vocab_size=1000")
