"""The device check's --dry-run: every part on the CPU at tiny sizes, so the GPU script cannot rot unseen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffn_zoo.tools.device_check.cli import main
from ffn_zoo.tools.device_check.glu import GluResult, has_shards
from ffn_zoo.tools.device_check.part import from_json
from ffn_zoo.tools.device_check.report import Report
from ffn_zoo.tools.device_check.sizes import DRY, PARTS
from ffn_zoo.tools.device_check.step import StepResult
from ffn_zoo.tools.device_check.train import TrainResult
from tests.helpers import SHARED_DATA

pytestmark = pytest.mark.smoke


def test_dry_run_runs_every_part_and_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")  # the HF GPT-2 peer of part step
    wiki = SHARED_DATA / "wikipedia-en"
    data = ["--data", str(wiki)] if has_shards(wiki) else []  # part glu on real text where it is here, else toy
    rc = main(["--dry-run", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), *data])
    report = from_json(Report, json.loads((tmp_path / "out" / "report.json").read_text()))
    parts = report.parts
    assert list(parts) == list(PARTS)
    assert {n: p.status for n, p in parts.items()} == {n: "ok" for n in PARTS}, {n: p.error for n, p in parts.items()}
    assert rc == 0

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

    glu = from_json(GluResult, parts["glu"].result)
    assert {(r["variant"], r["n"]) for r in glu.rows} == {(f, len(DRY.glu_seeds)) for f in DRY.glu_ffns}
    assert glu.return_codes == [0] * len(glu.groups) and not glu.problems
    assert ("wikipedia" if data else "toy") in glu.prep.corpus.lower()

    md = (tmp_path / "out" / "report.md").read_text()
    assert md.count("\n## ") == len(PARTS) and "DRY RUN" in md
    assert md in capsys.readouterr().out  # printed at the end
