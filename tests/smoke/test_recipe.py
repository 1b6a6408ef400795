"""train.py with T5's recipe switched on: fan-in init and Adafactor, on model=tiny; start-up says both."""

import json
import math
from pathlib import Path

from tests.helpers import run_train, tiny


def test_fan_in_adafactor_trains_and_says_so(tmp_path: Path) -> None:
    proc = run_train(tiny("model.init=fan_in", "optim=adafactor"), tmp_path)
    lines = proc.stdout.splitlines()
    assert any(line.startswith("init     fan_in: σ = 1/√fan_in") for line in lines), proc.stdout[-2000:]
    assert any(line.startswith("optim    adafactor, relative step lr 0.01") and "inverse_sqrt" in line
               for line in lines), proc.stdout[-2000:]
    metrics = json.loads(next(tmp_path.rglob("metrics.json")).read_text())
    assert metrics["status"] == "ok" and metrics["steps"] == 40 and math.isfinite(metrics["val_loss"])
