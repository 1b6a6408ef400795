"""What a researcher sees: TensorBoard over a real sweep (the run list is the jobs, HParams swept first, loss
first), the log of a non-interactive run, several loggers at once, and W&B offline."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer
from tensorboard.plugins.custom_scalar import metadata as custom_scalars
from tensorboard.plugins.hparams import backend_context, metadata

from ffn_zoo.training.reporting.instruments import ACT
from tests.helpers import run_train, tiny

pytestmark = pytest.mark.smoke

# step 120/240  val/loss 6.31  val/ppl 550  3.9k tok/s  ETA 2m
LINE = re.compile(r"^step (\d+)/40  val/loss \d+\.\d\d  val/ppl \d+(\.\d\d)?  [\d.]+[kMG]? tok/s  (ETA|took) \d+[smh]\S*$")


def only_run(root: Path) -> Path:
    (run_dir,) = [p for p in (root / "runs").iterdir() if p.is_dir()]
    return run_dir


def test_sweep_in_tensorboard(tmp_path: Path) -> None:
    run_train(["-m", "ffn=gelu,swiglu", *tiny()], tmp_path)
    (sweep,) = (tmp_path / "multiruns").iterdir()
    mux = EventMultiplexer().AddRunsFromDirectory(str(sweep))
    mux.Reload()
    assert sorted(mux.Runs()) == ["ffn=gelu", "ffn=swiglu"]  # a folder per job, named by what differs; no "." run
    assert [json.loads((sweep / r / "metrics.json").read_text())["status"] for r in sorted(mux.Runs())] == ["ok"] * 2
    assert not list(sweep.glob("events.out.tfevents.*"))

    for run in mux.Runs():
        content = mux.PluginRunToTagToContent(metadata.PLUGIN_NAME)[run]
        experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
        backend_context._sort_and_reduce_to_hparams_limit(experiment)  # the HParams tab's column order
        names = [h.name for h in experiment.hparam_infos]
        assert names[0] == "ffn.name" and names[1:] == sorted(names[1:])  # swept first, then by name
        assert not [n for n in names if n.startswith(("checkpoint.", "debug.", "faults.", "instruments.", "ckpt_path"))]
        metrics = [m.name.tag for m in experiment.metric_infos]
        assert metrics[:2] == ["val/loss", "val/ppl"] and "train/mean_tokens_per_s" in metrics
        tags = mux.GetAccumulator(run).Tags()["scalars"]
        assert set(metrics) <= set(tags)  # every metric column reads a logged scalar
        groups = sorted({t.split("/")[0] for t in tags})
        assert groups == ["train", "val", ACT]  # loss first; activation statistics last; no flat "epoch"
        layouts = mux.PluginRunToTagToContent(custom_scalars.PLUGIN_NAME)
        assert custom_scalars.CONFIG_SUMMARY_TAG in layouts[run]  # the layout rides in the run's own events


def test_log_of_a_non_interactive_run(tmp_path: Path) -> None:
    proc = run_train(tiny("trainer.enable_progress_bar=true"), tmp_path)  # stdout is a pipe here
    out = proc.stdout + proc.stderr
    lines = [m.group(1) for m in map(LINE.match, proc.stdout.splitlines()) if m]
    assert lines == ["20", "40"], proc.stdout[-2000:]  # one line per validation
    assert "Tip" not in out and "Validation DataLoader" not in out and "\r" not in out and "it/s" not in out
    assert "GPU available" not in out and "Trainer.fit` stopped" not in out  # the banner and metrics.json say it


def test_two_loggers_same_names(tmp_path: Path) -> None:
    run_train(tiny("logger=[tensorboard,csv]"), tmp_path)
    run_dir = only_run(tmp_path)
    with (run_dir / "metrics.csv").open() as f:
        columns = set(next(csv.reader(f))) - {"step", "epoch"}
    ea = EventAccumulator(str(run_dir))
    ea.Reload()
    assert columns == set(ea.Tags()["scalars"]) and "val/loss" in columns


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="the wandb extra is not installed")
def test_wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var, sub in (("WANDB_CONFIG_DIR", "cfg"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data")):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / sub))
    monkeypatch.setenv("WANDB_MODE", "offline")  # no network: the run is written locally, `wandb sync` uploads it
    run_train(tiny("logger=[tensorboard,wandb]"), tmp_path / "logs")
    run_dir = only_run(tmp_path / "logs")
    (record,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = record.read_bytes()  # protobuf records: the names are stored as plain bytes
    for name in ("val/loss", "train/mean_tokens_per_s", f"{ACT}/dead_frac/mean", "ffn.name", "trainer.max_steps",
                 run_dir.name):
        assert name.encode() in data, name
    assert b"checkpoint.every_n_steps" not in data  # the same hyperparameter selection as TensorBoard's
