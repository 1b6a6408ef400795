"""A sweep job's threads (impl.threads=auto, ffn_zoo/training/lifecycle/jobs.py) and the parallel launcher's override rule."""

from __future__ import annotations

import pytest

from ffn_zoo.errors import ConfigError
from ffn_zoo.training.lifecycle.jobs import cores, job_threads, side_by_side, threads_note
from ffn_zoo.training.lifecycle.parallel import with_auto_threads


def test_auto_is_all_cores_outside_a_parallel_sweep() -> None:
    assert job_threads("auto") == cores() and "all" in threads_note("auto")
    assert job_threads(3) == 3 and job_threads(None) is None and threads_note(3) == ""


@pytest.mark.parametrize("bad", [0, -2, "many", 1.5, True])
def test_a_bad_thread_count_names_the_setting(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"impl\.threads=.*valid: a positive number, auto"):
        job_threads(bad)


def test_n_jobs_counts_as_joblib_does() -> None:
    assert side_by_side(3) == 3 and side_by_side(-1) == cores() and side_by_side(-cores() - 5) == 1
    with pytest.raises(ConfigError, match="hydra.launcher.n_jobs=0"):
        side_by_side(0)


def test_the_launcher_adds_auto_threads_unless_the_sweep_sets_them() -> None:
    assert with_auto_threads(["ffn=gelu", "seed=0"]) == ["ffn=gelu", "seed=0", "impl.threads=auto"]
    assert with_auto_threads(["ffn=gelu", "impl.threads=2"]) == ["ffn=gelu", "impl.threads=2"]
    assert with_auto_threads(["++impl.threads=1"]) == ["++impl.threads=1"]
