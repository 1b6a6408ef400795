"""Reading local inputs: glob expansion, plain-text files (cut into line-aligned pieces) and JSON-lines documents
(C4's format).

Every problem a user can cause (missing or empty file, a glob that matches nothing, a line that
is not JSON or has no text field, bytes that are not UTF-8) raises :class:`DataError` naming the
setting or file, and the line number where there is one.
"""

from __future__ import annotations

import glob
import gzip
import json
import zlib
from pathlib import Path
from typing import Iterator, Sequence

from ffn_zoo.errors import DataError

PIECE_CHARS = 1 << 16  # long documents are tokenized as line-aligned pieces, in parallel


def expand_files(spec: str | Sequence[str] | None, setting: str) -> list[Path]:
    """Paths from a file, a glob or a list of them (in the order given; each glob sorted)."""
    if spec is None or spec == "" or (not isinstance(spec, str) and len(spec) == 0):
        raise DataError(f"{setting} is empty; give a file, a glob or a list of them")
    patterns = [spec] if isinstance(spec, str) else list(spec)
    paths: list[Path] = []
    for pattern in patterns:
        pattern = str(Path(str(pattern)).expanduser())
        if glob.has_magic(pattern):
            matches = sorted(glob.glob(pattern))
            if not matches:
                raise DataError(f"{setting}: {pattern!r} matches no file")
            paths += [Path(m) for m in matches]
        else:
            paths.append(Path(pattern))
    for p in paths:
        if not p.exists():
            raise DataError(f"{setting}: no such file: {p}")
        if not p.is_file():
            raise DataError(f"{setting}: not a file: {p}")
        if p.stat().st_size == 0:
            raise DataError(f"{setting}: {p} is empty")
    return paths


def _decode(raw: bytes, path: Path, line: int | None = None) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if line is None:  # a whole file: find the line of the bad byte
            line = raw.count(b"\n", 0, e.start) + 1
        bad = raw[e.start : e.start + 1]
        raise DataError(f"{path}:{line}: bytes are not UTF-8 ({bad!r} at byte {e.start})") from None


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text (strict: bad bytes are an error, never silently replaced)."""
    text = _decode(path.read_bytes(), path)
    if not text.strip():
        raise DataError(f"{path} holds no text")
    return text


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    """``text`` cut after newlines into pieces of about ``size`` characters (joined, they are ``text``)."""
    out, start = [], 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def _open_lines(path: Path):
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def iter_jsonl_texts(path: Path, field: str = "text") -> Iterator[str]:
    """The ``field`` of each JSON line of a ``.jsonl`` / ``.json`` / ``.json.gz`` file (blank lines skipped)."""
    n_docs = 0
    try:
        with _open_lines(path) as f:
            for lineno, raw in enumerate(f, start=1):
                if not raw.strip():
                    continue
                line = _decode(raw, path, lineno)
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(f"{path}:{lineno}: not valid JSON ({e.msg}; column {e.colno})") from None
                if not isinstance(record, dict) or field not in record:
                    raise DataError(f"{path}:{lineno}: no {field!r} field (set data.text_field)")
                text = record[field]
                if not isinstance(text, str):
                    raise DataError(f"{path}:{lineno}: field {field!r} is {type(text).__name__}, not a string")
                n_docs += 1
                yield text
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise DataError(f"{path}: not a readable gzip file ({e})") from None
    if n_docs == 0:
        raise DataError(f"{path} holds no documents")


def iter_documents(paths: Sequence[Path], field: str = "text") -> Iterator[str]:
    """Documents of JSON-lines files in order."""
    for p in paths:
        yield from iter_jsonl_texts(p, field)
