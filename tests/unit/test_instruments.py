"""Activation statistics: dead units on constructed activations, the callback on a real model,
the statistics in a run's event files and metrics.json, and the learnable β moving and logged."""

import json
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.training.reporting.instruments import ACT, ActivationStats, act_tag, dead_units, elementwise_derivative
from ffn_zoo.nn.activations import ACTIVATIONS, get_activation
from ffn_zoo.nn.ffn import FFNSpec
from ffn_zoo.nn.model import ModelConfig, TransformerLM
from ffn_zoo.train import run
from tests.helpers import tiny


def test_dead_units_known_answer() -> None:
    act = torch.rand(4, 10, 6) + 0.1  # (B, T, H): every unit alive
    act[..., 1] = 0.0  # dead: zero everywhere
    act[..., 3] = -0.1  # dead: negative everywhere (a GELU unit stuck in its negative lobe)
    act[..., 4] = 0.0
    act[2, 7, 4] = 0.5  # alive: fires on a single token
    act[..., 5] = 5e-7  # dead: below ε everywhere
    assert dead_units(act, eps=1e-6).tolist() == [False, True, False, True, False, True]
    # two-sided (identity gate): only |act| ≤ ε counts, so the negative unit is alive
    assert dead_units(act, eps=1e-6, two_sided=True).tolist() == [False, True, False, False, False, True]


def test_derivative_known_answers() -> None:
    x = torch.tensor([-1.0, 0.0, 2.0])
    assert elementwise_derivative(get_activation("relu"), x).tolist() == [0.0, 0.0, 1.0]
    assert elementwise_derivative(get_activation("gelu"), torch.zeros(1)).item() == pytest.approx(0.5)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_every_activation_dead_rule_tells_off_from_on(name: str) -> None:
    """The entry's dead-unit rule, as the callback applies it: a unit held in the off-region (or at 0, for an
    activation without one) is dead, a unit with a positive input on some token is alive."""
    entry, act = ACTIVATIONS[name], get_activation(name)
    off = torch.full((8, 3), 0.0 if entry.dead_two_sided else -20.0)  # (tokens, units)
    on = off.clone()
    on[3] = 2.0  # each unit fires on one token
    assert dead_units(act(off), two_sided=entry.dead_two_sided).all(), f"{name}: {entry.dead}"
    assert not dead_units(act(on), two_sided=entry.dead_two_sided).any(), f"{name}: {entry.dead}"
    assert torch.isfinite(elementwise_derivative(act, on)).all()


def tiny_model(gated: bool, activation: str) -> TransformerLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=50, seq_len=16, d_model=32, n_layers=2, n_heads=2,
                      ffn=FFNSpec(gated, activation, hidden=40))
    return TransformerLM(cfg)


@pytest.mark.parametrize("gated,activation", [(False, "relu"), (False, "gelu"), (True, "gelu")])
def test_callback_counts_units_killed_by_hand(gated: bool, activation: str) -> None:
    model = tiny_model(gated, activation)
    first = model.blocks[0].ffn.w_gate if gated else model.blocks[0].ffn.w_in
    with torch.no_grad():
        first.weight[:10] = 0.0  # pre-activation 0 for every token: act(0) = 0 <= ε, so dead
    stats = ActivationStats(torch.randint(0, 50, (4, 16)), histograms=False)
    scalars, _ = stats.measure(model)
    assert scalars[f"{ACT}/dead_frac/layer_00"] == pytest.approx(10 / 40)
    assert scalars[f"{ACT}/dead_frac/layer_01"] == 0.0  # random init: every unit fires on some of 64 tokens
    assert scalars[f"{ACT}/dead_frac/mean"] == pytest.approx(10 / 80)
    if activation == "relu":  # relu′(x) = 0 exactly where relu(x) = 0
        assert scalars[f"{ACT}/saturated_frac/layer_01"] == scalars[f"{ACT}/zero_frac/layer_01"]
        assert 0.3 < scalars[f"{ACT}/zero_frac/layer_01"] < 0.7
    else:
        assert scalars[f"{ACT}/zero_frac/layer_01"] == 0.0
    # the hooks are gone and the model is back in training mode
    assert model.training
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_hidden_mean_std_are_of_the_gated_product() -> None:
    model = tiny_model(True, "silu")
    inputs = torch.randint(0, 50, (2, 16))
    seen = {}
    model.blocks[1].ffn.w_out.register_forward_pre_hook(lambda m, a: seen.setdefault("h", a[0].clone()))
    scalars, hists = ActivationStats(inputs).measure(model.eval())
    assert scalars[f"{ACT}/mean/layer_01"] == pytest.approx(seen["h"].mean().item(), rel=1e-5)
    assert scalars[f"{ACT}/std/layer_01"] == pytest.approx(seen["h"].std().item(), rel=1e-5)
    assert {f"{ACT}/hist/layer_01", f"{ACT}/gate_hist/layer_01"} <= set(hists)


def event_tags(run_dir: Path) -> tuple[dict[str, list[float]], list[str]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    scalars = {t: [e.value for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    return scalars, acc.Tags()["histograms"]


def test_run_logs_statistics_and_learned_beta(tmp_path: Path) -> None:
    # a high learning rate so β visibly moves in 30 tiny steps
    cfg = compose(tiny("ffn=learnable_gelu", "trainer.max_steps=30", "trainer.val_check_interval=30",
                       "instruments.every_n_steps=10", "optim.lr=0.01"))
    metrics = run(cfg, tmp_path)
    scalars, hists = event_tags(tmp_path)
    for layer in ("layer_00", "layer_01"):
        for key in ("dead_frac", "zero_frac", "saturated_frac", "mean", "std", "beta"):
            assert len(scalars[f"{ACT}/{key}/{layer}"]) == 4, key  # steps 0, 10, 20, 30
        assert f"{ACT}/hist/{layer}" in hists
    beta = scalars[f"{ACT}/beta/layer_00"]
    assert beta[0] == pytest.approx(1.702, abs=1e-6) and abs(beta[-1] - 1.702) > 1e-3  # β learned
    written = json.loads((tmp_path / "metrics.json").read_text())
    assert written["act_beta"] == metrics["act_beta"] and len(written["act_beta"]) == 2
    assert written["act_beta"][0] == pytest.approx(beta[-1], abs=1e-5)
    assert len(written["act_dead_frac"]) == 2 and 0.0 <= written["act_dead_frac_mean"] <= 1.0
    assert written["act_stats_step"] == 30


def test_statistics_can_be_turned_off(tmp_path: Path) -> None:
    metrics = run(compose(tiny("trainer.max_steps=5", "trainer.val_check_interval=5", "instruments.act_stats=false")),
                  tmp_path)
    assert "act_dead_frac" not in metrics
    assert not any(t.startswith((f"{ACT}/", "act/")) for t in event_tags(tmp_path)[0])


def test_act_tag_reads_new_and_legacy_runs() -> None:
    assert act_tag({f"{ACT}/dead_frac/mean", "val/loss"}, "dead_frac/mean") == f"{ACT}/dead_frac/mean"
    assert act_tag({"act/dead_frac/mean"}, "dead_frac/mean") == "act/dead_frac/mean"  # runs before the rename
    assert act_tag({"val/loss"}, "dead_frac/mean") is None
    assert sorted(["val", ACT, "train"]) == ["train", "val", ACT]  # TensorBoard and W&B order groups by name
