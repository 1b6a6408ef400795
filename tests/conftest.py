"""Shared test fixtures. Tests run on CPU with few threads: on a 2-core machine a busy neighbour
process slows torch many-fold, so nothing here times anything. Plain helpers: tests/helpers.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import torch
from filelock import FileLock

from tests.helpers import REPO, SHARED_DATA, TrainOnce, only_run, run_train

torch.set_num_threads(1)

DURATIONS = Path(__file__).with_name("durations.json")  # test id -> seconds of its call, from `pytest --record-durations`
LONG = 5.0  # tests at least this long (as recorded) run first, longest first


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--record-durations", action="store_true",
                     help=f"write every passed test's call seconds to {DURATIONS.name} (the longest-first order)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests first, longest first (their seconds as recorded in tests/durations.json), so that no xdist
    worker is left alone with a long test at the end while the other idles; every other test keeps its order."""
    try:
        known = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return
    items.sort(key=lambda item: -known[item.nodeid] if known.get(item.nodeid, 0.0) >= LONG else 0.0)


_recorded: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed:  # under xdist this runs in the controller, for every worker's test
        _recorded[report.nodeid] = round(report.duration, 2)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if session.config.getoption("--record-durations") and _recorded and not os.environ.get("PYTEST_XDIST_WORKER"):
        DURATIONS.write_text(json.dumps(dict(sorted(_recorded.items())), indent=0) + "\n")


@pytest.fixture
def shared_data() -> Path:
    """../shared/data, or skip: the real corpora are beside the checkout, never inside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One temporary folder for the whole ``pytest``, every xdist worker included (each worker's own tmp_path is
    apart): where a fixture trained or written once is found by all. Write into it under a FileLock."""
    shared = tmp_path_factory.getbasetemp()  # this session's pytest-N/, or a worker's pytest-N/popen-gwK/
    return shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared  # the folder above every worker's own


@pytest.fixture(scope="session")
def train_once(shared_tmp: Path) -> TrainOnce:
    """``train_once(name, args)``: the run folder of ``train.py <args>``, trained once per ``pytest`` however many
    tests and xdist workers ask for it: the first asker trains under a file lock, the others wait, then read it.
    The folder is shared, so a test only reads it (and trains its own runs under ``tmp_path``)."""
    shared = shared_tmp

    def once(name: str, args: list[str]) -> Path:
        root = shared / f"once-{name}-{hashlib.sha256(json.dumps(args).encode()).hexdigest()[:12]}"
        with FileLock(f"{root}.lock"):
            if not (root / "trained").is_file():  # the first asker, or one after a failed try
                shutil.rmtree(root, ignore_errors=True)
                run_train(args, root)
                (root / "trained").touch()
        return only_run(root)

    return once


@pytest.fixture(scope="session")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A one-node SLURM cluster on this machine (scripts/slurm_local.sh up, its state in a temporary folder) for this
    pytest process: the environment that reaches it (SLURM_CONF; this Python first on PATH, which sbatch and srun
    jobs inherit). Stopped (`down`) when the session ends, whether the tests passed or not. Where SLURM cannot start
    (not root, packages missing, a daemon that fails) the tests skip with the script's one-line reason."""
    folder = tmp_path_factory.mktemp("slurm")
    script = ["bash", str(REPO / "scripts" / "slurm_local.sh")]
    try:
        up = subprocess.run([*script, "up", str(folder)], capture_output=True, text=True, timeout=180)
        if up.returncode != 0:
            lines = (up.stderr.strip() or up.stdout.strip() or f"exit code {up.returncode}").splitlines()
            pytest.skip(lines[-1])
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
        yield {**os.environ, "SLURM_CONF": str(folder / "slurm.conf"), "PATH": path, "OMP_NUM_THREADS": "1",
               "HYDRA_FULL_ERROR": "0"}
    finally:
        subprocess.run([*script, "down", str(folder)], capture_output=True, text=True, timeout=180)
