"""A run folder that cannot be written, found before Hydra writes ``.hydra/`` into it.

Hydra makes the run (or sweep) folder and writes the job's config there before the job starts, outside the job's
failure handling (``failures.py``), and would report a full disk with its own traceback. This Hydra callback
(``hydra.callbacks`` in configs/train.yaml) makes the folder and writes a probe into it first: a refused write is
the project's one line and exit 1. Light on purpose (no torch): Hydra builds it before every run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from ffn_zoo.atomic import reason, refused_write

PROBE = ".write-check"


def check_writable(folder: Path) -> None:
    """Make ``folder`` and write, sync and remove a probe in it; a refused write exits 1 with one line."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / PROBE
        with open(probe, "wb") as f:
            f.write(b"\0" * 4096)  # a block, as the config files will need
            f.flush()
            os.fsync(f.fileno())
        probe.unlink()
    except OSError as e:
        refused = refused_write(e)
        if refused is None:
            raise
        print(f"error: could not write {refused.filename or folder}: {reason(refused)}, before training started; "
              f"free space, then run the same command again", file=sys.stderr, flush=True)
        raise SystemExit(1) from None  # SystemExit: Hydra's reporter catches only Exception


class RunFolderWritable(Callback):
    """Checks the run folder (a single run) or the sweep folder (``-m``) before Hydra writes into it."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_writable(Path(config.hydra.run.dir))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        check_writable(Path(config.hydra.sweep.dir))
