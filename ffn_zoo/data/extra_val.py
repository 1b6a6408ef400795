"""Extra held-out sets (``data.extra_val``): named corpora scored at every validation beside the main split.

    data.extra_val: {c4: {files: ../shared/data/c4/c4-sample.00000-of-00001.json.gz}}
    python train.py data=wikipedia +data.extra_val.c4.files=../shared/data/c4/c4-sample.00000-of-00001.json.gz

Each set is local files (``.jsonl``/``.json``/``.json.gz``: one JSON document per line, field ``text_field``;
anything else: plain text, each file one document), tokenized with the run's tokenizer and packed exactly
like the main validation split (``EOT doc EOT doc ...``, the first ``tokens`` scored targets, whole blocks),
then cached. Scoring a file as an extra set gives the numbers scoring it as the main split would.
What an entry leaves unset comes from ``data.extra_val_defaults``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ffn_zoo.data.cache import TokenCache, cache_root, file_identity, fingerprint
from ffn_zoo.data.files import expand_files, iter_jsonl_texts, pieces, read_text
from ffn_zoo.data.pack import Document, blocks_of
from ffn_zoo.data.tokenizer import Tokenizer
from ffn_zoo.data.types import ValSet
from ffn_zoo.data.validation import cached_validation
from ffn_zoo.errors import ConfigError, DataError, require_positive

ENTRY_KEYS = ("files", "tokens", "text_field")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # becomes part of metric names: val/<name>/loss, val_<name>_loss
JSON_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


def _documents(paths: Sequence[Path], field: str) -> Iterator[Document]:
    for p in paths:
        if p.name.endswith(JSON_SUFFIXES):
            yield from iter_jsonl_texts(p, field)
        else:
            yield pieces(read_text(p))  # as data=text reads its validation files


def _entry(name: str, entry: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The entry with defaults filled in; a bare file, glob or list stands for ``{files: ...}``."""
    key = f"data.extra_val.{name}"
    if not NAME.fullmatch(str(name)):
        raise ConfigError(f"{key}: a set name is letters, digits, '_' or '-' (it names the metrics val/<name>/loss)")
    if not isinstance(entry, Mapping):
        entry = {"files": entry}
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
        raise ConfigError(f"{key}: unknown key {unknown[0]!r}; valid: {', '.join(ENTRY_KEYS)}")
    if entry.get("files") is None:
        raise ConfigError(f"{key}.files is not set; give a file, a glob or a list of them")
    return {**defaults, **entry}


def build_val_set(name: str, entry: Mapping[str, Any], tok: Tokenizer, seq_len: int, cache: Path) -> ValSet:
    """Tokenize (or load from the cache) and pack one extra set."""
    key = f"data.extra_val.{name}"
    tokens, field = entry["tokens"], entry["text_field"]
    require_positive(**{f"{key}.tokens": tokens})
    if tokens is not None and tokens < seq_len:
        raise ConfigError(f"{key}.tokens={tokens} is less than one block of data.seq_len={seq_len}")
    paths = expand_files(entry["files"], f"{key}.files")  # missing, empty, a glob matching nothing
    label = ", ".join(map(str, paths))

    cache_key = fingerprint("extra_val", file_identity(paths), field, tok.fingerprint, seq_len, tokens)
    try:
        val, meta, where = cached_validation(TokenCache(cache, f"extra-{cache_key}"), lambda: _documents(paths, field),
                                             tok, seq_len, tokens, label)
    except DataError as e:  # a bad line, a file with no text, too few tokens: say which setting it came from
        raise DataError(f"{key}: {e}") from None
    return ValSet(
        name=name, val=blocks_of(val, seq_len), val_bytes=int(meta["val_bytes"]),
        description=f"{meta['val_tokens']:,} tokens ({meta['val_bytes']:,} bytes, {meta['val_docs']:,} docs) "
        f"of {label}; {where}",
    )


def build_extra_val(cfg: Mapping[str, Any], tok: Tokenizer | None) -> dict[str, ValSet]:
    """``data.extra_val`` -> {name: ValSet}, in the order given (the order of the validation dataloaders)."""
    sets = cfg.get("extra_val") or {}
    if not sets:
        return {}
    if tok is None:
        raise ConfigError(f"data.extra_val: data={cfg['name']} has no tokenizer (its ids are its own); "
                          f"extra held-out sets need a real-text corpus (c4, wikipedia, text, ...)")
    seq_len, cache = int(cfg["seq_len"]), cache_root(cfg.get("cache_dir"))
    return {str(name): build_val_set(str(name), _entry(str(name), entry, cfg["extra_val_defaults"]), tok, seq_len, cache)
            for name, entry in sets.items()}
