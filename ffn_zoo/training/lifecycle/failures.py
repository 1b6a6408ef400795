"""Failures a run reports: a write the OS refused (a full disk) as one line naming the file, the last good
checkpoint and the resume command, and failed jobs recorded in their folders so a sweep goes on. The callbacks that
catch faults while training (non-finite steps, signals) are ``guards.py``."""

from __future__ import annotations

import os
import sys
import threading
import traceback
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterator

from ffn_zoo.atomic import atomic_write, reason, refused_write, write_json
from ffn_zoo.errors import CheckpointError, FFNZooError
from ffn_zoo.training.lifecycle.checkpoint import load_checkpoint
from ffn_zoo.training.lifecycle.runs import LAST_CKPT, resume_command, resume_point

class WriteFailed(FFNZooError):
    """The OS refused a write; the message names the file, the last good checkpoint and the resume command.

    Not the user's input and not a bug, but reported like a user error: one line, and a sweep goes on.
    ``record`` holds the same facts for ``metrics.json``.
    """

    def __init__(self, message: str, record: dict[str, Any]) -> None:
        super().__init__(message)
        self.record = record


def last_good_checkpoint(run_dir: Path, ckpt_path: Any, log_dir: Path) -> tuple[Path, int] | None:
    """The newest ``last.ckpt`` that loads, of this run folder or the one it resumes from (``ckpt_path``, looked
    up under ``log_dir``), with its step."""
    candidates = [run_dir / LAST_CKPT]
    with suppress(FFNZooError):
        candidates.append(resume_point(ckpt_path, log_dir, run_dir))
    good = []
    for path in dict.fromkeys(c for c in candidates if c is not None and c.is_file()):
        with suppress(CheckpointError):
            good.append((path, int(load_checkpoint(path)["global_step"])))  # verified: it loads
    return max(good, key=lambda g: g[1]) if good else None


def _what_failed(error: BaseException, refused: OSError, run_dir: Path) -> str:
    """The file a refused write was for: its name when the OS gave one (every write of ours names it: atomic_write),
    else the writer the traceback passes through (TensorBoard's thread appends to its events file nameless)."""
    if refused.filename:
        return str(refused.filename)
    files = {f.f_code.co_filename for e in (error, refused) for f, _ in traceback.walk_tb(e.__traceback__)}
    if any("tensorboard" in name for name in files):
        return f"the TensorBoard events in {run_dir}"
    return f"a file of the run in {run_dir} (the OS named none)"


def write_failure(error: BaseException, run_dir: Path, ckpt_path: Any, log_dir: Path) -> WriteFailed | None:
    """``error`` as a one-line :class:`WriteFailed` when the OS refused a write (ENOSPC, ...), else None.

    ``ckpt_path`` and ``log_dir`` as the run has them: the last good checkpoint may be the one it resumed from.
    """
    refused = refused_write(error)
    if refused is None:
        return None
    last = last_good_checkpoint(run_dir, ckpt_path, log_dir)
    command = resume_command(last[0] if last else None)
    record: dict[str, Any] = {"checkpoint": str(last[0]) if last else None, "checkpoint_step": last and last[1],
                              "resume": command}
    if last:
        where = f"last good checkpoint {last[0]} (step {last[1]}, loads); free space, then resume: {command}"
    else:
        where = f"no checkpoint was written; free space, then run again: {command}"
    return WriteFailed(f"could not write {_what_failed(error, refused, run_dir)}: {reason(refused)}; {where}", record)


@contextmanager
def write_failures_as_errors(run_dir: Path, ckpt_path: Any, log_dir: Path) -> Iterator[None]:
    """Turn an OS-refused write anywhere in the run (checkpoint, logger, metrics.json) into a WriteFailed.

    A writer thread (TensorBoard's) that dies of it stays quiet: the main thread re-raises its error and reports it.
    """
    previous = threading.excepthook

    def quiet_refused_write(args: Any) -> None:
        if refused_write(args.exc_value) is None:
            previous(args)

    threading.excepthook = quiet_refused_write
    try:
        yield
    except Exception as e:
        failed = write_failure(e, run_dir, ckpt_path, log_dir)
        if failed is None:
            threading.excepthook = previous
            raise
        raise failed from e  # the hook stays: the dying writer thread may print after this
    threading.excepthook = previous


def record_failure(run_dir: Path, error: BaseException, with_traceback: bool) -> bool:
    """A failed job's folder says so: ``metrics.json`` with the message, ``traceback.txt`` for a bug.

    Returns False when the folder could not be written (a full disk): the previous files stay whole.
    """
    record: dict[str, Any] = {"status": "failed", "error": str(error) or type(error).__name__,
                              **getattr(error, "record", {})}
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if with_traceback:
            record["error"] = f"{type(error).__name__}: {error}"
            record["traceback"] = "traceback.txt"
            tb = "".join(traceback.format_exception(error)).encode()
            atomic_write(run_dir / "traceback.txt", lambda f: f.write(tb))
        write_json(run_dir / "metrics.json", record)
    except OSError:
        return False
    return True


class JobFailures:
    """The failed jobs of this process (one run, or a sweep's jobs): each recorded in its folder, counted so
    ``main`` exits non-zero at the end. A user's mistake is one line; a bug keeps its traceback, and in a
    sweep is recorded and passed over so the other jobs still run."""

    def __init__(self) -> None:
        self.run_dirs: list[str] = []

    @contextmanager
    def recorded(self, run_dir: Path, sweep: bool, ckpt_path: Any, log_dir: Path) -> Iterator[None]:
        """Run the job's body; a failure is recorded in ``run_dir`` (``ckpt_path``, ``log_dir``: write_failure's)."""
        try:
            with write_failures_as_errors(run_dir, ckpt_path, log_dir):  # a full disk: a one-line WriteFailed
                yield
        except FFNZooError as e:
            # the user's input or a full disk, not a bug: one line, no traceback; recorded so a sweep goes on
            recorded = record_failure(run_dir, e, with_traceback=False)
            print(f"error: {e}" + ("" if recorded else f" ({run_dir / 'metrics.json'} could not be updated)"),
                  file=sys.stderr, flush=True)
            self.run_dirs.append(str(run_dir))
        except Exception as e:
            record_failure(run_dir, e, with_traceback=True)  # metrics.json + traceback.txt in the job's folder
            if not sweep:
                raise  # a single run: a bug keeps its traceback
            # a sweep goes on with its other jobs; main() exits non-zero at the end
            print(f"error: job {run_dir.name} crashed ({type(e).__name__}: {e}); traceback in "
                  f"{run_dir / 'traceback.txt'}", file=sys.stderr, flush=True)
            self.run_dirs.append(str(run_dir))

    def exit_if_any(self) -> None:
        if self.run_dirs:
            if len(self.run_dirs) > 1 or os.environ.get("FFNZOO_VERBOSE"):
                print(f"{len(self.run_dirs)} run(s) failed: {', '.join(self.run_dirs)}", file=sys.stderr)
            sys.exit(1)
