"""Writes a reader sees whole or not at all: a temporary file beside the target, fsync, rename.

One helper for every file the project writes in place of an older one (checkpoints, ``metrics.json`` and
the other JSON records, the data cache's token arrays and tokenizers), so a crash or a full disk leaves the
previous file, never half of one. Below the data and training layers: it imports nothing of the project.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any, BinaryIO, Callable


# the OS refusing a write: the disk, a quota, a file size limit, a read-only mount; never a read error
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS}


def refused_write(error: BaseException) -> OSError | None:
    """The OSError in ``error``'s chain when it is the OS refusing a write (:data:`WRITE_ERRNOS`), else None."""
    refused = os_error(error)
    return refused if refused is not None and refused.errno in WRITE_ERRNOS else None


def reason(refused: OSError) -> str:
    """``No space left on device (ENOSPC)``."""
    return f"{refused.strerror} ({errno.errorcode.get(refused.errno or 0, refused.errno)})"


def os_error(error: BaseException) -> OSError | None:
    """The OSError in ``error``'s chain (``raise ... from``, or raised while handling), outermost first.

    An OSError that names its file wins over one that does not: a write refused inside ``torch.save``
    surfaces as a RuntimeError whose context is the nameless OSError of the file's ``write``.
    """
    found: list[OSError] = []
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno is not None:
            found.append(e)
        e = e.__cause__ or (None if e.__suppress_context__ else e.__context__)
    return next((f for f in found if f.filename), found[0] if found else None)


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """``write(f)`` into a temporary file beside ``path``, fsync, then rename it over ``path``.

    Readers see the old file or the new one, never half of one; the bytes are written once, in
    the target folder. On any failure the temporary is removed, and an OSError (a full disk, a
    quota, a read-only folder) is raised again naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")  # one writer per process and path
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())  # the bytes are on disk before the rename makes them "the" file
        os.replace(tmp, path)  # atomic on POSIX
    except BaseException as e:
        tmp.unlink(missing_ok=True)  # a failed write leaves only the previous file
        refused = os_error(e) if isinstance(e, Exception) else None
        if refused is None:
            raise
        raise OSError(refused.errno, refused.strerror, str(path)) from None  # torch hides it in a RuntimeError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write` of bytes already in memory."""
    atomic_write(path, lambda f: f.write(data))


def write_json(path: Path, record: dict[str, Any]) -> None:
    """``metrics.json``, a ladder's manifest and other records, in one format (2-space indent, a final newline)."""
    atomic_write_bytes(path, (json.dumps(record, indent=2) + "\n").encode())
