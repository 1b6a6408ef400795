"""On-disk cache for trained tokenizers and packed token streams.

Everything is keyed by a fingerprint of what produced it (the input files' names, sizes and
content hashes; the tokenizer; the settings), so a sweep tokenizes once and every variant and seed reuses
it, and any change to the inputs or settings lands under a new key. Files are written to a
temporary name and renamed into place, so an interrupted run never leaves a half-written entry;
``meta.json`` is written last and marks an entry complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ffn_zoo.atomic import atomic_write, atomic_write_bytes

DEFAULT_ROOT = ".cache/ffn_zoo"  # relative to the working directory; .cache/ is git-ignored
FORMAT_VERSION = 1  # bump when the packing or the cache layout changes


def cache_root(setting: str | None = None) -> Path:
    """The cache folder: the setting if given, else $FFNZOO_CACHE, else .cache/ffn_zoo."""
    return Path(setting or os.environ.get("FFNZOO_CACHE") or DEFAULT_ROOT).expanduser()


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-serialisable parts."""
    blob = json.dumps([FORMAT_VERSION, *parts], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def file_identity(paths: Iterable[Path]) -> list[tuple[str, int, str]]:
    """(file name, size, SHA-256 of the bytes) per file: what the input is, not where or when it was written.

    Keyed by content because a corpus that is copied, checked out elsewhere or re-mounted (a shared volume laid out
    afresh each session gives every file a new mtime) is the same input: path-and-mtime keys re-trained the
    tokenizer and re-tokenized ~50 M tokens at every such start. Hashing costs ~1 s per GB; tokenizing, minutes.
    """
    out = []
    for p in paths:
        digest = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out.append((p.name, p.stat().st_size, digest.hexdigest()))
    return out


def _atomic_save_npy(path: Path, array: np.ndarray) -> None:
    atomic_write(path, lambda f: np.save(f, array))  # a name of its own: tests interrupt the cache here


class TokenCache:
    """One cache entry: named 1-D token arrays (``<name>.npy``) plus ``meta.json``."""

    def __init__(self, root: Path, key: str) -> None:
        self.dir = root / "tokens" / key

    def load(self, names: Iterable[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The arrays (memory-mapped) and metadata, or None when the entry is absent or incomplete."""
        meta_path = self.dir / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            meta = json.loads(meta_path.read_text())
            arrays = {n: np.load(self.dir / f"{n}.npy", mmap_mode="r") for n in names}
        except (OSError, ValueError):
            return None  # unreadable entry: rebuild it rather than fail
        return arrays, meta

    def save(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        for name, array in arrays.items():
            _atomic_save_npy(self.dir / f"{name}.npy", array)
        atomic_write_bytes(self.dir / "meta.json", json.dumps(meta, indent=2).encode())  # last: marks it complete
