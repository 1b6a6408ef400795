"""data.extra_val: an extra held-out set is packed exactly as the main validation split would pack the same
files, is cached, and every bad entry is one line naming data.extra_val.<name>; data=wikipedia composes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.data import build_corpus
from ffn_zoo.data.extra_val import build_extra_val
from ffn_zoo.errors import ConfigError, DataError


def data_cfg(tmp_path: Path, *overrides: str, cache: bool = True) -> dict:
    cfg = compose(["model=tiny", "tokenizer=bytes", "data.val_tokens=1024",
                   *([f"data.cache_dir={tmp_path / 'cache'}"] if cache else []), *overrides])
    return OmegaConf.to_container(cfg.data, resolve=True)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"train": tmp_path / "train.txt", "val": tmp_path / "val.txt", "other": tmp_path / "other.txt",
           "jsonl": tmp_path / "docs.jsonl"}
    out["train"].write_text("the quick brown fox jumps over the lazy dog.\n" * 400)
    out["val"].write_text("a stitch in time saves nine.\n" * 100)
    out["other"].write_text("all that glitters is not gold; " * 200 + "\n")
    out["jsonl"].write_text("".join(json.dumps({"body": f"note {i}: " + "to be or not to be. " * 5}) + "\n"
                                    for i in range(30)))
    return out


def text_corpus(tmp_path: Path, files: dict[str, Path], *overrides: str):
    return build_corpus(data_cfg(tmp_path, "data=text", f"data.train={files['train']}", f"data.val={files['val']}",
                                 *overrides))


def test_text_extra_set_is_the_main_split_of_a_run_that_validates_on_it(tmp_path: Path, files: dict) -> None:
    corpus = text_corpus(tmp_path, files, f"+data.extra_val.other.files={files['other']}")
    as_main = build_corpus(data_cfg(tmp_path, "data=text", f"data.train={files['train']}", f"data.val={files['other']}"))
    extra = corpus.extra_val["other"]
    assert extra.val.shape == as_main.val.shape == (32, 33)  # 1,024 scored tokens in blocks of 32 (model=tiny)
    np.testing.assert_array_equal(extra.val, as_main.val)
    assert extra.val_bytes == as_main.val_bytes
    assert not np.array_equal(extra.val, corpus.val)  # and the main split is still its own


def test_jsonl_extra_set_matches_c4_main_split_with_its_field(tmp_path: Path, files: dict) -> None:
    corpus = text_corpus(tmp_path, files, f"+data.extra_val.notes.files={files['jsonl']}",
                         "+data.extra_val.notes.text_field=body", "+data.extra_val.notes.tokens=512")
    as_main = build_corpus(data_cfg(tmp_path, "data=c4", f"data.train_files={files['jsonl']}",
                                    f"data.val_files={files['jsonl']}", "data.text_field=body", "data.val_tokens=512"))
    np.testing.assert_array_equal(corpus.extra_val["notes"].val, as_main.val)
    assert corpus.extra_val["notes"].val.shape == (16, 33)


def test_bare_path_entry_order_and_cache(tmp_path: Path, files: dict, capsys) -> None:
    args = [f"+data.extra_val.zz={files['other']}", f"+data.extra_val.aa={files['val']}"]
    first = text_corpus(tmp_path, files, *args)
    assert list(first.extra_val) == ["zz", "aa"]  # the order given = the order of the validation dataloaders
    assert "tokenized, cached in" in first.extra_val["zz"].description
    again = text_corpus(tmp_path, files, *args)
    assert "cached " in again.extra_val["zz"].description and "tokenized" not in again.extra_val["zz"].description
    np.testing.assert_array_equal(again.extra_val["zz"].val, first.extra_val["zz"].val)


BAD = [  # (entry overrides, the one-line message)
    (["+data.extra_val.c4.files={missing}"], DataError, r"^data.extra_val.c4.files: no such file: .*nope.txt$"),
    (["+data.extra_val.c4.files={empty}"], DataError, r"^data.extra_val.c4.files: .*empty.txt is empty$"),
    (["+data.extra_val.c4.files={blank}"], DataError, r"^data.extra_val.c4: .*blank.txt holds no text$"),
    (["+data.extra_val.c4.files={tmp}/*.nothing"], DataError, r"^data.extra_val.c4.files: .* matches no file$"),
    (["+data.extra_val.c4.files={jsonl}"], DataError,
     r"^data.extra_val.c4: .*docs.jsonl:1: no 'text' field \(set data.text_field\)$"),
    (["+data.extra_val.c4.files={short}"], DataError,
     r"^data.extra_val.c4: .*short.txt gives 6 tokens, fewer than one block of data.seq_len=32$"),
    (["+data.extra_val.c4.path={val}"], ConfigError,
     r"^data.extra_val.c4: unknown key 'path'; valid: files, tokens, text_field$"),
    (["+data.extra_val.c4.tokens=64"], ConfigError, r"^data.extra_val.c4.files is not set"),
    (["+data.extra_val.c4.files={val}", "+data.extra_val.c4.tokens=16"], ConfigError,
     r"^data.extra_val.c4.tokens=16 is less than one block of data.seq_len=32$"),
    (["+data.extra_val.c4.files={val}", "+data.extra_val.c4.tokens=0"], ConfigError,
     r"^data.extra_val.c4.tokens must be > 0, got 0$"),
]


@pytest.mark.parametrize("overrides,error,message", BAD)
def test_bad_extra_val_entry(tmp_path: Path, files: dict, overrides: list[str], error: type, message: str) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text("\n\n  \n")
    (tmp_path / "short.txt").write_text("hello")
    paths = {"missing": tmp_path / "nope.txt", "empty": tmp_path / "empty.txt", "blank": tmp_path / "blank.txt",
             "short": tmp_path / "short.txt", "tmp": tmp_path, "jsonl": files["jsonl"], "val": files["val"]}
    with pytest.raises(error, match=message) as e:
        text_corpus(tmp_path, files, *(o.format(**paths) for o in overrides))
    assert "\n" not in str(e.value)


def test_set_name_must_fit_a_metric_name(tmp_path: Path, files: dict) -> None:
    cfg = data_cfg(tmp_path, "data=text", f"data.train={files['train']}")
    corpus = build_corpus(cfg)
    cfg["extra_val"] = {"c4/x": {"files": str(files["val"])}}  # a '/' would nest val/c4/x/loss
    with pytest.raises(ConfigError, match=r"^data.extra_val.c4/x: a set name is letters, digits, '_' or '-'"):
        build_extra_val(cfg, corpus.tokenizer)


def test_toy_corpus_has_no_tokenizer_for_an_extra_set(tmp_path: Path, files: dict) -> None:
    with pytest.raises(ConfigError, match=r"^data.extra_val: data=toy has no tokenizer"):
        build_corpus(data_cfg(tmp_path, "data.train_tokens=8192", f"+data.extra_val.c4.files={files['val']}",
                              cache=False))


def test_wikipedia_preset_composes() -> None:
    data = OmegaConf.to_container(compose(["data=wikipedia"]).data, resolve=True)
    assert data["name"] == "wikipedia" and data["extra_val"] == {} and data["extra_val_defaults"]["tokens"] == 131072
    assert data["train_files"] == "../shared/data/wikipedia-en/train-*.jsonl.gz"
    assert data["val_files"] == "../shared/data/wikipedia-en/validation-*.jsonl.gz"
    moved = compose(["data=wikipedia", "data.root=/elsewhere"]).data
    assert moved.train_files == "/elsewhere/train-*.jsonl.gz"


def test_train_shards_beyond_the_files_is_one_line(tmp_path: Path, files: dict) -> None:
    with pytest.raises(ConfigError, match=r"^data.train_shards=3 but data.train_files gives only 1 files$"):
        build_corpus(data_cfg(tmp_path, "data=c4", f"data.train_files={files['jsonl']}",
                              f"data.val_files={files['jsonl']}", "data.text_field=body", "data.train_shards=3"))
