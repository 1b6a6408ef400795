"""End to end: a two-variant, two-seed model=tiny sweep through ffn-zoo-compare (python -m ffn_zoo.analysis.compare) -> table and PNGs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import REPO, TINY, run_train

pytestmark = pytest.mark.smoke


def test_sweep_then_compare(tmp_path) -> None:
    run_train(["-m", "ffn=gelu,swiglu", "seed=0,1", *TINY], tmp_path)
    (sweep,) = (tmp_path / "multiruns").iterdir()
    proc = subprocess.run([sys.executable, "-m", "ffn_zoo.analysis.compare", str(sweep), "--paper"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = sweep / "compare"
    report = json.loads((out / "table.json").read_text())
    rows = {r["variant"]: r for r in report["rows"]}
    assert set(rows) == {"gelu", "swiglu"} and not report["problems"]
    assert all(r["n"] == 2 and sorted(r["seeds"]) == [0, 1] for r in rows.values())
    sw = rows["swiglu"]
    assert sw["form"] == "gated" and sw["delta_lo"] < sw["delta"] < sw["delta_hi"]
    assert rows["swiglu"]["params_ffn"] <= rows["gelu"]["params_ffn"]  # parameter-matched, not wider
    assert "| swiglu | gated |" in proc.stdout and "tensorboard --logdir" in proc.stdout
    for png in ("loss_curves.png", "delta.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    assert not list(sweep.glob("events.out.tfevents.*"))  # no "." pseudo-run in TensorBoard
    # runs are named by what differs, so TensorBoard's run list reads ffn=gelu,seed=0 ...
    assert any(p.name.startswith("ffn=gelu") or "ffn=gelu" in p.name for p in sweep.iterdir())
