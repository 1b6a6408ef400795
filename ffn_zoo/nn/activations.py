"""Activation functions by name: one table, name -> module factory.

Every FFN variant is (form, activation); this file owns the second axis. An unknown
name raises an error that lists the valid ones (the HF ``activations.py`` convention).
Where two formulas share a name in the literature we pick one and say so:
``gelu`` is the *exact* erf form, ``gelu_tanh`` the tanh approximation.
"""

from __future__ import annotations

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


class ReLUSquared(nn.Module):
    """relu(x)²: squared ReLU (So et al. 2021, "Primer")."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(x).square()


# name -> factory returning a fresh module (fresh, because SwishBeta carries a parameter per layer)
ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU,                                   # Nair & Hinton 2010
    "gelu": nn.GELU,                                   # exact: x·Φ(x), Hendrycks & Gimpel 2016
    "gelu_tanh": lambda: nn.GELU(approximate="tanh"),  # 0.5x(1+tanh(√(2/π)(x+0.044715x³)))
    "quick_gelu": QuickGELU,                           # x·σ(1.702x)
    "silu": nn.SiLU,                                   # Swish with β=1 (Elfwing et al. 2017; Ramachandran et al. 2017)
    "swish": nn.SiLU,                                  # alias of silu, the name Shazeer 2020 uses
    "swish_beta": SwishBeta,                           # x·σ(βx), β learnable, init 1.0
    "learnable_gelu": lambda: SwishBeta(beta_init=1.702),  # x·σ(βx), β learnable, init at the GELU fit
    "mish": nn.Mish,                                   # x·tanh(softplus(x)), Misra 2019
    "relu2": ReLUSquared,                              # relu(x)², So et al. 2021
    "sigmoid": nn.Sigmoid,                             # the gate of the original GLU, Dauphin et al. 2017
    "identity": nn.Identity,                           # no non-linearity: the gate of the Bilinear variant
}


def get_activation(name: str) -> nn.Module:
    """Return a new activation module for ``name``; an unknown name lists the valid ones."""
    if name not in ACTIVATIONS:
        raise UnknownNameError("activation", name, ACTIVATIONS)
    return ACTIVATIONS[name]()
