"""What a run reports as hyperparameters: the experiment's keys, swept ones first, never the machinery;
and the order TensorBoard's own backend gives the HParams columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.training.lifecycle.runs import flatten_dict
from ffn_zoo.training.reporting.hparams import FINAL_METRICS, experiment_hparams, swept_hparams

MACHINERY = ("checkpoint.", "debug.", "faults.", "instruments.", "ckpt_path", "log_dir", "logger.", "hydra.",
             "impl.threads", "impl.num_workers", "impl.compile", "trainer.enable_progress_bar", "optim.fused")


def flat(*overrides: str) -> dict:
    return flatten_dict(OmegaConf.to_container(compose(["model=tiny", *overrides]), resolve=True))


def test_hparams_are_the_experiment_swept_first() -> None:
    hp = experiment_hparams(flat("ffn=swiglu", "seed=3"), swept=["ffn", "seed"])
    assert list(hp)[:2] == ["ffn.name", "seed"]  # a swept group is its .name; a swept leaf is itself
    assert hp["ffn.name"] == "swiglu" and hp["seed"] == 3
    for key in ("ffn.activation", "ffn.gated", "model.name", "model.d_model", "model.init_std", "data.name",
                "data.train_tokens", "optim.name", "optim.lr", "trainer.max_steps", "impl.precision", "objective"):
        assert key in hp, key
    assert not [k for k in hp if k.startswith(MACHINERY)]
    assert not [k for k in hp if k.startswith("mlm.")]  # clm: the masking settings do not apply
    assert all(isinstance(v, (bool, int, float, str)) for v in hp.values())  # None and lists as text


def test_hparams_of_a_real_corpus_and_mlm() -> None:
    hp = experiment_hparams(flat("data=c4", "objective=mlm"), swept=["optim.lr", "data"])
    assert list(hp)[:2] == ["optim.lr", "data.name"]
    assert {"data.tokenizer.kind", "data.tokenizer.vocab_size", "data.val_tokens", "mlm.mask_prob"} <= set(hp)
    assert not {"data.cache_dir", "data.data_dir", "data.hub_name", "data.shuffle_buffer"} & set(hp)  # paths, plumbing


def test_swept_keys_that_are_not_hparams_are_ignored() -> None:
    assert swept_hparams(["impl.threads", "ffn", "seed", "ffn"], ["seed", "ffn.name"]) == ["ffn.name", "seed"]


def test_tensorboard_orders_columns_swept_first(tmp_path: Path) -> None:
    """Two sessions written by write_hparams, read back through TensorBoard's own experiment sorting."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import backend_context, metadata
    from torch.utils.tensorboard import SummaryWriter

    from ffn_zoo.training.reporting.tb_views import write_hparams

    for seed in (0, 1):
        hp = experiment_hparams(flat("ffn=geglu", f"seed={seed}"), swept=["seed", "ffn"])
        writer = SummaryWriter(str(tmp_path / f"seed={seed}"))
        writer.add_scalar("val/loss", 5.0 - seed, 10)
        write_hparams(writer, hp, swept_hparams(["seed", "ffn"], hp), ["val/loss"])
        writer.close()
    ea = EventAccumulator(str(tmp_path / "seed=1"))
    ea.Reload()
    content = ea.PluginTagToContent(metadata.PLUGIN_NAME)
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    backend_context._sort_and_reduce_to_hparams_limit(experiment)  # what the HParams tab gets
    names = [h.name for h in experiment.hparam_infos]
    assert names[:2] == ["ffn.name", "seed"] and "checkpoint.every_n_steps" not in names
    assert [m.name.tag for m in experiment.metric_infos] == ["val/loss"]
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    assert start.hparams["seed"].number_value == 1 and start.hparams["ffn.name"].string_value == "geglu"


def test_final_metrics_are_logged_tags() -> None:
    assert FINAL_METRICS[:2] == ("val/loss", "val/ppl") and all("/" in t for t in FINAL_METRICS)


@pytest.mark.parametrize("tokens_per_s, text", [(3900, "3.9k tok/s"), (12345, "12k tok/s"), (2.5e6, "2.5M tok/s")])
def test_validation_line(tokens_per_s: float, text: str) -> None:
    from ffn_zoo.training.reporting.progress import validation_line

    line = validation_line(120, 240, {"val/loss": 6.3149, "val/ppl": 552.4}, tokens_per_s, elapsed=120.0,
                           steps_done=120)
    assert line == f"step 120/240  val/loss 6.31  val/ppl 552  {text}  ETA 2m"
    assert validation_line(240, 240, {"val/loss": 1.5, "val/ppl": 4.48}, None, 30.0, 240).endswith(
        "val/ppl 4.48  took 30s")


def test_a_quiet_run_prints_a_training_line(capsys: pytest.CaptureFixture[str]) -> None:
    """No validation for quiet_s seconds (a ladder piece validating only at its end): one training line, then
    quiet again until the next quiet_s; a validation line restarts the count."""
    from types import SimpleNamespace

    import torch

    from ffn_zoo.training.reporting.progress import ThroughputMonitor, ValidationLines

    now = [0.0]
    lines = ValidationLines(ThroughputMonitor(4096), quiet_s=120.0, clock=lambda: now[0])
    trainer = SimpleNamespace(is_global_zero=True, global_step=0, max_steps=1000, sanity_checking=False,
                              callback_metrics={"train/loss": torch.tensor(6.125)})
    lines.on_train_start(trainer, None)
    printed = []
    for step, t in [(1, 30.0), (2, 119.0), (3, 121.0), (4, 200.0), (5, 242.0)]:
        trainer.global_step, now[0] = step, t
        lines.on_train_batch_end(trainer, None)
        printed += [ln for ln in capsys.readouterr().out.splitlines() if ln]
    assert printed == ["step 3/1000  train/loss 6.12  ETA 11h10m", "step 5/1000  train/loss 6.12  ETA 13h22m"]
    trainer.callback_metrics = {"val/loss": torch.tensor(5.0), "val/ppl": torch.tensor(148.4)}
    now[0] = 300.0
    lines.on_validation_end(trainer, None)
    now[0] = 400.0
    lines.on_train_batch_end(trainer, None)  # 100 s after the validation line: still quiet
    assert capsys.readouterr().out.splitlines() == ["step 5/1000  val/loss 5.00  val/ppl 148  ETA 16h35m"]


def test_lightning_lines_the_banner_already_says_are_dropped_and_the_rest_kept() -> None:
    import logging

    from ffn_zoo.training.reporting.progress import _DropRedundant

    keep = _DropRedundant().filter
    record = lambda msg: logging.LogRecord("lightning", logging.INFO, __file__, 1, msg, None, None)  # noqa: E731
    for msg in ("💡 Tip: For seamless cloud uploads", "GPU available: False, used: False",
                "TPU available: False, using: 0 TPU cores", "`Trainer.fit` stopped: `max_steps=40` reached."):
        assert not keep(record(msg)), msg
    for msg in ("`Trainer.fit` stopped: `max_epochs=1` reached.", "Restoring states from the checkpoint path",
                "The number of training batches (4) is smaller than the logging interval"):
        assert keep(record(msg)), msg
