"""ffn-zoo: which transformer feed-forward block is better, by how much, and at what cost.

Public API::

    from ffn_zoo import build_ffn, build_model, ACTIVATIONS, FFN_VARIANTS
    ffn = build_ffn("geglu", d_model=768, d_ff=3072)          # hidden 2048: parameter-matched to dense 3072
    net = build_model(model="bert_base", ffn="geglu", vocab_size=8192)  # (B, T) ids -> (B, T, vocab) logits

``build_model`` composes the training configs (OmegaConf, Hydra), so it is imported on first use: importing
``ffn_zoo`` or ``ffn_zoo.nn`` loads torch and nothing of the training stack.
"""

from typing import Any

from ffn_zoo.nn.activations import ACTIVATIONS, get_activation
from ffn_zoo.nn.ffn import FFN_VARIANTS, DenseFFN, FFNSpec, GatedFFN, build_ffn, gated_hidden_width
from ffn_zoo.nn.model import ModelConfig, TransformerLM

__all__ = [
    "ACTIVATIONS", "FFN_VARIANTS", "DenseFFN", "FFNSpec", "GatedFFN", "ModelConfig", "TransformerLM",
    "build_ffn", "build_model", "gated_hidden_width", "get_activation",
]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:  # PEP 562: ``from ffn_zoo import build_model`` without an eager import
    if name == "build_model":
        from ffn_zoo.training.build import build_model

        return build_model
    raise AttributeError(f"module 'ffn_zoo' has no attribute {name!r}")
