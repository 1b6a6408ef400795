"""The time line a run ends with (reporting/progress.py, TimeSplit): every second in exactly one phase, on a clock the
test drives; the line's form; metrics.json's time_s on a real tiny run adds up (no timing is asserted)."""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ffn_zoo.training.reporting import progress
from ffn_zoo.training.reporting.progress import TimeSplit, time_line
from tests.helpers import run_train, tiny


def test_every_second_lands_in_one_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([1, 2, 3, 5, 7, 10, 11, 12, 13])  # the hooks' calls below, in order
    ckpt = iter([0, 0, 0, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0])  # checkpoint seconds written so far, at the same calls
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    timer = TimeSplit(lambda: next(ckpt))
    t, m = SimpleNamespace(), None
    timer.on_validation_start(t, m), timer.on_validation_end(t, m)  # the sanity check, 1 s
    timer.on_train_start(t, m)  # the loop from t=3
    timer.on_validation_start(t, m), timer.on_validation_end(t, m)  # 2 s, of which 0.5 s writing best.ckpt
    timer.on_train_end(t, m)  # to t=10, 2 s of checkpoint writes in the loop
    timer.on_validation_start(t, m), timer.on_validation_end(t, m)  # the closing validation, 1 s
    split = timer.split(started=0, masking_s=0.25)
    assert split == {"total": 13, "train_steps": 7 - 1.5 - 2, "validation": 1 + 1.5 + 1, "checkpoints": 2,
                     "start_up": 3 - 1, "other": 13 - 3.5 - 3.5 - 2 - 2, "masking": 0.25}


def test_the_line() -> None:
    split = {"total": 4000.0, "train_steps": 3240.0, "validation": 480.0, "masking": 40.0, "checkpoints": 160.0,
             "start_up": 120.0, "other": 0.0}
    assert time_line(split) == ("81% train steps, 12% validation (1% masking), 4% checkpoints, 3% start-up, 0% other "
                                "(of 1h06m)")
    assert "masking" not in time_line({**split, "masking": 0.0})


@pytest.mark.smoke
def test_a_run_and_a_ladder_record_where_their_time_went(tmp_path: Path) -> None:
    proc = run_train(tiny("trainer.max_steps=10", "trainer.val_check_interval=5", "optim.schedule=wsd",
                          "optim.warmup=2", "ladder.budgets=[640,1280]", "data.batch_size=4"), tmp_path)
    (ladder,) = [p for p in tmp_path.glob("runs/*") if (p / "ladder.json").is_file()]
    for folder in (ladder / "trunk", ladder / "budget=640", ladder):
        split = json.loads((folder / "metrics.json").read_text())["time_s"]
        parts = sum(v for k, v in split.items() if k not in ("total", "masking"))
        assert split["total"] == pytest.approx(parts) and min(split.values()) >= 0, (folder, split)
    assert proc.stdout.count("\ntime     ") == 3 and "\nladder   time: " in proc.stdout
