"""Every FFN variant from its yaml: shape, formula, gradients, widths and parameter counts."""

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from ffn_zoo import build_ffn
from ffn_zoo.training.build import CONFIG_DIR, ffn_hidden
from ffn_zoo.errors import ConfigError, UnknownNameError
from ffn_zoo.nn.ffn import FFN_VARIANTS, DenseFFN, GatedFFN, check_variant_spec, gated_hidden_width, make_ffn

YAMLS = sorted((CONFIG_DIR / "ffn").glob("*.yaml"))

# an independent statement of each activation, written out (not taken from the table under test)
FORMULAS = {
    "relu": lambda x: x.clamp_min(0),
    "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / 2**0.5)),
    "gelu_tanh": lambda x: 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3))),
    "quick_gelu": lambda x: x / (1 + torch.exp(-1.702 * x)),
    "silu": lambda x: x / (1 + torch.exp(-x)),
    "swish_beta": lambda x: x / (1 + torch.exp(-x)),  # β initialised at 1
    "learnable_gelu": lambda x: x / (1 + torch.exp(-1.702 * x)),
    "mish": lambda x: x * torch.tanh(torch.log1p(torch.exp(x))),
    "relu2": lambda x: x.clamp_min(0) ** 2,
    "sigmoid": lambda x: 1 / (1 + torch.exp(-x)),
    "identity": lambda x: x,
}


def test_one_yaml_per_variant() -> None:
    assert {p.stem for p in YAMLS} == set(FFN_VARIANTS)


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.stem)
def test_variant_from_yaml(path: Path) -> None:
    cfg = OmegaConf.load(path)
    check_variant_spec(cfg.name, cfg.gated, cfg.activation)  # the yaml says what the name means
    d_model, d_ff = 32, 96
    ffn = make_ffn(cfg.gated, cfg.activation, d_model, ffn_hidden(cfg, d_ff), bias=True).double()
    x = torch.randn(3, 5, d_model, dtype=torch.float64)
    y = ffn(x)
    assert y.shape == x.shape

    # recompute the formula from the module's own weights
    act = FORMULAS[cfg.activation]
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
    """act() applies to W_gate·x; W_up·x stays linear: zeroing W_gate with ReLU kills the output."""
    ffn = make_ffn(True, "relu", 8, 16)
    x = torch.randn(4, 8)
    with torch.no_grad():
        ffn.w_up.weight.fill_(-1.0)  # a linear branch passes negatives through
        ffn.w_gate.weight.copy_(torch.randn_like(ffn.w_gate.weight))
    h = torch.relu(ffn.w_gate(x)) * ffn.w_up(x)
    torch.testing.assert_close(ffn(x), ffn.w_out(h))
    assert (ffn.w_up(x) < 0).any()  # so had the activation hit W_up, the result would differ


@pytest.mark.parametrize("name", ["relu", "gelu", "silu", "glu", "bilinear", "reglu", "geglu", "swiglu"])
def test_bert_base_ffn_weights_are_matched(name: str) -> None:
    ffn = build_ffn(name, d_model=768, d_ff=3072)
    assert sum(p.numel() for p in ffn.parameters()) == 4_718_592
    assert ffn.hidden == (2048 if FFN_VARIANTS[name].gated else 3072)


def test_match_params_false_keeps_full_width() -> None:
    ffn = build_ffn("geglu", d_model=768, d_ff=3072, match_params=False)
    assert ffn.hidden == 3072
    assert sum(p.numel() for p in ffn.parameters()) == 3 * 768 * 3072


def test_bias_on_by_setting() -> None:
    ffn = build_ffn("swiglu", 768, 3072, bias=True)
    assert sum(p.numel() for p in ffn.parameters()) == 4_718_592 + 2 * 2048 + 768


@pytest.mark.parametrize("d_ff, multiple_of, expected", [(3072, 8, 2048), (1024, 8, 680), (256, 8, 168),
                                                         (1024, 64, 704), (4096, 8, 2728)])
def test_gated_hidden_width(d_ff: int, multiple_of: int, expected: int) -> None:
    assert gated_hidden_width(d_ff, multiple_of) == expected


def test_swiglu_cannot_silently_mean_silu() -> None:
    check_variant_spec("swiglu", True, "silu")
    with pytest.raises(ConfigError, match="swiglu"):
        check_variant_spec("swiglu", False, "silu")
    check_variant_spec("my_mish_glu", True, "mish")  # a custom pair under its own name is fine


def test_unknown_variant_lists_valid() -> None:
    with pytest.raises(UnknownNameError, match="geglu.*swiglu|swiglu"):
        build_ffn("swishglu", 768, 3072)
