"""A BERT-base-shaped Transformer language model whose FFN comes from the zoo.

Token + learned position embeddings -> N blocks (attention, FFN; pre-LN by default,
post-LN as in the original BERT selectable) -> final norm -> head tied to the token
embedding. Causal by default (next-token prediction); ``causal=False`` gives the
bidirectional attention that masked language modelling needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn

from ffn_zoo.errors import ConfigError, UnknownNameError, require_positive
from ffn_zoo.nn.ffn import FFNSpec, build_ffn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    seq_len: int = 128  # size of the position table: the longest context the model accepts
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    norm: str = "pre"  # "pre" (GPT-2, T5) or "post" (original Transformer / BERT)
    dropout: float = 0.0
    bias: bool = False  # bias in attention projections and LayerNorms (FFN bias is the FFN's own setting)
    causal: bool = True
    init: str = "gpt2"  # a key of INITS: how the weights start
    init_std: float = 0.02  # init=gpt2's std
    residual_std: float | str = "gpt2"  # init=gpt2's σ for the residual-output matrices; "gpt2": init_std/√(2·layers)
    ffn: FFNSpec = field(default_factory=FFNSpec)  # the FFN: its two axes and its final hidden width

    def __post_init__(self) -> None:
        require_positive(
            **{"model.vocab_size": self.vocab_size, "model.seq_len": self.seq_len, "model.d_model": self.d_model,
               "model.n_layers": self.n_layers, "model.n_heads": self.n_heads, "ffn hidden width": self.ffn.hidden}
        )
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"model.d_model={self.d_model} is not divisible by model.n_heads={self.n_heads}; "
                f"pick n_heads from {[h for h in range(1, self.d_model + 1) if self.d_model % h == 0 and h <= 64]}"
            )
        if self.init not in INITS:
            raise UnknownNameError("model.init", self.init, INITS)
        if self.residual_std != "gpt2":
            if isinstance(self.residual_std, str) or not self.residual_std > 0:
                raise ConfigError(f"model.residual_std={self.residual_std!r}: give gpt2 (init_std/√(2·layers)) or a "
                                  f"positive σ, e.g. {self.init_std / math.sqrt(8):.3g} (the 4-layer value at "
                                  f"init_std {self.init_std})")
            if self.init != "gpt2":
                raise ConfigError(f"model.residual_std={self.residual_std} sets init=gpt2's residual-output σ; "
                                  f"model.init={self.init} has none (drop it, or use model.init=gpt2)")
        if self.norm not in ("pre", "post"):
            raise ConfigError(f"model.norm={self.norm!r}; valid: pre, post")
        for name, p in (("model.dropout", self.dropout), ("ffn.dropout", self.ffn.dropout)):
            if not 0.0 <= p < 1.0:
                raise ConfigError(f"{name}={p} must be in [0, 1)")


class SelfAttention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention`` (flash/fused kernels)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.causal, self.dropout = cfg.n_heads, cfg.causal, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)  # fused: one GEMM instead of three
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        q, k, v = rearrange(self.qkv(x), "b t (three h d) -> three b h t d", three=3, h=self.n_heads)  # (B, H, T, D) each
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=self.causal)  # (B, H, T, D)
        return self.out(rearrange(y, "b h t d -> b t (h d)"))  # (B, T, C)


class Block(nn.Module):
    """One Transformer layer: attention then FFN, each in a residual branch."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.norm1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.attn = SelfAttention(cfg)
        self.norm2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.ffn = build_ffn(cfg.ffn, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, T, C)
        if self.pre_norm:
            x = x + self.drop(self.attn(self.norm1(x)))
            return x + self.drop(self.ffn(self.norm2(x)))
        x = self.norm1(x + self.drop(self.attn(x)))
        return self.norm2(x + self.drop(self.ffn(x)))


class TransformerLM(nn.Module):
    """Token ids (B, T) -> logits (B, T, vocab)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.emb_norm = nn.LayerNorm(cfg.d_model, bias=cfg.bias) if cfg.norm == "post" else nn.Identity()
        self.drop = nn.Dropout(cfg.dropout) if cfg.dropout > 0 else nn.Identity()
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.final_norm = nn.LayerNorm(cfg.d_model, bias=cfg.bias) if cfg.norm == "pre" else nn.Identity()
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # tied: saves vocab·d parameters, standard since Press & Wolf 2017
        init = INITS[cfg.init]
        # T5 reads the tied head at d_model^-0.5: with N(0, 1) embeddings the logits then start at std ~1
        self.head_scale = cfg.d_model ** -0.5 if init.scaled_head else None
        init.apply(self)

    def forward(self, idx: torch.Tensor, select: torch.Tensor | None = None, head: bool = True) -> torch.Tensor:
        """Logits (B, T, V) of ids (B, T); with ``select`` (B, T) bool, only the selected positions' (N, V), as BERT's
        pre-training code projects only the masked positions (Devlin et al. 2018, run_pretraining.py's
        gather_indexes): under MLM 15% of the positions, so the output layer, the largest matmul at a small width,
        costs 15%. ``head=False``: what the output layer reads, (B, T, C) or (N, C), for a loss that applies
        ``self.head.weight`` itself (``losses.py``); through ``forward``, so a compiled model stays compiled."""
        T = idx.shape[1]
        if T > self.cfg.seq_len:
            raise ConfigError(f"input of length {T} is longer than the position table (model.seq_len={self.cfg.seq_len})")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.emb_norm(self.tok_emb(idx) + self.pos_emb(pos)))  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        x = self.final_norm(x)  # (B, T, C)
        if select is not None:
            x = x[select]  # (N, C)
        if self.head_scale is not None:
            x = x * self.head_scale  # init=fan_in: T5's tied-embedding softmax
        return self.head(x) if head else x  # (B, T, V) or (N, V); head=False: (B, T, C) or (N, C)

    def ffn_modules(self) -> list[nn.Module]:
        return [block.ffn for block in self.blocks]

    def num_params(self, ffn_only: bool = False) -> int:
        """Unique parameters (the tied head counted once); ``ffn_only`` counts the FFN blocks alone."""
        params = (p for f in self.ffn_modules() for p in f.parameters()) if ffn_only else self.parameters()
        return sum(p.numel() for p in {id(p): p for p in params}.values())


# ---- model.init: name -> how the weights start ------------------------------------------------------------------

def _zero_biases(model: nn.Module) -> None:
    for name, p in model.named_parameters():
        if name.endswith(".bias"):
            nn.init.zeros_(p)


def residual_std(cfg: ModelConfig) -> float:
    """The σ of the projections that write into the residual stream: GPT-2's init_std/√(2·layers), or
    ``model.residual_std`` where set (to move it apart from depth: the depth study's mechanism test)."""
    return cfg.init_std / math.sqrt(2 * cfg.n_layers) if cfg.residual_std == "gpt2" else float(cfg.residual_std)


def init_gpt2(model: TransformerLM) -> None:
    """Normal(0, init_std) for every matrix, embeddings included; the projections that write into the residual
    stream get init_std/√(2·layers) so the residual variance does not grow with depth (GPT-2)."""
    std = model.cfg.init_std
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue  # biases, norms and scalar activation parameters keep their own init
        scaled = name.endswith(("attn.out.weight", "ffn.w_out.weight"))
        nn.init.normal_(p, mean=0.0, std=residual_std(model.cfg) if scaled else std)
    _zero_biases(model)


def init_fan_in(model: TransformerLM) -> None:
    """Mesh-TensorFlow's variance scaling, as T5 and Shazeer 2020's GLU runs were initialised.

    Every projection W (out, in) draws with σ = 1/√in: no depth scaling, no correction for the gate × up product.
    As in mesh-tf, the FFN matrices (``mtf.layers.dense`` -> ``VarianceScalingInitializer``) come from TF1's
    ``truncated_normal_initializer``: N(0, σ²) redrawn outside ±2σ, without a variance correction, so their
    measured std is 0.880·σ; the attention matrices (``AttentionParams``) are plain N(0, σ²). T5 folds the
    1/√d_head of the attention logits into W_q (σ = 1/√(d·d_head)); our attention scales the logits itself
    (scaled_dot_product_attention), so W_q keeps σ = 1/√d, the same function at init. Embedding tables are
    N(0, 1) (mesh-tf ``embedding_weights``); T5 has no position table, ours gets the token table's N(0, 1). With
    the head tied, T5 multiplies the final hidden state by d_model^-0.5 before it (``head_scale``, INITS entry).
    """
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        if name in ("tok_emb.weight", "pos_emb.weight"):
            nn.init.normal_(p, mean=0.0, std=1.0)
            continue
        sigma = p.shape[1] ** -0.5  # nn.Linear weight is (out, in)
        if ".ffn." in name:
            nn.init.trunc_normal_(p, mean=0.0, std=sigma, a=-2 * sigma, b=2 * sigma)
        else:
            nn.init.normal_(p, mean=0.0, std=sigma)
    _zero_biases(model)


@dataclass(frozen=True)
class Init:
    """A named initialisation (``model.init``)."""

    apply: Callable[[TransformerLM], None]
    scaled_head: bool  # the tied head reads final_norm(x)·d_model^-0.5
    summary: str  # may name {init_std} and {residual_std}, filled in by describe()

    def describe(self, cfg: ModelConfig) -> str:
        """The summary with this model's numbers in it (the banner's ``init`` line)."""
        text = self.summary.format(init_std=cfg.init_std, residual_std=residual_std(cfg))
        return text if cfg.residual_std == "gpt2" else text.replace("(init_std/√(2·layers))", "(model.residual_std)")


INITS: dict[str, Init] = {
    "gpt2": Init(init_gpt2, False, "N(0, {init_std:.3g}), residual outputs N(0, {residual_std:.3g}) "
                 "(init_std/√(2·layers))  [Radford et al. 2019, GPT-2]"),
    "fan_in": Init(init_fan_in, True, "σ = 1/√fan_in for every projection (FFN truncated at ±2σ), embeddings "
                   "N(0, 1), head input ×d_model^-0.5  [mesh-tensorflow / T5, Raffel et al. 2020; Shazeer 2020]"),
}
