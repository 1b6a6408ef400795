"""``hydra/launcher=parallel`` (configs/hydra/launcher/parallel.yaml): a sweep's jobs side by side, a process
each, with ffn-zoo's job rules (ffn_zoo/training/lifecycle/parallel.py).

Hydra imports every module under ``hydra_plugins`` at start-up, so this one imports nothing beyond Hydra's core;
the launch code is loaded when a sweep launches. It needs no other package (no hydra-joblib-launcher, no joblib), so
a machine without them, such as the GPU image, trains and sweeps all the same.
"""

from __future__ import annotations

from typing import Any, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class ParallelLauncher(Launcher):
    """A sweep's jobs ``n_jobs`` at a time, threads split, one console line per job (ffn_zoo.training.lifecycle.parallel)."""

    def __init__(self, **kwargs: Any) -> None:
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None
        self.settings = kwargs  # the launcher config's fields (n_jobs)

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.task_function, self.hydra_context = config, task_function, hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ffn_zoo.training.lifecycle.parallel import launch

        return launch(self, job_overrides, initial_job_idx)
