"""Activation functions by name: one table, name -> :class:`Activation` (its module and what is known about it).

Every FFN variant is (form, activation); this file owns the second axis. Adding an activation is one
entry here: its factory, paper, dead-unit rule (``dead_two_sided`` is what the instruments read) and a
reference formula (what the tests check the module against, iterating this table). An unknown name raises an error that lists the valid ones (the HF ``activations.py`` convention).
Where two formulas share a name in the literature we pick one and say so:
``gelu`` is the *exact* erf form, ``gelu_tanh`` the tanh approximation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ffn_zoo.errors import UnknownNameError


class QuickGELU(nn.Module):
    """x·σ(1.702x): the sigmoid approximation of GELU (Hendrycks & Gimpel 2016, §2; used by CLIP)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class SwishBeta(nn.Module):
    """x·σ(βx) with a learnable scalar β (Ramachandran et al. 2017, "Searching for Activation Functions").

    β = 1 is SiLU; β = 1.702 is the sigmoid approximation of GELU ("learnable GELU").
    """

    def __init__(self, beta_init: float = 1.0) -> None:
        super().__init__()
        self.beta = nn.Parameter(torch.tensor(float(beta_init)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.beta * x)

    def extra_repr(self) -> str:
        return f"beta={self.beta.item():.4g}"


class SquaredSiLU(nn.Module):
    """silu(x)²: Primer's squaring (So et al. 2021) applied to SiLU instead of ReLU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x).square()


class ReLUSquared(nn.Module):
    """relu(x)²: squared ReLU (So et al. 2021, "Primer")."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x).square()


@dataclass(frozen=True)
class Activation:
    """One table entry: how to build the activation, and what the rest of the code needs to know about it."""

    make: Callable[[], nn.Module]  # a fresh module (fresh, because SwishBeta carries a parameter per layer)
    paper: str
    dead: str  # when a unit counts as dead on a batch: its output is <= ε for every token (instruments.py)
    reference: Callable[[torch.Tensor], torch.Tensor] | None = None  # the formula written out, for the tests
    dead_two_sided: bool = False  # no off-region (identity): only |act| <= ε counts as dead


ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(
        nn.ReLU, "Nair & Hinton 2010",
        "relu(x) ≤ ε: x ≤ 0 everywhere, gradient exactly 0 (the classic dying ReLU)",
        reference=lambda x: x.clamp_min(0)),
    "gelu": Activation(  # exact: x·Φ(x)
        nn.GELU, "Hendrycks & Gimpel 2016, 'Gaussian Error Linear Units'",
        "gelu(x) ≤ ε: x ≲ 0 everywhere; the unit only ever outputs its small negative lobe (≥ -0.17)",
        reference=lambda x: 0.5 * x * (1 + torch.erf(x / 2**0.5))),
    "gelu_tanh": Activation(
        lambda: nn.GELU(approximate="tanh"), "Hendrycks & Gimpel 2016, tanh approximation (GPT-2, BERT code)",
        "as gelu",
        reference=lambda x: 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))),
    "quick_gelu": Activation(
        QuickGELU, "Hendrycks & Gimpel 2016, sigmoid approximation (CLIP)",
        "as gelu (negative lobe ≥ -0.28)",
        reference=lambda x: x / (1 + torch.exp(-1.702 * x))),
    "silu": Activation(
        nn.SiLU, "Elfwing et al. 2017; Ramachandran et al. 2017 (Swish, β = 1)",
        "silu(x) ≤ ε: x ≲ 0 everywhere (negative lobe ≥ -0.28)",
        reference=lambda x: x / (1 + torch.exp(-x))),
    "swish": Activation(  # alias of silu, the name Shazeer 2020 uses
        nn.SiLU, "Ramachandran et al. 2017", "as silu",
        reference=lambda x: x / (1 + torch.exp(-x))),
    "swish_beta": Activation(
        SwishBeta, "Ramachandran et al. 2017, Swish with learnable β (init 1.0)",
        "x·σ(βx) ≤ ε: x ≲ 0 everywhere (for β > 0)",
        reference=lambda x: x / (1 + torch.exp(-x))),  # at its init, β = 1
    "learnable_gelu": Activation(
        lambda: SwishBeta(beta_init=1.702), "x·σ(βx), β learnable, init at the GELU fit 1.702",
        "as swish_beta",
        reference=lambda x: x / (1 + torch.exp(-1.702 * x))),  # at its init
    "mish": Activation(
        nn.Mish, "Misra 2019, 'Mish: A Self Regularized Non-Monotonic Activation'",
        "mish(x) ≤ ε: x ≲ 0 everywhere (negative lobe ≥ -0.31)",
        reference=lambda x: x * torch.tanh(torch.log1p(torch.exp(x)))),
    "relu2": Activation(
        ReLUSquared, "So et al. 2021, 'Primer: Searching for Efficient Transformers'",
        "relu(x)² ≤ ε: x ≤ √ε everywhere, gradient ≈ 0",
        reference=lambda x: x.clamp_min(0) ** 2),
    "squared_silu": Activation(
        SquaredSiLU, "So et al. 2021 (Primer's squaring), applied to SiLU",
        "silu(x)² ≤ ε: x ≤ -9.1 or |x| ≤ 0.002 everywhere at ε = 1e-6 (the negative lobe squares to ≤ 0.08)",
        reference=lambda x: (x / (1 + torch.exp(-x))) ** 2),
    "sigmoid": Activation(
        nn.Sigmoid, "the gate of the original GLU, Dauphin et al. 2017",
        "σ(x) ≤ ε: a gate closed for every token (x ≤ ln ε ≈ -13.8 at ε = 1e-6)",
        reference=lambda x: 1 / (1 + torch.exp(-x))),
    "identity": Activation(
        nn.Identity, "no non-linearity: the gate of the Bilinear variant",
        "|x| ≤ ε: a bilinear gate has no off-region; only an all-zero gate counts",
        reference=lambda x: x, dead_two_sided=True),
}


def get_activation(name: str) -> nn.Module:
    """Return a new activation module for ``name``; an unknown name lists the valid ones."""
    if name not in ACTIVATIONS:
        raise UnknownNameError("activation", name, ACTIVATIONS)
    return ACTIVATIONS[name].make()
