"""C4 (Raffel et al. 2020, allenai/c4 'en'): streamed from the Hugging Face hub, or read from local shards.

- Local shards (``data.data_dir`` laid out like allenai/c4's ``en/``, or ``data.train_files`` /
  ``data.val_files``; ``.json.gz`` or ``.jsonl``, one JSON document per line, field ``text``) are a
  finite corpus: read, tokenized, packed and cached once (ffn_zoo/data/finite.py).
- Without a local path, training streams ``load_dataset("allenai/c4", "en", streaming=True)``
  shuffled with a seeded buffer and packed on the fly (ffn_zoo/data/stream.py); validation is a
  fixed prefix of C4's validation split, packed once and cached, identical for every variant and seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ffn_zoo.data.cache import TokenCache, cache_root, file_identity, fingerprint
from ffn_zoo.data.extra_val import build_extra_val
from ffn_zoo.data.files import expand_files, iter_documents
from ffn_zoo.data.finite import build_packed_corpus
from ffn_zoo.data.pack import blocks_of
from ffn_zoo.data.stream import TokenStream
from ffn_zoo.data.tokenizer import build_tokenizer
from ffn_zoo.data.types import Corpus
from ffn_zoo.data.validation import cached_validation
from ffn_zoo.errors import ConfigError, DataError, require_positive

TRAIN_SHARDS = "c4-train.*-of-*.json*"  # allenai/c4 en/ names: c4-train.00000-of-01024.json.gz
VAL_SHARDS = "c4-validation.*-of-*.json*"


def local_files(cfg: Mapping[str, Any]) -> tuple[list[Path], list[Path]] | None:
    """(train, val) shard paths from data.train_files / data.val_files / data.data_dir, or None for the hub."""
    data_dir, train, val = cfg.get("data_dir"), cfg.get("train_files"), cfg.get("val_files")
    if data_dir is None and train is None and val is None:
        return None
    if data_dir is not None:
        root = Path(str(data_dir)).expanduser()
        if not root.is_dir():
            raise DataError(f"data.data_dir: no such directory: {root}")
        train = train if train is not None else str(root / TRAIN_SHARDS)
        val = val if val is not None else str(root / VAL_SHARDS)
    if train is None or val is None:
        missing = "data.val_files" if val is None else "data.train_files"
        raise ConfigError(f"{missing} is not set; give both data.train_files and data.val_files, or data.data_dir")
    train, shards = expand_files(train, "data.train_files"), cfg.get("train_shards")
    require_positive(**{"data.train_shards": shards})
    if shards is not None and shards > len(train):
        raise ConfigError(f"data.train_shards={shards} but data.train_files gives only {len(train)} files")
    return train[:shards], expand_files(val, "data.val_files")


def build_c4(cfg: Mapping[str, Any]) -> Corpus:
    files = local_files(cfg)
    if files is None:
        return build_c4_hub(cfg)
    return build_local_shards(cfg, files)


def build_local_shards(cfg: Mapping[str, Any], files: tuple[list[Path], list[Path]] | None = None) -> Corpus:
    """JSON-lines shards (local C4, ``data=wikipedia``): read, tokenized, packed and cached once."""
    files = files or local_files(cfg)
    if files is None:
        raise ConfigError(f"data={cfg['name']} needs data.train_files and data.val_files (files, globs or lists)")
    train, val = files
    field = cfg.get("text_field") or "text"
    return build_packed_corpus(
        cfg["name"], cfg, {"train": file_identity(train), "val": file_identity(val), "field": field},
        lambda: iter_documents(train, field), lambda: iter_documents(val, field),
        train_label=", ".join(map(str, train)), val_label=", ".join(map(str, val)),
    )


# ---- the hub ---------------------------------------------------------------------------------


def _hub_error(cfg: Mapping[str, Any], e: BaseException) -> DataError:
    first = str(e).splitlines()[0][:200] if str(e) else ""
    return DataError(
        f"cannot stream {cfg['hub_name']!r} ({cfg.get('hub_config')}) from the Hugging Face hub "
        f"({type(e).__name__}: {first}); offline, point data.data_dir at local shards or set "
        f"data.train_files and data.val_files"
    )


def hub_texts(cfg: Mapping[str, Any], split: str, seed: int | None = None, epoch: int = 0) -> Iterator[str]:
    """Texts of a streamed hub split; shuffled with a seeded buffer when ``seed`` is given."""
    import datasets  # the boundary tests mock: datasets.load_dataset

    field = cfg.get("text_field") or "text"
    try:
        ds = datasets.load_dataset(cfg["hub_name"], cfg.get("hub_config"), split=split, streaming=True)
        if seed is not None:
            ds = ds.shuffle(seed=seed + 1_000_003 * epoch, buffer_size=int(cfg.get("shuffle_buffer") or 10_000))
        # .iter() rather than iterating ds: in a DataLoader worker the latter re-seeds and re-shards the
        # stream per worker, and batch k must not depend on where the stream is read
        for rows in ds.iter(batch_size=256):
            yield from rows[field]
    except (DataError, GeneratorExit):
        raise
    except KeyError:
        raise DataError(f"{cfg['hub_name']} ({split}): records have no {field!r} field (set data.text_field)") from None
    except Exception as e:  # network, authentication, unknown dataset
        raise _hub_error(cfg, e) from None


@dataclass
class HubDocs:
    """The training split in a seeded order (picklable, so it can live in a DataLoader worker)."""

    cfg: dict

    def __call__(self, seed: int, epoch: int) -> Iterable[str]:
        return hub_texts(self.cfg, self.cfg.get("hub_train_split") or "train", seed=seed, epoch=epoch)


def build_c4_hub(cfg: Mapping[str, Any]) -> Corpus:
    """Streamed training split; the first ``val_tokens`` tokens of the validation split, packed and cached."""
    seq_len, val_tokens = int(cfg["seq_len"]), cfg.get("val_tokens")
    require_positive(**{"data.seq_len": seq_len, "data.val_tokens": val_tokens})
    if val_tokens is None:
        raise ConfigError("data.val_tokens must be set for a streamed corpus (its validation split is a prefix)")
    root = cache_root(cfg.get("cache_dir"))
    hub_id = ["hub", cfg["hub_name"], cfg.get("hub_config")]
    train_split = cfg.get("hub_train_split") or "train"
    tok = build_tokenizer(cfg.get("tokenizer"), hub_id, lambda: hub_texts(cfg, train_split), root)

    cache = TokenCache(root, f"c4hub-{fingerprint(hub_id, tok.fingerprint, seq_len, val_tokens)}")
    split = cfg.get("hub_val_split") or "validation"
    val, meta, where = cached_validation(cache, lambda: hub_texts(cfg, split), tok, seq_len, val_tokens,
                                         f"{cfg['hub_name']} ({split})")
    docs = HubDocs(dict(cfg))
    # fail before training if the training split cannot be opened (hub unreachable, bad name)
    next(hub_texts(cfg, train_split), None)
    return Corpus(
        name="c4", vocab_size=tok.vocab_size, train=None, val=blocks_of(val, seq_len), val_bytes=int(meta["val_bytes"]),
        train_stream=TokenStream(docs, tok, seq_len), tokenizer=tok, extra_val=build_extra_val(cfg, tok),
        description=f"c4 (hub {cfg['hub_name']} {cfg.get('hub_config')}): streamed train, shuffle buffer "
        f"{cfg.get('shuffle_buffer')}; {meta['val_tokens']:,} val tokens ({meta['val_bytes']:,} bytes, "
        f"{meta['val_docs']:,} docs), tokenizer {tok.kind} vocab {tok.vocab_size:,}; {where}",
    )
