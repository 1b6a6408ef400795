"""train.py end to end on real text (model=tiny, ../shared/data): C4 shards and the text presets train and
log val/ppl and val/bpb; a bad input stops before training with one line and exit 1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_train

pytestmark = [pytest.mark.smoke, pytest.mark.data]

TINY_TEXT = [
    "model=tiny", "trainer.max_steps=12", "trainer.val_check_interval=6", "trainer.log_every_n_steps=3",
    "data.batch_size=8", "data.val_batch_size=32", "data.val_tokens=2048", "trainer.enable_progress_bar=false",
    "impl.threads=1",
]


def metrics_of(tmp_path: Path) -> dict:
    (path,) = tmp_path.glob("runs/*/metrics.json")
    return json.loads(path.read_text())


def test_c4_local_shards_train_and_log_bpb(shared_data: Path, tmp_path: Path) -> None:
    c4 = shared_data / "c4"
    args = ["ffn=geglu", "data=c4", f"data.train_files={c4 / 'c4-train.00000-of-01024.first1000.jsonl'}",
            f"data.val_files={c4 / 'c4-sample.00000-of-00001.json.gz'}", "data.train_docs=300",
            "tokenizer.vocab_size=1024", f"data.cache_dir={tmp_path / 'cache'}", *TINY_TEXT]
    proc = run_train(args, tmp_path / "a")
    m = metrics_of(tmp_path / "a")
    assert m["status"] == "ok" and m["data"] == "c4" and m["steps"] == 12
    assert m["val_ppl"] < 1024  # better than uniform over the vocabulary already
    assert 0 < m["val_bpb"] < 8  # and than 8 bits per byte of text
    assert "tokenizer bpe vocab 1,024" in proc.stdout and "tokenized, cached in" in proc.stdout
    # the second start reads the cache and scores the same validation text
    proc = run_train(args, tmp_path / "b")
    assert "cached " in proc.stdout and "tokenized" not in proc.stdout
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 1


@pytest.mark.parametrize("preset", ["tinyshakespeare", "wikitext2"])
def test_text_presets_on_shared_files(shared_data: Path, tmp_path: Path, preset: str) -> None:
    files = {
        "tinyshakespeare": [f"data.train={shared_data / 'tinyshakespeare' / 'input.txt'}", "tokenizer=bytes"],
        # the shared copy has no train split: valid stands in for train, test for validation
        "wikitext2": [f"data.train={shared_data / 'wikitext-2' / 'wiki.valid.tokens'}",
                      f"data.val={shared_data / 'wikitext-2' / 'wiki.test.tokens'}", "tokenizer.vocab_size=512"],
    }[preset]
    run_train([f"data={preset}", *files, f"data.cache_dir={tmp_path / 'cache'}", *TINY_TEXT], tmp_path)
    m = metrics_of(tmp_path)
    assert m["status"] == "ok" and m["data"] == preset
    assert m["val_bpb"] is not None and m["val_bpb"] > 0 and m["val_ppl"] is not None


def test_bad_input_is_one_line_before_training(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "c4-train.jsonl"
    proc = run_train(["data=c4", f"data.train_files={missing}", f"data.val_files={missing}",
                      f"data.cache_dir={tmp_path / 'cache'}", *TINY_TEXT], tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"error: data.train_files: no such file: {missing}"
    assert "Traceback" not in proc.stderr and "train/loss" not in proc.stdout
    assert metrics_of(tmp_path)["status"] == "failed"
