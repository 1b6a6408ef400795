"""Checkpoint writing, finding and loading; the non-finite guard; the security promises of the README."""

import json
import os
import random
import re
import socket
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ffn_zoo.training.lifecycle.checkpoint import (CheckpointError, Checkpointing, DirectCheckpointIO, check_checkpoint,
                                        load_checkpoint, must_match)
from ffn_zoo.errors import FFNZooError
from ffn_zoo.training.lifecycle.injection import FullDiskIO
from ffn_zoo.training.lifecycle.guards import NonFiniteError, NonFiniteGuard
from ffn_zoo.training.lifecycle.rng import rng_state, set_rng_state
from ffn_zoo.training.lifecycle.runs import find_last, resume_point
from ffn_zoo.nn.ffn import FFNSpec
from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.training.recipe.module import LitLM
from tests.helpers import OLD_CKPT, OLD_CKPT_ARGS, train

PACKAGE = Path(__file__).resolve().parents[2] / "ffn_zoo"


def fake_trainer(module: torch.nn.Module, write) -> SimpleNamespace:  # what Checkpointing.save uses of a Trainer
    return SimpleNamespace(lightning_module=module, global_step=3, is_global_zero=True, save_checkpoint=write,
                           strategy=SimpleNamespace(barrier=lambda *a: None))


def test_a_crash_mid_write_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    module = torch.nn.Linear(2, 2)
    ckpts = Checkpointing(tmp_path, every_n_steps=1)
    state = {"state_dict": {"w": torch.zeros(4096)}, "global_step": 1}
    ckpts.save(fake_trainer(module, lambda p, **k: DirectCheckpointIO().save_checkpoint(state, p)), "last.ckpt")

    with pytest.raises(OSError, match=r"No space left on device: '.*last.ckpt'"):  # the disk fills up mid-write
        ckpts.save(fake_trainer(module, lambda p, **k: FullDiskIO(1).save_checkpoint(state, p)), "last.ckpt")
    assert load_checkpoint(tmp_path / "last.ckpt")["global_step"] == 1  # the old one, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]  # no temporary left behind


def test_a_non_finite_state_is_never_written(tmp_path: Path) -> None:
    module = torch.nn.Linear(2, 2)
    ckpts = Checkpointing(tmp_path, every_n_steps=1)
    write = lambda p, **k: torch.save({"state_dict": module.state_dict(), "global_step": 1}, p)  # noqa: E731
    ckpts.save_last_now(fake_trainer(module, write))
    good = (tmp_path / "last.ckpt").read_bytes()
    with torch.no_grad():
        module.weight[0, 0] = float("nan")
    trainer = fake_trainer(module, write)
    trainer.global_step = 4
    with pytest.raises(FFNZooError, match=r"parameter weight is non-finite at step 4; the last good checkpoint is "
                                          r".*last.ckpt \(step 3\)"):
        ckpts.save_last_now(trainer)
    assert (tmp_path / "last.ckpt").read_bytes() == good


def test_rng_state_round_trips_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    torch.manual_seed(1), np.random.seed(1), random.seed(1)
    torch.save({"rng": rng_state()}, tmp_path / "r.ckpt")
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(2), np.random.seed(2), random.seed(2)
    set_rng_state(torch.load(tmp_path / "r.ckpt", weights_only=True)["rng"])
    assert torch.equal(torch.rand(3), expected[0])
    assert np.array_equal(np.random.rand(3), expected[1]) and random.random() == expected[2]


def test_last_is_the_newest_run_with_the_same_overrides(tmp_path: Path) -> None:
    def make(rel: str, mtime: float) -> Path:
        p = tmp_path / rel / "checkpoints" / "last.ckpt"
        p.parent.mkdir(parents=True)
        p.write_bytes(b"x")
        os.utime(p, (mtime, mtime))
        return p

    old = make("runs/2026-01-01_00-00-00_ffn=geglu", 1)
    new = make("runs/2026-01-02_00-00-00_ffn=geglu", 2)
    make("runs/2026-01-03_00-00-00_ffn=geglu,seed=1", 3)  # other overrides
    make("runs/2026-01-04_00-00-00_x_ffn=geglu", 4)  # a suffix match is not a match
    assert find_last(tmp_path, "ffn=geglu") == new
    assert find_last(tmp_path, "ffn=geglu", exclude=new.parent.parent) == old
    job = make("multiruns/2026-01-05_00-00-00/ffn=geglu", 5)  # a sweep job with the same name
    assert find_last(tmp_path, "ffn=geglu") == job
    assert find_last(tmp_path, "ffn=relu") is None


def test_ckpt_path_names_a_run_folder_its_checkpoints_or_a_file(tmp_path: Path) -> None:
    last = tmp_path / "runs" / "r" / "checkpoints" / "last.ckpt"
    last.parent.mkdir(parents=True)
    last.write_bytes(b"x")
    for given in (last.parent.parent, last.parent, last):
        assert resume_point(str(given), tmp_path, tmp_path / "new") == last, given
    assert resume_point(None, tmp_path, tmp_path / "new") is None  # a fresh run
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match=r"empty: no checkpoints/last.ckpt in it or above it; valid: last, a run "
                                              r"folder, or a .ckpt file$"):
        resume_point(str(tmp_path / "empty"), tmp_path, tmp_path / "new")


# ---------------------------------------------------------------------------- non-finite loss / gradients


def test_nan_stops_the_run_naming_the_step_and_the_last_good_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(NonFiniteError, match=r"non-finite loss \(nan\) at step 4 \(the weights were not updated; .*\); "
                                             r"last good checkpoint: .*run/checkpoints/last.ckpt \(step 2\)"):
        train(["trainer.max_steps=6", "checkpoint.every_n_steps=2", "debug.inject_nan_at_step=4"], tmp_path)
    ckpt = torch.load(tmp_path / "run/checkpoints/last.ckpt", weights_only=True)
    assert ckpt["global_step"] == 2  # not overwritten by the NaN step
    assert all(torch.isfinite(v).all() for v in ckpt["state_dict"].values())


def test_nan_skip_policy_drops_the_update_and_counts_it(tmp_path: Path) -> None:
    m = train(["trainer.max_steps=6", "trainer.val_check_interval=3", "faults.on_nonfinite=skip",
               "debug.inject_nan_at_step=4"], tmp_path)
    assert m["status"] == "ok" and m["steps"] == 6 and m["skipped_steps"] == 1
    assert np.isfinite(m["val_loss"])


def test_a_non_finite_gradient_with_a_finite_loss_is_caught() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    net(torch.ones(1, 2)).sum().backward()
    net[1].weight.grad[0, 1] = float("inf")
    trainer = SimpleNamespace(global_step=6, is_global_zero=True)
    guard = NonFiniteGuard("stop", checkpoints=None)
    guard.on_before_backward(trainer, net, torch.tensor(1.0))
    with pytest.raises(NonFiniteError,
                       match=r"non-finite gradient of 1.weight at step 7 .* last good checkpoint: none"):
        guard.on_before_optimizer_step(trainer, net, optimizer=None)
    net.log = lambda *a, **k: None  # LightningModule.log
    skip = NonFiniteGuard("skip", checkpoints=None)
    skip.on_before_backward(trainer, net, torch.tensor(1.0))
    skip.on_before_optimizer_step(trainer, net, optimizer=None)
    assert skip.skipped == 1 and all(p.grad is None for p in net.parameters())  # the optimizer will not step


# ---------------------------------------------------------------------------- security


class RunsCode:
    def __reduce__(self):  # unpickling this calls os.system: what weights_only loading must refuse
        return (os.system, ("touch PWNED",))


def test_loading_never_runs_pickled_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "global_step": 0, "payload": RunsCode()}, evil)
    with pytest.raises(CheckpointError, match="pickled objects that weights_only loading refuses"):
        load_checkpoint(evil)
    assert not (tmp_path / "PWNED").exists()


def test_no_eval_exec_or_unsafe_load_in_the_package() -> None:
    for path in PACKAGE.rglob("*.py"):
        src = path.read_text()
        assert not re.search(r"(?<![.\w])(eval|exec)\(", src), f"{path} evals"
        assert "weights_only=False" not in src.replace("save_checkpoint(path, weights_only=False)", ""), path
        for call in re.findall(r"torch\.load\([^)]*\)", src):
            assert "weights_only=True" in call, f"{path}: {call}"
        assert "pickle.load" not in src, path


def test_a_toy_run_makes_no_network_connection_and_writes_only_its_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    m = train(["trainer.max_steps=2"], tmp_path / "logs")
    assert m["status"] == "ok"
    assert list(cwd.iterdir()) == []  # nothing written where the command was started
    assert [p.name for p in (tmp_path / "logs").iterdir()] == ["run"]
    assert json.loads((tmp_path / "logs/run/metrics.json").read_text())["status"] == "ok"


def test_a_checkpoint_from_before_the_refactor_loads_into_todays_model() -> None:
    """The old code's checkpoint (tests/fixtures): today's configs, with the overrides it was trained with, build a
    model with exactly its keys and shapes, and the pre-resume check (model, ffn, data, seed) accepts it."""
    cfg = compose(OLD_CKPT_ARGS + ["trainer.max_steps=6"])
    model = TransformerLM(model_config(cfg, vocab_size=cfg.data.vocab_size))
    assert model.cfg.ffn == FFNSpec(True, "silu", 64)  # swiglu at 2/3 of d_ff 96
    ckpt = load_checkpoint(OLD_CKPT)
    weights = {k.removeprefix("model."): v for k, v in ckpt["state_dict"].items()}
    model.load_state_dict(weights, strict=True)  # every key present, none extra, every shape equal
    assert "init" not in ckpt["ffn_zoo"]["config"]["model"]  # written before model.init existed (ADDED_KEYS)
    assert check_checkpoint(OLD_CKPT, LitLM(model, cfg.optim, 6, fused_loss=False), must_match(cfg)) == 4
    fan_in = must_match(compose([*OLD_CKPT_ARGS, "model.init=fan_in"]))
    with pytest.raises(CheckpointError, match="model.init=gpt2 but this run has model.init=fan_in"):
        check_checkpoint(OLD_CKPT, LitLM(model, cfg.optim, 6, fused_loss=False), fan_in)
