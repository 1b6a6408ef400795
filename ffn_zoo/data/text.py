"""Local plain-text corpora (``data=text``) and the presets built on it (tinyshakespeare, wikitext2/103).

Each file is one document. Validation is ``data.val`` (files or globs) or, when that is unset,
the last ``data.val_fraction`` of each training file's characters, cut at a line boundary.
A preset with ``hub_name`` loads that hub dataset when no local path is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Mapping

from ffn_zoo.data.cache import file_identity
from ffn_zoo.data.files import expand_files, pieces, read_text
from ffn_zoo.data.finite import build_packed_corpus
from ffn_zoo.data.pack import Document
from ffn_zoo.data.types import Corpus
from ffn_zoo.errors import ConfigError, DataError


def split_tail(text: str, fraction: float) -> tuple[str, str]:
    """(head, tail) with the tail the last ``fraction`` of the characters, starting at a line start."""
    cut = int(len(text) * (1 - fraction))
    newline = text.rfind("\n", 0, cut)
    cut = newline + 1 if newline > 0 else cut
    return text[:cut], text[cut:]


def _docs(paths: list[Path], part: str, fraction: float | None) -> Iterator[Document]:
    for p in paths:
        text = read_text(p)
        if fraction is not None:
            text = split_tail(text, fraction)[0 if part == "head" else 1]
        yield pieces(text)


def hub_text(cfg: Mapping[str, Any], split: str) -> str:
    """A whole hub split as one text: the ``hub_text_field`` of its rows joined (wikitext rows are lines)."""
    import datasets  # mocked in tests at this boundary

    name, field = cfg["hub_name"], cfg.get("hub_text_field") or "text"
    try:
        ds = datasets.load_dataset(name, cfg.get("hub_config"), split=split)
        rows = [str(r) for r in ds[field]]
    except Exception as e:
        first = str(e).splitlines()[0][:200] if str(e) else ""
        raise DataError(
            f"cannot load {name!r} ({cfg.get('hub_config')}, {split}) from the Hugging Face hub "
            f"({type(e).__name__}: {first}); offline, give data.train (and data.val) as local files"
        ) from None
    sep = "" if all(r.endswith("\n") or r == "" for r in rows[:100]) else "\n"
    return sep.join(rows)


def build_text(cfg: Mapping[str, Any]) -> Corpus:
    name = cfg["name"]
    train_spec, val_spec, fraction = cfg.get("train"), cfg.get("val"), cfg.get("val_fraction")
    if train_spec is None:
        if cfg.get("hub_name"):
            return _build_hub_text(cfg)
        raise ConfigError(f"data={name} needs data.train=<file, glob or list> (and data.val, or data.val_fraction)")
    train = expand_files(train_spec, "data.train")
    if val_spec is not None:
        val, frac = expand_files(val_spec, "data.val"), None
    else:
        if fraction is None or not 0 < fraction < 1:
            raise ConfigError(f"data.val is not set, so data.val_fraction must be in (0, 1), got {fraction}")
        val, frac = train, float(fraction)
    return build_packed_corpus(
        name, cfg,
        {"train": [file_identity(train), frac], "val": [file_identity(val), frac]},
        lambda: _docs(train, "head", frac), lambda: _docs(val, "tail" if frac else "all", frac),
        train_label=", ".join(map(str, train)), val_label=", ".join(map(str, val)),
    )


def _build_hub_text(cfg: Mapping[str, Any]) -> Corpus:
    train_split, val_split = cfg.get("hub_train_split") or "train", cfg.get("hub_val_split")
    hub_id = [cfg["hub_name"], cfg.get("hub_config"), train_split, val_split, cfg.get("val_fraction")]

    def split_docs(which: str) -> Iterator[Document]:
        if val_split:
            yield pieces(hub_text(cfg, train_split if which == "train" else val_split))
        else:  # one split (tiny_shakespeare-style): validation is its tail
            head, tail = split_tail(hub_text(cfg, train_split), float(cfg["val_fraction"]))
            yield pieces(head if which == "train" else tail)

    label = f"hub {cfg['hub_name']}"
    return build_packed_corpus(cfg["name"], cfg, {"train": hub_id, "val": hub_id},
                               lambda: split_docs("train"), lambda: split_docs("val"), label, label)
