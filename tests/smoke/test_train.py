"""train.py end to end on model=tiny: it learns and logs (a sweep of it: test_what_a_researcher_sees.py)."""

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.helpers import TINY, run_train

pytestmark = pytest.mark.smoke


def scalars(run_dir: Path, tag: str) -> list[float]:
    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return [e.value for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def test_tiny_run_learns_and_logs(tmp_path: Path) -> None:
    proc = run_train(["ffn=geglu", *TINY], tmp_path)
    (run_dir,) = [p.parent for p in tmp_path.glob("runs/*/metrics.json")]
    m = json.loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "ok" and m["ffn"] == "geglu" and m["gated"] and m["d_ff"] == 168
    assert m["steps"] == 40 and m["tokens_seen"] == 40 * 16 * 32
    # the Bayes floor of the toy corpus is below what a trained model reaches
    assert m["optimal_val_ppl"] < m["val_ppl"]
    val = scalars(run_dir, "val/loss")
    assert len(val) == 2 and val[-1] < val[0] - 0.05  # the validation loss falls
    for tag in ("train/loss", "train/lr", "train/tokens_per_s", "train/tokens_seen", "val/ppl", "val/optimal_ppl"):
        assert scalars(run_dir, tag), f"{tag} not logged"
    # startup facts and the final line
    assert "W_out·(gelu(W_gate·x) ⊙ W_up·x)" in proc.stdout
    assert "hidden 168 (parameter-matched to dense 256)" in proc.stdout
    assert "val/ppl" in proc.stdout and "optimum" in proc.stdout


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    proc = run_train(["model=tiny", "model.n_heads=3"], tmp_path, check=False)
    assert proc.returncode != 0
    assert "error: model.d_model=64 is not divisible by model.n_heads=3" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = run_train(["ffn=swishglu"], tmp_path, check=False)
    assert proc.returncode != 0 and "swiglu" in proc.stderr and "Traceback" not in proc.stderr
