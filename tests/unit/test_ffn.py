"""Every FFN variant from its yaml: shape, formula, gradients, widths and parameter counts."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from ffn_zoo import FFNSpec, build_ffn
from ffn_zoo.training.recipe.build import CONFIG_DIR, compose
from ffn_zoo.errors import ConfigError, UnknownNameError
from ffn_zoo.nn.activations import ACTIVATIONS
from ffn_zoo.nn.ffn import FFN_VARIANTS, DenseFFN, GatedFFN, check_variant_spec, hidden_width

YAMLS = sorted((CONFIG_DIR / "ffn").glob("*.yaml"))


def reference(name: str):
    """The activation's formula written out, from its table entry; a missing one says what to add."""
    ref = ACTIVATIONS[name].reference
    if ref is None:
        pytest.fail(f"ACTIVATIONS[{name!r}] has no reference: add reference=lambda x: <its formula in torch ops> "
                    f"to its entry in ffn_zoo/nn/activations.py")
    return ref

def test_one_yaml_per_variant() -> None:
    """Each FFN_VARIANTS row has its configs/ffn yaml and each yaml a row (check_variant_spec: the same pair)."""
    missing = sorted(set(FFN_VARIANTS) - {p.stem for p in YAMLS})
    assert not missing, f"add configs/ffn/<name>.yaml (name, gated, activation as in FFN_VARIANTS) for {missing}"
    orphans = sorted({p.stem for p in YAMLS} - set(FFN_VARIANTS))
    assert not orphans, f"configs/ffn/{orphans[0]}.yaml has no FFN_VARIANTS row in ffn_zoo/nn/ffn.py"


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.stem)
def test_a_variant_yaml_is_its_name_form_and_activation(path: Path) -> None:
    """What every variant shares lives once, in train.yaml's ``ffn:``; a variant's yaml names only its own pair."""
    assert set(OmegaConf.load(path)) == {"name", "gated", "activation"}, (
        f"{path.name}: give only name, gated and activation; shared FFN settings go in configs/train.yaml ffn:")


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.stem)
def test_variant_from_yaml(path: Path) -> None:
    cfg = compose([f"ffn={path.stem}"]).ffn  # the yaml merged over the shared settings, as train.py sees it
    check_variant_spec(cfg.name, cfg.gated, cfg.activation)  # the yaml says what the name means
    d_model, d_ff = 32, 96
    hidden = hidden_width(d_ff, gated=cfg.gated, match_params=cfg.match_params, multiple_of=cfg.multiple_of)
    ffn = build_ffn(FFNSpec(cfg.gated, cfg.activation, hidden, bias=True), d_model).double()
    x = torch.randn(3, 5, d_model, dtype=torch.float64)
    y = ffn(x)
    assert y.shape == x.shape

    # recompute the formula from the module's own weights, with the activation written out
    act = reference(cfg.activation)
    if cfg.gated:
        assert isinstance(ffn, GatedFFN) and ffn.hidden == 64  # 2/3 of 96
        h = act(F.linear(x, ffn.w_gate.weight, ffn.w_gate.bias)) * F.linear(x, ffn.w_up.weight, ffn.w_up.bias)
    else:
        assert isinstance(ffn, DenseFFN) and ffn.hidden == d_ff
        h = act(F.linear(x, ffn.w_in.weight, ffn.w_in.bias))
    torch.testing.assert_close(y, F.linear(h, ffn.w_out.weight, ffn.w_out.bias))

    y.pow(2).sum().backward()
    for name, p in ffn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"no gradient reaches {name}"


def test_gate_and_value_are_not_swapped() -> None:
    """ReLU applies to W_gate·x and W_up·x stays linear: with a gate pre-activation of +1 and a value of -2
    the output is relu(1)·(-2) = -2 per unit; the activation on the value instead would give relu(-2)·1 = 0."""
    ffn = build_ffn(FFNSpec(True, "relu", 4), d_model=4)
    with torch.no_grad():
        ffn.w_gate.weight.copy_(torch.eye(4))
        ffn.w_up.weight.copy_(-2 * torch.eye(4))
        ffn.w_out.weight.copy_(torch.eye(4))
    assert ffn(torch.ones(1, 4)).tolist() == [[-2.0, -2.0, -2.0, -2.0]]


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "glu", "bilinear", "reglu", "geglu", "swiglu"])
def test_bert_base_ffn_weights_are_matched(name: str) -> None:
    ffn = build_ffn(FFNSpec.variant(name, d_ff=3072), d_model=768)
    assert sum(p.numel() for p in ffn.parameters()) == 4_718_592
    assert ffn.hidden == (2048 if FFN_VARIANTS[name].gated else 3072)


def test_match_params_false_keeps_full_width() -> None:
    ffn = build_ffn(FFNSpec.variant("geglu", d_ff=3072, match_params=False), d_model=768)
    assert ffn.hidden == 3072
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 768 * 3072


def test_bias_on_by_setting() -> None:
    ffn = build_ffn(FFNSpec.variant("swiglu", 3072, bias=True), 768)
    assert sum(p.numel() for p in ffn.parameters()) == 4_718_592 + 2 * 2048 + 768


@pytest.mark.parametrize("d_ff, multiple_of, expected", [(3072, 8, 2048), (1024, 8, 680), (256, 8, 168),
                                                         (1024, 64, 704), (4096, 8, 2728)])
def test_hidden_width(d_ff: int, multiple_of: int, expected: int) -> None:
    """The one place the 2/3 rule lives: gated and parameter-matched shrink, everything else keeps d_ff."""
    assert hidden_width(d_ff, gated=True, multiple_of=multiple_of) == expected
    assert hidden_width(d_ff, gated=True, match_params=False, multiple_of=multiple_of) == d_ff
    assert hidden_width(d_ff, gated=False, multiple_of=multiple_of) == d_ff


def test_an_unknown_activation_is_refused_by_the_constructor() -> None:
    with pytest.raises(UnknownNameError, match="activation 'elo'"):
        build_ffn(FFNSpec(True, "elo", 8), d_model=4)


def test_swiglu_cannot_silently_mean_silu() -> None:
    check_variant_spec("swiglu", True, "silu")
    with pytest.raises(ConfigError, match="swiglu"):
        check_variant_spec("swiglu", False, "silu")
    check_variant_spec("my_mish_glu", True, "mish")  # a custom pair under its own name is fine


def test_a_typo_in_a_variant_activation_is_an_unknown_activation() -> None:
    """``activation: elo`` in configs/ffn/gelu.yaml is a typo, not a custom pair: say so, and list what is valid."""
    with pytest.raises(UnknownNameError) as e:
        check_variant_spec("gelu", False, "elo")
    assert str(e.value) == f"unknown ffn.activation 'elo'; valid: {', '.join(sorted(ACTIVATIONS))}"


def test_unknown_variant_lists_valid() -> None:
    with pytest.raises(UnknownNameError, match="geglu.*swiglu|swiglu"):
        FFNSpec.variant("swishglu", 3072)
