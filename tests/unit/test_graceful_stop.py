"""GracefulStop against Lightning's own SIGTERM handler: a signal in the moment between Lightning's registration and
our on_train_start reaches both; ours still saves last.ckpt after the step, and the SIGTERMException Lightning raises
then ends fit as our stop, not as a SystemExit with code 0. The signals outside the fit are the previous ones."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch
from lightning.pytorch.demos.boring_classes import BoringModel

from ffn_zoo.training.lifecycle.checkpoint import Checkpointing
from ffn_zoo.training.lifecycle.guards import GracefulStop


class SignalAtTrainStart(L.Callback):
    """SIGTERM to itself in on_train_start, before GracefulStop's (callbacks run in list order)."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


def fit(tmp_path: Path, callbacks: list[L.Callback], stop: GracefulStop) -> L.Trainer:
    if threading.current_thread() is not threading.main_thread():  # a SIGTERM here would end the test process
        pytest.skip("signal handlers are set from the main thread only")
    trainer = L.Trainer(max_steps=5, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        callbacks=[*callbacks, stop.checkpoints, stop], default_root_dir=str(tmp_path))
    with stop.listening():
        trainer.fit(BoringModel())
    return trainer


def test_a_signal_lightning_heard_first_still_stops_with_a_checkpoint(tmp_path: Path) -> None:
    stop = GracefulStop(Checkpointing(tmp_path / "checkpoints", None, save_best=False))
    before = signal.getsignal(signal.SIGTERM)
    trainer = fit(tmp_path, [SignalAtTrainStart()], stop)  # Lightning's SIGTERMException would escape here
    assert trainer.received_sigterm  # Lightning's handler did hear it: the window this test is about
    assert stop.signum == signal.SIGTERM and stop.interrupted(trainer)
    assert trainer.global_step == 1 and stop.saved == tmp_path / "checkpoints" / "last.ckpt"
    assert torch.load(stop.saved, weights_only=False)["global_step"] == 1
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler back after the fit


def test_no_signal_no_stop_and_the_handlers_restored(tmp_path: Path) -> None:
    stop = GracefulStop(Checkpointing(tmp_path / "checkpoints", None, save_best=False))
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    trainer = fit(tmp_path, [], stop)
    assert trainer.global_step == 5 and stop.signum is None and not stop.interrupted(trainer)
    stop.after_a_finished_run()  # no signal: returns (a SystemExit here fails the test)
    assert {s: signal.getsignal(s) for s in before} == before


def test_after_a_finished_run_exits_with_the_signal(capsys: Any) -> None:
    stop = GracefulStop(Checkpointing(Path("unused"), None))
    stop.signum = signal.SIGTERM
    with pytest.raises(SystemExit) as e:
        stop.after_a_finished_run()
    assert e.value.code == 128 + signal.SIGTERM
    assert "stopped  SIGTERM after the run's last step" in capsys.readouterr().err
