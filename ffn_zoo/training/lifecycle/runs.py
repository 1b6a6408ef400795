"""Run folders: how they are named, how ``ckpt_path`` finds the one to resume, and the command that resumes it.

    <log_dir>/runs/<time>_<overrides>/          one run       (hydra.run.dir)
    <log_dir>/multiruns/<time>/<overrides>/     a sweep's job (hydra.sweep.dir / subdir)

``<overrides>`` is Hydra's override string, in a sweep only its swept keys (:func:`dirname`). The
yaml builds these paths through the resolvers that :func:`register_resolvers` installs, so the
format lives here once; ``main()`` and ``compose()`` call it (importing this module registers nothing).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from ffn_zoo.errors import CheckpointError

CKPT_DIR = "checkpoints"  # inside the run folder
LAST_CKPT = f"{CKPT_DIR}/last.ckpt"  # what marks a run folder as resumable
TIME_FORMAT = "%Y-%m-%d_%H-%M-%S"
RUN_NAME = re.compile(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_(?P<overrides>.*)")  # TIME_FORMAT, "_", the overrides
SWEPT_KEYS_ENV = "FFNZOO_SWEPT_KEYS"  # main() puts the swept keys here, so every job names itself alike


def swept_keys(argv: list[str]) -> list[str]:
    """Keys a ``-m`` command line gives several values (``ffn=relu,gelu``, ``seed=range(3)``, ``glob(*)``)."""
    keys = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and not arg.startswith("-") and (re.search(r"^(glob|range|choice)\(", value) or
                                                   "," in re.sub(r"\[.*?\]|\(.*?\)", "", value)):
            keys.append(key.lstrip("+~"))
    return keys


def dirname(overrides: str) -> str:
    """A run folder name from Hydra's override string: in a sweep only the swept keys (what differs between
    its jobs, e.g. ``ffn=geglu,seed=0``); no path separators; bounded length."""
    swept = [k for k in os.environ.get(SWEPT_KEYS_ENV, "").split(",") if k]
    if swept:
        parts = [p for p in overrides.split(",") if p.split("=", 1)[0] in swept]
        overrides = ",".join(parts) or overrides
    name = re.sub(r"[/\\]+", "_", overrides) or "default"
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return name if len(name) <= 120 else f"{name[:110]}~{digest}"


def timestamp() -> str:
    return datetime.now().strftime(TIME_FORMAT)


def run_name(overrides: str) -> str:
    """A single run's folder name: ``<time>_<overrides>`` (what :data:`RUN_NAME` parses back)."""
    return f"{timestamp()}_{dirname(overrides)}"


def register_resolvers() -> None:
    """The ``${ffnzoo_*:...}`` resolvers configs/train.yaml names its run folders with."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("ffnzoo_dirname", dirname, replace=True)
    # cached, as Hydra's own ${now:}: a sweep resolves its folder once per job, and all must get the same time
    OmegaConf.register_new_resolver("ffnzoo_run_name", run_name, replace=True, use_cache=True)
    OmegaConf.register_new_resolver("ffnzoo_time", timestamp, replace=True, use_cache=True)


def overrides_name() -> str:
    """This run's folder suffix (its overrides, without ckpt_path): what ``ckpt_path=last`` matches."""
    from hydra.core.hydra_config import HydraConfig

    return dirname(HydraConfig.get().job.override_dirname) if HydraConfig.initialized() else "default"


def fixed_run_dir() -> bool:
    """True when the command line fixes the run folder (``hydra.run.dir=`` or ``hydra.sweep.dir=``), as a
    cluster job does to keep one folder per job across requeues; false for the timestamped default."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.initialized() and any(
        o.split("=", 1)[0] in ("hydra.run.dir", "hydra.sweep.dir") for o in HydraConfig.get().overrides.hydra)


def find_last(log_dir: Path, name: str, exclude: Path | None = None, marker: str = LAST_CKPT) -> Path | None:
    """The newest ``marker`` file (``checkpoints/last.ckpt``; a ladder's ``ladder.json``) of a run or sweep job
    under ``log_dir`` whose overrides are ``name``."""
    found = []
    depth = len(Path(marker).parts)
    for ckpt in [*log_dir.glob(f"runs/*/{marker}"), *log_dir.glob(f"multiruns/*/*/{marker}")]:
        run = ckpt.parents[depth - 1]
        m = RUN_NAME.fullmatch(run.name)
        suffix = m["overrides"] if run.parent.name == "runs" and m else run.name
        if suffix == name and (exclude is None or run.resolve() != exclude.resolve()):
            found.append(ckpt)
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def resolve_last(run_dir: Path, log_dir: Path, marker: str = LAST_CKPT) -> Path | None:
    """``ckpt_path=last``, the requeue rule, for a run (``marker`` its last.ckpt) and a ladder (its ladder.json):

    1. this run folder's own ``marker``, when it has one (a requeued job, or the same command in a fixed folder);
    2. else, when the command fixes the folder, None: the job's first attempt, to start afresh there;
    3. else the newest ``marker`` under ``log_dir`` of a run with the same overrides.

    Raises LookupError (the overrides looked for) when rule 3 finds nothing; the caller words the error.
    """
    own = run_dir / marker
    if own.is_file():
        return own
    if fixed_run_dir():
        return None
    name = overrides_name()
    found = find_last(log_dir, name, exclude=run_dir, marker=marker)
    if found is None:
        raise LookupError(name)
    return found


def resume_point(ckpt_path: Any, log_dir: Path, run_dir: Path, marker: str = LAST_CKPT,
                 kind: str = "run") -> Path | None:
    """What ``ckpt_path`` resumes, as its ``marker`` file (a run's ``checkpoints/last.ckpt``, a ladder's manifest);
    None for a fresh start.

    - null: None;
    - ``last``: :func:`resolve_last`'s rule (this folder's own, or the newest ``kind`` with the same overrides);
    - a checkpoint file (``marker`` is one): itself, checked when it is loaded;
    - another file or a folder: the nearest ``marker`` in it or above it (a run folder or its checkpoints/; a
      ladder, or any folder or file inside one).
    """
    if ckpt_path is None or ckpt_path == "":
        return None
    checkpoint = Path(marker).suffix == ".ckpt"  # a run's marker is a checkpoint: a file named is one
    valid = f"a {kind} folder, or a {'.ckpt file' if checkpoint else 'file in one'}"
    if str(ckpt_path) == "last":
        try:
            return resolve_last(run_dir, log_dir, marker)
        except LookupError as e:
            raise CheckpointError(f"ckpt_path=last: no {kind} under {log_dir} with the overrides '{e}' has {marker}; "
                                  f"pass ckpt_path=<{valid}>, or drop ckpt_path to start afresh") from None
    path = Path(str(ckpt_path)).expanduser()
    if not path.exists():
        raise CheckpointError(f"ckpt_path={ckpt_path}: no such file or folder; valid: last, {valid}")
    if path.is_file() and checkpoint:
        return path
    found = next((p / marker for p in [path, *path.resolve().parents] if (p / marker).is_file()), None)
    if found is None:
        raise CheckpointError(f"ckpt_path={ckpt_path}: no {marker} in it or above it; valid: last, {valid}")
    return found


def resume_command(ckpt: Path | None, overrides: Sequence[str] | None = None) -> str:
    """The exact command line that resumes this run from ``ckpt`` (None: that runs it again from the start).

    ``overrides``: the job's own (a parallel sweep's launcher names a job it did not run itself); by default
    this run's, from Hydra. Without the fault injection of the tests (``debug.*``): the resumed run would only fail
    again.
    """
    from hydra.core.hydra_config import HydraConfig

    args: list[str] = []
    given = overrides is not None
    if given or HydraConfig.initialized():
        task = list(overrides) if given else HydraConfig.get().overrides.task
        keys = [(a, a.split("=")[0].lstrip("+~")) for a in task]
        args = [a for a, key in keys if key != "ckpt_path" and not key.startswith("debug.")]
        if not given and fixed_run_dir():  # the resumed run goes on in the same folder, as a requeued job would
            args.append(f'hydra.run.dir="{Path(HydraConfig.get().runtime.output_dir).resolve()}"')
    script = os.path.basename(sys.argv[0]) if sys.argv else ""
    # an installed entry point (ffn-zoo-train) is run by its name; anything else (train.py, python -c, pytest and its
    # xdist workers, which run as python -c) as the repo's train.py
    named = script and script != "-c" and not script.endswith(".py") and "pytest" not in script
    prog = [script] if named else ["python", "train.py"]
    # quoted for Hydra too: a run folder name holds "," and "=", which an unquoted override value may not
    return shlex.join([*prog, *args, *([f'ckpt_path="{ckpt.resolve()}"'] if ckpt else [])])


def flatten_dict(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: the dotted keys a run's config is logged (HParams) and compared by."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(flatten_dict(v, key + ".") if isinstance(v, dict) else {key: v})
    return out
