"""Where a comparison came from: the command line, the project version and the git revision (with a dirty flag),
written into every file one ``ffn-zoo-compare`` call writes, so a committed result names what made it.

    stamp_outputs(out, provenance(argv), before=snapshot(out))   # after the compare has written its files

JSON results get a ``provenance`` key, Markdown a last line; every file written (CSVs and PNGs too, whose readers
expect plain rows and pixels) is listed with its SHA-256 in ``provenance.json`` beside them.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any, Sequence

from ffn_zoo.atomic import atomic_write_bytes, write_json

PROVENANCE_FILE = "provenance.json"
CODE_ROOT = Path(__file__).resolve().parents[3]  # the checkout ffn_zoo runs from (no git there: revision None)


def git_revision(repo: Path = CODE_ROOT) -> tuple[str | None, bool | None]:
    """(HEAD's commit, whether tracked files differ from it) of ``repo``; (None, None) outside a git checkout.
    Untracked files do not count, as in ``git describe --dirty``: logs and outputs live beside the code."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout

    try:
        commit = git("rev-parse", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.CalledProcessError):  # no git, or not a repository
        return None, None
    return commit, dirty


def project_version() -> str:
    try:
        return importlib.metadata.version("ffn-zoo")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def portable(arg: str, cwd: Path) -> str:
    """``arg`` relative to ``cwd`` where it is an absolute path inside it, else unchanged: a committed result names
    the command as it reads from the checkout, not one machine's folders."""
    path = Path(arg)
    if not path.is_absolute():
        return arg
    try:
        return str(path.relative_to(cwd))  # cwd itself: "."
    except ValueError:  # outside the working folder: kept as given
        return arg


def provenance(argv: Sequence[str], prog: str = "ffn-zoo-compare", repo: Path = CODE_ROOT,
               cwd: Path | None = None) -> dict[str, Any]:
    commit, dirty = git_revision(repo)
    here = Path.cwd() if cwd is None else cwd
    return {"command": shlex.join([prog, *(portable(a, here) for a in argv)]), "version": project_version(),
            "git_commit": commit, "git_dirty": dirty}


def describe(prov: dict[str, Any]) -> str:
    """One line for a Markdown file: the command, then version and revision."""
    rev = "no git revision" if prov["git_commit"] is None else \
        f"git {prov['git_commit'][:12]}{' (dirty: uncommitted changes)' if prov['git_dirty'] else ''}"
    return f"Written by `{prov['command']}` (ffn-zoo {prov['version']}, {rev})."


def snapshot(folder: Path) -> dict[str, int]:
    """Each file's modification time in ``folder``, to tell afterwards which files a call wrote."""
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()} if folder.is_dir() else {}


def stamp_outputs(out: Path, prov: dict[str, Any], before: dict[str, int]) -> list[Path]:
    """Add ``prov`` to every file in ``out`` written since ``before`` and list them in provenance.json."""
    written = [p for p in sorted(out.iterdir()) if p.is_file() and p.name != PROVENANCE_FILE
               and before.get(p.name) != p.stat().st_mtime_ns]
    for path in written:
        if path.suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                write_json(path, {**data, "provenance": prov})
        elif path.suffix == ".md":
            atomic_write_bytes(path, (path.read_text().rstrip("\n") + "\n\n" + describe(prov) + "\n").encode())
    files = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in written}
    write_json(out / PROVENANCE_FILE, {**prov, "files": files})
    return written
