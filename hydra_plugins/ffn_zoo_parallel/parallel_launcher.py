"""``hydra/launcher=parallel`` (configs/hydra/launcher/parallel.yaml): hydra-joblib-launcher's JoblibLauncher with
ffn-zoo's job rules. Hydra imports every module under ``hydra_plugins`` at start-up, so this one stays light."""

from __future__ import annotations

from typing import Sequence

from hydra.core.utils import JobReturn
from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher


class ParallelLauncher(JoblibLauncher):
    """A sweep's jobs ``n_jobs`` at a time, threads split, one console line per job (ffn_zoo.training.parallel)."""

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from ffn_zoo.training.parallel import launch

        return launch(self, job_overrides, initial_job_idx)
