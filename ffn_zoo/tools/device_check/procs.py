"""Child processes: each in its own session (so a kill takes its whole group) with a hard timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def train_command(overrides: list[str]) -> list[str]:
    """The training entry point of the installed (or importable) package, as ``ffn-zoo-train`` runs it."""
    return [sys.executable, "-m", "ffn_zoo.train", *overrides]


def child_env(site: Path | None = None) -> dict[str, str]:
    """This environment, unbuffered, with full Hydra tracebacks; ``site`` (installed wheels) first on the path."""
    path = os.pathsep.join(p for p in (str(site) if site else None, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONUNBUFFERED": "1", "HYDRA_FULL_ERROR": "1", **({"PYTHONPATH": path} if path else {})}


def start(cmd: list[str], env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen:
    """``cmd`` in a new session, its output to ``log`` (else inherited)."""
    out = open(log, "w") if log else None
    try:
        return subprocess.Popen(cmd, env=env or child_env(), stdout=out, stderr=subprocess.STDOUT if out else None,
                                start_new_session=True)
    finally:
        if out:
            out.close()  # the child holds its own copy of the file descriptor


def finish(proc: subprocess.Popen, timeout: float) -> int | None:
    """The child's exit code; None when it was still running at ``timeout`` and was killed, all its group."""
    try:
        return proc.wait(timeout=max(timeout, 0.1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None


def wait_all(procs: list[subprocess.Popen], until: float, grace: float) -> list[int | None]:
    """Wait for every child until ``until`` (time.time()); then SIGTERM the groups still running (train finishes
    its step, checkpoints, and says interrupted) and SIGKILL what is left ``grace`` seconds later."""
    for proc in procs:
        try:
            proc.wait(timeout=max(until - time.time(), 0.1))
        except subprocess.TimeoutExpired:
            pass
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    kill_at = time.time() + grace
    return [finish(proc, kill_at - time.time()) for proc in procs]


def run_logged(cmd: list[str], log: Path, timeout: float) -> int | None:
    """Run ``cmd`` with output to ``log``: its return code, None if killed at ``timeout``."""
    return finish(start(cmd, log=log), timeout)
