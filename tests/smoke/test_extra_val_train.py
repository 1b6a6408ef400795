"""train.py with data.extra_val (model=tiny, byte tokenizer, local files): the extra set is logged and written to
metrics.json, its numbers are those of a run that validates on it as the main split, the main val/loss is the
same as without it, and a missing file stops before training with one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_train

pytestmark = pytest.mark.smoke

TINY_TEXT = [
    "model=tiny", "data=text", "tokenizer=bytes", "trainer.max_steps=12", "trainer.val_check_interval=6",
    "trainer.log_every_n_steps=3", "data.batch_size=8", "data.val_batch_size=16", "data.val_tokens=1024",
    "trainer.enable_progress_bar=false", "impl.threads=1", "instruments.act_stats=false",
]


def metrics_of(root: Path) -> dict:
    (path,) = root.glob("runs/*/metrics.json")
    return json.loads(path.read_text())


def scalars(root: Path) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run,) = root.glob("runs/*")
    ea = EventAccumulator(str(run), size_guidance={"scalars": 0})
    ea.Reload()
    return {tag: [e.value for e in ea.Scalars(tag)] for tag in ea.Tags()["scalars"]}


@pytest.fixture
def texts(tmp_path: Path) -> dict[str, Path]:
    out = {k: tmp_path / f"{k}.txt" for k in ("train", "val", "other")}
    out["train"].write_text("".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(600)))
    out["val"].write_text("".join(f"line {i}: the lazy dog sleeps under the brown fox.\n" for i in range(60)))
    out["other"].write_text("".join(f"verse {i}: shall I compare thee to a summer's day?\n" for i in range(60)))
    return out


def test_extra_set_scores_like_the_main_split_and_leaves_it_alone(tmp_path: Path, texts: dict) -> None:
    common = [*TINY_TEXT, f"data.train={texts['train']}", f"data.cache_dir={tmp_path / 'cache'}"]
    proc = run_train([*common, f"data.val={texts['val']}", f"+data.extra_val.other.files={texts['other']}"],
                     tmp_path / "with")
    run_train([*common, f"data.val={texts['val']}"], tmp_path / "without")
    run_train([*common, f"data.val={texts['other']}"], tmp_path / "as_main")
    with_, without, as_main = (metrics_of(tmp_path / k) for k in ("with", "without", "as_main"))

    assert "val set  other: 1,024 tokens" in proc.stdout
    assert with_["extra_val"] == ["other"] and with_["val_other_bpb"] > 0
    # the same model at the same steps scored on the same blocks: equal to the last bit
    assert with_["val_other_loss"] == as_main["val_loss"] and with_["val_other_bpb"] == as_main["val_bpb"]
    assert with_["val_other_ppl"] == as_main["val_ppl"]
    assert with_["val_loss"] == without["val_loss"] and with_["val_loss"] != with_["val_other_loss"]

    tb = scalars(tmp_path / "with")
    assert {"val/other/loss", "val/other/ppl", "val/other/bpb"} <= set(tb)
    assert not any("dataloader_idx" in t for t in tb)
    assert tb["val/other/loss"] == scalars(tmp_path / "as_main")["val/loss"]  # at every validation
    assert tb["val/loss"] == scalars(tmp_path / "without")["val/loss"]


def test_missing_extra_set_is_one_line_before_training(tmp_path: Path, texts: dict) -> None:
    missing = tmp_path / "nope.jsonl"
    proc = run_train([*TINY_TEXT, f"data.train={texts['train']}", f"data.cache_dir={tmp_path / 'cache'}",
                      f"+data.extra_val.c4.files={missing}"], tmp_path, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == f"error: data.extra_val.c4.files: no such file: {missing}"
    assert "Traceback" not in proc.stderr and "train/loss" not in proc.stdout
