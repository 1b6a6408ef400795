"""The device check's --dry-run: every part on the CPU at tiny sizes, so the GPU script cannot rot unseen."""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from ffn_zoo.analysis.compare import compare
from ffn_zoo.tools.device_check.glu import TARBALL as GLU_TARBALL
from ffn_zoo.tools.device_check.glu import GluResult, has_shards
from ffn_zoo.tools.device_check.part import from_json
from ffn_zoo.tools.device_check.report import Report
from ffn_zoo.tools.device_check.sizes import DRY, PARTS
from ffn_zoo.tools.device_check.step import StepResult
from ffn_zoo.tools.device_check.train import TrainResult
from tests.helpers import REPO, SHARED_DATA

IMAGE_PACKAGES = REPO / "tests" / "fixtures" / "device_image_packages.txt"
SHIPPED_WHEELS = ("hydra-core", "omegaconf", "antlr4-python3-runtime")  # scripts/device_prep.sh

pytestmark = pytest.mark.smoke


def image_venv(root: Path) -> Path:
    """A virtual environment that lacks what the GPU image lacks, linked from this one: its python. The project's
    own requirements (extras too) and Hydra plugins that are neither on the image nor shipped as wheels by
    device_prep.sh (``datasets``, ``wandb``, ...) are left out; everything else is linked as installed here, so what
    the image's own packages need comes along. ffn_zoo itself comes from the checkout, as device_check.sh runs it."""
    on_image = {canon(line) for line in IMAGE_PACKAGES.read_text().split() if not line.startswith("#")}
    on_image |= {canon(name) for name in SHIPPED_WHEELS}
    wanted = {canon(re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0]) for r in importlib.metadata.requires("ffn-zoo") or []}
    here = Path(sysconfig.get_paths()["purelib"])
    left_out = {"ffn-zoo"}
    for dist in importlib.metadata.distributions(path=[str(here)]):
        name = canon(dist.metadata["Name"])
        plugin = any(str(f).startswith("hydra_plugins/") for f in dist.files or [])
        if name not in on_image and (name in wanted or plugin):
            left_out.add(name)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = Path(subprocess.run([str(root / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                                "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
    for dist in importlib.metadata.distributions(path=[str(here)]):
        if canon(dist.metadata["Name"]) in left_out:
            continue
        for top in {Path(str(f)).parts[:2] for f in dist.files or [] if not str(f).startswith("..")}:
            namespace = len(top) == 2 and (here / top[0]).is_dir() and not (here / top[0] / "__init__.py").is_file() \
                and not top[0].endswith((".dist-info", ".libs", ".data"))
            entry = top if namespace else top[:1]
            dst = site.joinpath(*entry)
            if here.joinpath(*entry).exists() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                dst.symlink_to(here.joinpath(*entry))
    return root / "bin" / "python"


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_dry_run_runs_every_part_on_what_the_image_has(tmp_path: Path) -> None:
    """scripts/device_check.sh with DRY=1, in an environment that holds what the GPU image holds: every part passes."""
    pytest.importorskip("transformers")  # the HF GPT-2 peer of part step
    python = image_venv(tmp_path / "venv")
    probe = ("import importlib, sys\nfor m in sys.argv[1:]:\n    try:\n        importlib.import_module(m)\n"
             "        print(m)\n    except ImportError:\n        pass")
    absent = subprocess.run([str(python), "-c", probe, "datasets", "hydra_plugins.hydra_joblib_launcher", "wandb"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert absent.stdout.split() == [], absent.stdout + absent.stderr  # the emulation holds what it should not
    wiki = SHARED_DATA / "wikipedia-en"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{python.parent}{os.pathsep}{env['PATH']}", DRY="1", OUT=str(tmp_path / "out"),
               WORK=str(tmp_path / "work"))
    if has_shards(wiki):  # part glu on real text where it is here (the device reads .device/wikipedia-en), else toy
        env["DATA"] = str(wiki)
    proc = subprocess.run(["bash", str(REPO / "scripts" / "device_check.sh")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert (tmp_path / "out" / "report.json").is_file(), out[-3000:]
    report = from_json(Report, json.loads((tmp_path / "out" / "report.json").read_text()))
    parts = report.parts
    assert list(parts) == list(PARTS)
    assert {n: p.status for n, p in parts.items()} == {n: "ok" for n in PARTS}, {n: p.error for n, p in parts.items()}
    assert proc.returncode == 0, out[-3000:]

    gemm = parts["gemm"].result
    assert all(gemm[k]["tflops"] > 0 for k in ("bf16", "tf32", "fp32"))
    step = from_json(StepResult, parts["step"].result)
    assert step.batch == DRY.batch_max  # no OOM on a CPU: the doubling stops at the cap
    impls = {(r.case.impl, r.case.ffn, r.case.precision) for r in step.rows}
    assert {("ours", "gelu", "bf16-mixed"), ("hf", "gelu", "bf16-mixed"), ("ours", "gelu", "tf32"),
            ("ours", "geglu", "bf16-mixed"), ("ours", "swiglu", "bf16-mixed")} <= impls
    assert all(r.tokens_per_s > 0 and r.mfu > 0 for r in step.rows)
    assert any(x.what.startswith("ours / HF") for x in step.ratios)

    train = from_json(TrainResult, parts["train"].result)
    assert train.killed_as_planned and train.resumed_ok and train.learned and train.best_ckpt
    assert train.vs_bare_step > 0 and train.command.startswith("ffn-zoo-train ")

    # part glu: a ladder per objective and variant at the model's shape, every budget compared, all of it back
    glu = from_json(GluResult, parts["glu"].result)
    assert sorted(glu.ladders) == sorted(f"{o}_{f}" for o in DRY.glu_objectives for f in DRY.glu_ffns)
    assert glu.return_codes == [0] * len(glu.ladders) and not glu.problems, glu.problems
    # how many rungs fit depends on this CPU's speed and load (plan_budgets' arithmetic is pinned in the unit tests)
    assert 1 <= len(glu.budget_tokens) <= DRY.glu_max_rungs and glu.planned_s < glu.window_s
    assert all(f"model={DRY.glu_model}" in c and "impl.precision=bf16-mixed" in c for c in glu.commands)
    assert ("wikipedia" if "DATA" in env else "toy") in glu.prep.corpus.lower()
    swiglu = [(r["budget_tokens"], r["ladder_setting"]) for r in glu.delta_rows if r["variant"] == "swiglu"]
    assert sorted(swiglu) == sorted((t, k + 1) for t in glu.budget_tokens for k in range(len(DRY.glu_objectives)))
    tarball = tmp_path / "out" / GLU_TARBALL
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "back", filter="data")
    assert not any(n.endswith(".ckpt") for n in names) and any(n.endswith("metrics.json") for n in names)
    back = compare(sorted((tmp_path / "back" / "gpu").glob("*_*")), out=tmp_path / "back" / "again", layout=False)
    assert [(r["budget_tokens"], r["delta"]) for r in back["delta_rows"]] == \
        [(r["budget_tokens"], r["delta"]) for r in glu.delta_rows]  # ffn-zoo-compare reads what came back

    md = (tmp_path / "out" / "report.md").read_text()
    assert md.count("\n## ") == len(PARTS) and "DRY RUN" in md
    assert md in proc.stdout  # printed at the end
