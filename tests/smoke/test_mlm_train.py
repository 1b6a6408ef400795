"""objective=mlm end to end on model=tiny: it trains, reports masked-token perplexity, logs the statistics."""

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.helpers import TINY, run_train

pytestmark = pytest.mark.smoke


def test_mlm_tiny_run_trains(tmp_path: Path) -> None:
    proc = run_train(["ffn=geglu", "objective=mlm", *TINY], tmp_path)
    (run_dir,) = [p.parent for p in tmp_path.glob("runs/*/metrics.json")]
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "ok" and m["objective"] == "mlm" and m["steps"] == 40
    assert m["optimal_val_ppl"] is None  # the CLM floor does not bound a masked-token loss
    assert m["params_total"] == 230_720 + 64  # tiny geglu with one more embedding row: [MASK]
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    val = [e.value for e in acc.Scalars("val/loss")]
    assert len(val) == 2 and val[-1] < val[0] - 0.05  # the masked-token loss falls
    assert "~act/dead_frac/layer_01" in acc.Tags()["scalars"]
    assert "objective mlm (15% masked, [MASK] = id 2048)" in proc.stdout
