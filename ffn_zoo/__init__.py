"""ffn-zoo: which transformer feed-forward block is better, by how much, and at what cost.

Public API::

    from ffn_zoo import FFNSpec, build_ffn, build_model, ACTIVATIONS, FFN_VARIANTS
    ffn = build_ffn(FFNSpec.variant("geglu", d_ff=3072), d_model=768)  # hidden 2048: parameter-matched to dense 3072
    net = build_model(model="bert_base", ffn="geglu", vocab_size=8192)  # (B, T) ids -> (B, T, vocab) logits

Every name is imported on first use: ``build_model`` composes the training configs (OmegaConf, Hydra), the rest
load torch and nothing of the training stack; ``import ffn_zoo`` alone loads neither.
"""

from importlib import import_module
from typing import Any

# each public name -> the module that defines it, imported on first use (PEP 562): ``import ffn_zoo.errors`` or
# ``ffn_zoo.analysis`` loads no torch, ``from ffn_zoo import build_ffn`` loads torch and no training stack
_PUBLIC = {
    **dict.fromkeys(["ACTIVATIONS", "get_activation"], "ffn_zoo.nn.activations"),
    **dict.fromkeys(["FFN_VARIANTS", "DenseFFN", "FFNSpec", "GatedFFN", "build_ffn", "hidden_width"],
                    "ffn_zoo.nn.ffn"),
    **dict.fromkeys(["ModelConfig", "TransformerLM"], "ffn_zoo.nn.model"),
    "build_model": "ffn_zoo.training.recipe.build",
}
__all__ = sorted(_PUBLIC)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'ffn_zoo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
