"""FLOP accounting (matmul FLOPs, the convention of Kaplan et al. 2020 and PaLM's MFU) and a GEMM peak probe."""

from __future__ import annotations

import time

import torch

from ffn_zoo.nn.model import ModelConfig, TransformerLM


def ffn_weights(d_model: int, hidden: int, gated: bool) -> int:
    """Weight count of one FFN (no biases): dense 2·d·h, gated 3·d·h (W_gate, W_up, W_out)."""
    return (3 if gated else 2) * d_model * hidden


def ffn_flops_per_token(d_model: int, hidden: int, gated: bool) -> int:
    """Forward matmul FLOPs of one FFN for one token: 2 per weight (multiply + add).

    Gated FFNs have three matrices, so at the same hidden width they cost 1.5x a dense one;
    at the parameter-matched width (2/3) they cost the same.
    """
    return 2 * ffn_weights(d_model, hidden, gated)


def training_flops_per_token(model: TransformerLM, seq_len: int | None = None) -> int:
    """Forward+backward FLOPs per token: 6·N + 12·L·d·T, N excluding position embeddings (attention
    scores and values add 12·L·d·T). The tied head's matmul is counted through the token embedding."""
    cfg: ModelConfig = model.cfg
    T = seq_len or cfg.seq_len
    n = model.num_params() - model.pos_emb.weight.numel()
    return 6 * n + 12 * cfg.n_layers * cfg.d_model * T


def gemm_peak_flops(seconds: float = 0.5, n: int = 1024, dtype: torch.dtype = torch.float32,
                    device: str = "cpu") -> float:
    """Sustained FLOP/s of an n×n×n matmul on this machine, now: the denominator of MFU."""
    a = torch.randn(n, n, dtype=dtype, device=device)
    b = torch.randn(n, n, dtype=dtype, device=device)
    for _ in range(2):
        a @ b  # warm up
    reps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        reps += 1
    if device != "cpu":
        torch.cuda.synchronize()
    return 2 * n**3 * reps / (time.perf_counter() - start)
