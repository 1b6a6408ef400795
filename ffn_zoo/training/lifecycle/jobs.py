"""A sweep job's share of the machine (``impl.threads=auto``), and the jobs that failed in worker processes.

``hydra/launcher=parallel`` (``parallel.py``) runs ``hydra.launcher.n_jobs`` jobs side by side; each job's
``impl.threads=auto`` is then this machine's cores ÷ n_jobs, so together they fill it without oversubscribing.
Serially (Hydra's basic launcher, a single run) ``auto`` is all the cores.
"""

from __future__ import annotations

import os
from typing import Any

from ffn_zoo.errors import ConfigError

# failed jobs' run folders, recorded by the parallel launcher in the sweep's own process; main() exits non-zero on them
_failed_in_workers: list[str] = []


def cores() -> int:
    """CPUs this process may run on (its affinity mask, as taskset or a cluster's cgroup set it)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def side_by_side(n_jobs: Any) -> int:
    """How many jobs run at once for ``n_jobs``: -1 all cores, -2 all but one, ... (joblib's rule, as Hydra's joblib
    launcher reads it)."""
    n = int(n_jobs)
    if n == 0:
        raise ConfigError("hydra.launcher.n_jobs=0; valid: a positive number of jobs, or -1 (one per core)")
    return n if n > 0 else max(1, cores() + 1 + n)


def jobs_beside() -> int:
    """Jobs of this sweep running at once, this one included: the parallel launcher's n_jobs, else 1."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return 1
    n_jobs = HydraConfig.get().launcher.get("n_jobs")
    return side_by_side(n_jobs) if n_jobs is not None else 1


def job_threads(threads: Any) -> int | None:
    """``impl.threads`` as a count: a number as given, ``auto`` cores ÷ jobs side by side, null None (torch's)."""
    if threads is None:
        return None
    if str(threads) == "auto":
        return max(1, cores() // jobs_beside())
    if isinstance(threads, int) and not isinstance(threads, bool) and threads > 0:
        return threads
    raise ConfigError(f"impl.threads={threads!r}; valid: a positive number, auto (this machine's cores ÷ "
                      f"hydra.launcher.n_jobs) or null (torch's default)")


def threads_note(threads: Any) -> str:
    """What the banner says after the thread count when it came from ``auto``."""
    if str(threads) != "auto":
        return ""
    n = jobs_beside()
    return f" (impl.threads=auto: {cores()} cores ÷ {n} jobs side by side)" if n > 1 else \
        f" (impl.threads=auto: all {cores()} cores)"


def record_failed(run_dirs: list[str]) -> None:
    _failed_in_workers.extend(run_dirs)


def failed_in_workers() -> list[str]:
    """Run folders of the jobs that failed in the parallel launcher's workers (their metrics.json says why)."""
    return list(_failed_in_workers)
