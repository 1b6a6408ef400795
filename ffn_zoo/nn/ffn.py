"""The FFN zoo: two forms (dense, gated) × the activation table.

    dense:  FFN(x) = W_out · act(W_in · x)
    gated:  FFN(x) = W_out · (act(W_gate · x) ⊙ (W_up · x))     Shazeer 2020, §2

The activation is applied to the *gate* branch; the *up* (value) branch stays linear.
One helper computes the width, one constructor builds the block: :func:`hidden_width` is the single
place that turns a dense width into the parameter-matched gated one (the 2/3 rule); :func:`build_ffn`
builds an :class:`FFNSpec` (a variant at its final width; :meth:`FFNSpec.variant` for a named one).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ffn_zoo.nn.activations import ACTIVATIONS, get_activation
from ffn_zoo.errors import ConfigError, UnknownNameError, require_positive


@dataclass(frozen=True)
class FFNSpec:
    """One FFN block as the model builds it: its two axes and its final hidden width."""

    gated: bool = False
    activation: str = "gelu"
    hidden: int = 3072
    bias: bool = False
    dropout: float = 0.0

    @classmethod
    def variant(cls, name: str, d_ff: int, *, match_params: bool = True, multiple_of: int = 8, bias: bool = False,
                dropout: float = 0.0) -> FFNSpec:
        """The table's variant ``name`` in a model whose *dense* FFN width is ``d_ff`` (see :func:`hidden_width`)."""
        v = get_variant(name)
        hidden = hidden_width(d_ff, gated=v.gated, match_params=match_params, multiple_of=multiple_of)
        return cls(v.gated, v.activation, hidden, bias=bias, dropout=dropout)


@dataclass(frozen=True)
class FFNVariant:
    """A named point in the (form, activation) grid."""

    gated: bool
    activation: str
    paper: str

    @property
    def form(self) -> str:
        return "gated" if self.gated else "dense"

    def formula(self) -> str:
        if self.gated:
            return f"W_out·({self.activation}(W_gate·x) ⊙ W_up·x)"
        return f"W_out·{self.activation}(W_in·x)"


FFN_VARIANTS: dict[str, FFNVariant] = {
    # dense
    "relu": FFNVariant(False, "relu", "Vaswani et al. 2017, 'Attention Is All You Need'"),
    "gelu": FFNVariant(False, "gelu", "Hendrycks & Gimpel 2016, 'Gaussian Error Linear Units'; BERT, GPT-2"),
    "gelu_tanh": FFNVariant(False, "gelu_tanh", "GELU tanh approximation as in GPT-2 / original BERT code"),
    "quick_gelu": FFNVariant(False, "quick_gelu", "GELU sigmoid approximation x·σ(1.702x), CLIP"),
    "silu": FFNVariant(False, "silu", "Ramachandran et al. 2017, 'Searching for Activation Functions' (Swish)"),
    "swish_beta": FFNVariant(False, "swish_beta", "Ramachandran et al. 2017, Swish with learnable β"),
    "learnable_gelu": FFNVariant(False, "learnable_gelu", "x·σ(βx), β learnable, init 1.702 (GELU fit)"),
    "mish": FFNVariant(False, "mish", "Misra 2019, 'Mish: A Self Regularized Non-Monotonic Activation'"),
    "relu2": FFNVariant(False, "relu2", "So et al. 2021, 'Primer: Searching for Efficient Transformers'"),
    "squared_silu": FFNVariant(False, "squared_silu", "silu(x)²: Primer's squaring (So et al. 2021) on SiLU"),
    # gated — Shazeer 2020, 'GLU Variants Improve Transformer'
    "glu": FFNVariant(True, "sigmoid", "Dauphin et al. 2017, 'Language Modeling with Gated Convolutional Networks'"),
    "bilinear": FFNVariant(True, "identity", "Mnih & Hinton 2007; Shazeer 2020, §2"),
    "reglu": FFNVariant(True, "relu", "Shazeer 2020, 'GLU Variants Improve Transformer', §2"),
    "geglu": FFNVariant(True, "gelu", "Shazeer 2020, 'GLU Variants Improve Transformer', §2"),
    "swiglu": FFNVariant(True, "silu", "Shazeer 2020, 'GLU Variants Improve Transformer', §2; PaLM, LLaMA"),
    "geglu_tanh": FFNVariant(True, "gelu_tanh", "GEGLU with the tanh GELU approximation (as in T5's gated-gelu)"),
    "mish_glu": FFNVariant(True, "mish", "Mish (Misra 2019) as the gate of a GLU (Shazeer 2020, §2)"),
}


def hidden_width(d_ff: int, *, gated: bool, match_params: bool = True, multiple_of: int = 8) -> int:
    """The hidden width of an FFN in a model whose *dense* width is ``d_ff``.

    Dense: ``d_ff``. Gated with ``match_params``: the width that holds a dense FFN's weights. A dense FFN has
    2·d·d_ff weights, a gated one 3·d·h, so h = 2/3·d_ff, rounded to the nearest multiple of ``multiple_of``
    (hardware-friendly); at BERT-base, 3072 -> 2048 exactly. Gated without it: ``d_ff`` (1.5× the weights).
    """
    require_positive(d_ff=d_ff, multiple_of=multiple_of)
    if gated and match_params:
        return max(multiple_of, multiple_of * round(2 * d_ff / 3 / multiple_of))
    return d_ff


class DenseFFN(nn.Module):
    """FFN(x) = W_out · act(W_in · x)."""

    def __init__(self, d_model: int, hidden: int, activation: str, *, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        require_positive(d_model=d_model, hidden=hidden)
        self.hidden, self.activation = hidden, activation  # the name: its table entry says how to read the unit
        self.w_in = nn.Linear(d_model, hidden, bias=bias)
        self.act = get_activation(activation)
        self.w_out = nn.Linear(hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d_model)
        h = self.act(self.w_in(x))  # (..., hidden)
        return self.w_out(self.dropout(h))  # (..., d_model)


class GatedFFN(nn.Module):
    """FFN(x) = W_out · (act(W_gate · x) ⊙ (W_up · x)): activation on the gate, value branch linear.

    W_gate and W_up are kept as two separate Linear layers (not one fused 2·hidden matrix)
    so which half is gated can never be swapped by a chunk order.
    """

    def __init__(self, d_model: int, hidden: int, activation: str, *, bias: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        require_positive(d_model=d_model, hidden=hidden)
        self.hidden, self.activation = hidden, activation  # the name: its table entry says how to read the unit
        self.w_gate = nn.Linear(d_model, hidden, bias=bias)
        self.w_up = nn.Linear(d_model, hidden, bias=bias)
        self.act = get_activation(activation)
        self.w_out = nn.Linear(hidden, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., d_model)
        h = self.act(self.w_gate(x)) * self.w_up(x)  # (..., hidden)
        return self.w_out(self.dropout(h))  # (..., d_model)


def get_variant(name: str) -> FFNVariant:
    if name not in FFN_VARIANTS:
        raise UnknownNameError("ffn variant", name, FFN_VARIANTS)
    return FFN_VARIANTS[name]


def build_ffn(spec: FFNSpec, d_model: int) -> DenseFFN | GatedFFN:
    """The FFN block ``spec`` describes, for a model of width ``d_model``.

        build_ffn(FFNSpec.variant("geglu", d_ff=3072), d_model=768)   # hidden 2048: parameter-matched to dense 3072
    """
    if spec.activation not in ACTIVATIONS:
        raise UnknownNameError("activation", spec.activation, ACTIVATIONS)
    cls = GatedFFN if spec.gated else DenseFFN
    return cls(d_model, spec.hidden, spec.activation, bias=spec.bias, dropout=spec.dropout)


def check_variant_spec(name: str, gated: bool, activation: str) -> None:
    """Refuse an unknown activation, and a config whose (gated, activation) contradicts a known variant's name.

    The second is what keeps ``swiglu`` from silently meaning plain SiLU: a custom pair must get its own name.
    The first comes first: a typo (``activation: elo``) is not a custom pair and must not be advised to be one.
    """
    if activation not in ACTIVATIONS:
        raise UnknownNameError("ffn.activation", activation, ACTIVATIONS)
    if name in FFN_VARIANTS:
        v = FFN_VARIANTS[name]
        if (v.gated, v.activation) != (bool(gated), activation):
            raise ConfigError(
                f"ffn.name={name} means gated={v.gated}, activation={v.activation}, but the config says "
                f"gated={gated}, activation={activation}; give a custom pair its own name, e.g. ffn.name=my_{activation}"
            )
