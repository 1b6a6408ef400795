"""The activation table: exact values, derivatives, approximation error bounds, and the unknown-name error."""

import pytest
import torch

from ffn_zoo.nn.activations import ACTIVATIONS, SwishBeta, get_activation
from ffn_zoo.errors import UnknownNameError

GRID = torch.linspace(-6, 6, 100_001, dtype=torch.float64)


def test_gelu_is_exact_erf_form() -> None:
    gelu = get_activation("gelu")
    x = torch.tensor([2.0, -1.0], dtype=torch.float64)
    y = gelu(x)
    assert y[0].item() == pytest.approx(1.9544997, abs=1e-6)
    assert y[1].item() == pytest.approx(-0.1586553, abs=1e-6)


def test_gelu_derivative_at_zero_is_half() -> None:
    x = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    get_activation("gelu")(x).sum().backward()
    assert x.grad.item() == pytest.approx(0.5, abs=1e-12)


def test_relu_derivative_at_zero_is_zero() -> None:
    x = torch.zeros(1, requires_grad=True)
    get_activation("relu")(x).sum().backward()
    assert x.grad.item() == 0.0


@pytest.mark.parametrize("approx, bound", [("gelu_tanh", 4.8e-4), ("quick_gelu", 2.1e-2)])
def test_gelu_approximation_error(approx: str, bound: float) -> None:
    err = (get_activation("gelu")(GRID) - get_activation(approx)(GRID)).abs().max().item()
    assert err <= bound
    assert err > bound / 20  # it *is* an approximation: distinct from the exact form


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_module_matches_its_reference_formula(name: str) -> None:
    """Every table entry against the formula written out on it (learnable ones at their init)."""
    ref = ACTIVATIONS[name].reference
    assert ref is not None, (f"ACTIVATIONS[{name!r}] has no reference: add reference=lambda x: <its formula in "
                             f"torch ops> to its entry in ffn_zoo/nn/activations.py")
    x = torch.linspace(-8, 8, 1601, dtype=torch.float64)
    torch.testing.assert_close(get_activation(name).double()(x), ref(x))


def test_swish_is_silu() -> None:
    x = torch.randn(1000)
    assert torch.equal(get_activation("swish")(x), get_activation("silu")(x))


def test_learnable_beta_is_a_parameter_per_instance() -> None:
    a, b = get_activation("swish_beta"), get_activation("swish_beta")
    assert isinstance(a, SwishBeta) and a.beta is not b.beta
    assert get_activation("learnable_gelu").beta.item() == pytest.approx(1.702)
    x = torch.randn(64)
    a(x).pow(2).sum().backward()
    assert a.beta.grad is not None and a.beta.grad.abs().item() > 0


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(UnknownNameError) as e:
        get_activation("gelu_exact")
    msg = str(e.value)
    assert "gelu_exact" in msg
    for name in ACTIVATIONS:
        assert name in msg
