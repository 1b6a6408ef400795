"""ffn-zoo: which transformer feed-forward block is better, by how much, and at what cost.

Public API::

    from ffn_zoo import build_ffn, build_model, ACTIVATIONS, FFN_VARIANTS
    ffn = build_ffn("geglu", d_model=768, d_ff=3072)          # hidden 2048: parameter-matched to dense 3072
    net = build_model(model="bert_base", ffn="geglu", vocab_size=8192)  # (B, T) ids -> (B, T, vocab) logits
"""

from ffn_zoo.nn.activations import ACTIVATIONS, get_activation
from ffn_zoo.training.build import build_model
from ffn_zoo.nn.ffn import FFN_VARIANTS, DenseFFN, GatedFFN, build_ffn, gated_hidden_width
from ffn_zoo.nn.model import ModelConfig, TransformerLM

__all__ = [
    "ACTIVATIONS", "FFN_VARIANTS", "DenseFFN", "GatedFFN", "ModelConfig", "TransformerLM",
    "build_ffn", "build_model", "gated_hidden_width", "get_activation",
]
__version__ = "0.1.0"
