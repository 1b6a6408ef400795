"""A plain (non-editable) install into a fresh virtual environment: the console scripts find their configs and
run from any folder, the device check's dry run too. No download: the wheel is built from the tracked files with
this environment's setuptools, and the fresh venv borrows this environment's dependencies (torch, Lightning, ...)
through a .pth file."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import REPO

pytestmark = [pytest.mark.slow, pytest.mark.smoke]


def sh(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


@dataclass
class Installed:
    """ffn-zoo installed from a wheel into a fresh venv outside the checkout; commands run from an empty folder."""

    bin: Path
    purelib: Path
    elsewhere: Path  # not the checkout, no PYTHONPATH: only the installed package
    env: dict[str, str]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp_path = tmp_path_factory.mktemp("install")
    src = tmp_path / "src"
    files = sh("git", "ls-files", cwd=REPO).stdout.split()
    for f in files:
        if (REPO / f).is_file() and not f.startswith("tests/"):
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            (src / f).write_bytes((REPO / f).read_bytes())
    sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path / "wheels",
       src, cwd=tmp_path)
    (wheel,) = (tmp_path / "wheels").glob("ffn_zoo-*.whl")

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    py = env_dir / "bin" / "python"
    purelib = Path(sh(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout.strip())
    # dependencies from this environment, after the fresh venv's own site-packages (so the wheel's ffn_zoo wins)
    (purelib / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    sh(sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    return Installed(env_dir / "bin", purelib, elsewhere, env)


def test_pip_install_dot_in_a_fresh_venv(installed: Installed, tmp_path: Path) -> None:
    py, elsewhere, env = installed.bin / "python", installed.elsewhere, installed.env
    where = sh(py, "-c", "import ffn_zoo.training.recipe.build as b; print(b.__file__, b.config_dir())", cwd=elsewhere, env=env)
    assert str(installed.purelib) in where.stdout and str(REPO) not in where.stdout

    bin_ = installed.bin
    sh(bin_ / "ffn-zoo-train", "-m", "model=tiny", "ffn=gelu,swiglu", "trainer.max_steps=2",
       "trainer.val_check_interval=2", "data.train_tokens=8192", "data.val_tokens=1024", "data.batch_size=4",
       "trainer.enable_progress_bar=false", "impl.threads=1", f"log_dir={tmp_path / 'logs'}", cwd=elsewhere, env=env)
    (sweep,) = (tmp_path / "logs" / "multiruns").iterdir()
    for job in sweep.glob("ffn=*"):
        assert json.loads((job / "metrics.json").read_text())["status"] == "ok"
    out = sh(bin_ / "ffn-zoo-compare", sweep, "--no-layout", cwd=elsewhere, env=env).stdout
    assert "| swiglu | gated |" in out
    out = sh(bin_ / "ffn-zoo-report", "model=tiny", "--no-time", "--variants", "mish_glu", cwd=elsewhere, env=env).stdout
    assert "| mish_glu | gated | 168 |" in out
    for tool in ("ffn-zoo-bench", "ffn-zoo-bench-data", "ffn-zoo-bench-act-stats", "ffn-zoo-tune"):
        sh(bin_ / tool, "--help", cwd=elsewhere, env=env)
    assert list(elsewhere.iterdir()) == []  # nothing written where the commands ran


def test_device_check_dry_run_from_the_install(installed: Installed, tmp_path: Path) -> None:
    """The device check finds the training entry point through the installed package, not a checkout: its CPU
    dry run passes every part from an empty folder, and neither the report nor a training log names the checkout."""
    pytest.importorskip("transformers")  # the HF GPT-2 peer of part step
    out, work = tmp_path / "out", tmp_path / "work"
    sh(installed.bin / "ffn-zoo-device-check", "--dry-run", "--out", out, "--work", work, cwd=installed.elsewhere,
       env=installed.env)
    report = json.loads((out / "report.json").read_text())
    assert {n: p["status"] for n, p in report["parts"].items()} == dict.fromkeys(
        ("env", "gemm", "step", "train", "glu"), "ok")
    assert report["parts"]["env"]["result"]["package"].endswith(f" at {installed.purelib / 'ffn_zoo'}")
    assert report["parts"]["train"]["result"]["resumed_ok"]
    for text in [(out / "report.json").read_text(), *(f.read_text() for f in work.glob("*.log"))]:
        assert str(REPO) not in text
    assert list(installed.elsewhere.iterdir()) == []  # nothing written where the check ran
