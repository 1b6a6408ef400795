"""The output layer and its cross-entropy in one pass over row chunks, never holding the (rows, vocab) logits.

At a small width the output layer is the largest matmul and its softmax the largest elementwise work: at ``mini``
(4,096 rows × 8,192 ids) the plain path writes the logits, their log-softmax, a zero-filled gradient of the same
size and its scatter, each 128 MB. Here each chunk of rows computes its logits, their log-sum-exp (in place, no
second buffer), its share of the loss and, since the loss is a scalar, its gradients at once (softmax − one-hot,
then the two gradient matmuls), as Liger-Kernel's fused linear cross-entropy does (Hsu et al. 2024). The same three matmuls run; the values equal the
plain path's up to rounding (``tests/unit/test_losses.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK_ROWS = 512  # rows per chunk: 512 × 8,192 fp32 logits = 16 MB, the fastest of 128–4,096 measured at mini


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, *, ignore_index: int = -100,
                         reduction: str = "mean", chunk_rows: int = CHUNK_ROWS) -> torch.Tensor:
    """``F.cross_entropy(x @ weight.T, targets, ignore_index=..., reduction=...)`` for x (N, C), weight (V, C),
    targets (N,), without the (N, V) logits. ``mean`` divides by the rows whose target is not ``ignore_index``."""
    if reduction not in ("mean", "sum"):
        raise ValueError(f"reduction={reduction!r}: mean or sum")
    if torch.is_autocast_enabled(x.device.type):  # mixed precision: the plain path, whose casts autocast decides
        return F.cross_entropy((x @ weight.T).float(), targets, ignore_index=ignore_index, reduction=reduction)
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        return _LinearCrossEntropy.apply(x, weight, targets, ignore_index, reduction, chunk_rows)
    total, _, _ = _chunks(x, weight, targets, ignore_index, chunk_rows, grads=False)  # validation: the loss only
    return total / _count(targets, ignore_index) if reduction == "mean" else total


def _count(targets: torch.Tensor, ignore_index: int) -> torch.Tensor:
    return (targets != ignore_index).sum().clamp_min(1)


def _chunks(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, ignore_index: int, chunk_rows: int,
            grads: bool) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The summed loss and, with ``grads``, its gradients with respect to x (N, C) and weight (V, C)."""
    total = torch.zeros((), dtype=torch.float32, device=x.device)
    grad_x = torch.empty_like(x) if grads else None
    grad_w = torch.zeros_like(weight) if grads else None
    # one logits buffer for every chunk: a fresh 16 MB block per chunk costs its page faults again each time
    buffer = torch.empty(min(chunk_rows, x.shape[0]), weight.shape[0], dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[0], chunk_rows):
        xc, tc = x[start:start + chunk_rows], targets[start:start + chunk_rows]  # (n, C), (n,)
        keep = tc != ignore_index  # (n,)
        safe = tc.masked_fill(~keep, 0)  # ignored rows point anywhere; their terms are zeroed below
        logits = torch.mm(xc, weight.T, out=buffer[:len(tc)]).float()  # (n, V)
        top = logits.amax(dim=-1, keepdim=True)  # (n, 1)
        target = logits.gather(1, safe[:, None])  # (n, 1)
        p = logits.sub_(top).exp_()  # (n, V) exp(logit - max), in the logits' memory: no (n, V) allocation
        norm = p.sum(dim=-1, keepdim=True)  # (n, 1)
        total += ((top + norm.log() - target).squeeze(1) * keep).sum()  # log-sum-exp − the target's logit
        if grads:
            p.div_(norm)  # (n, V) softmax
            p[torch.arange(len(tc), device=x.device), safe] -= 1.0  # d(lse - logit_target) / d logits
            p.mul_(keep[:, None])
            grad_x[start:start + chunk_rows] = p @ weight  # (n, C)
            grad_w.addmm_(p.T, xc)  # (V, C)
    return total, grad_x, grad_w


class _LinearCrossEntropy(torch.autograd.Function):
    """The loss and both gradients in the forward pass (the loss is a scalar); backward scales them."""

    @staticmethod
    def forward(ctx, x, weight, targets, ignore_index, reduction, chunk_rows):  # type: ignore[override]
        total, grad_x, grad_w = _chunks(x, weight, targets, ignore_index, chunk_rows, grads=True)
        if reduction == "mean":
            n = _count(targets, ignore_index)
            total, grad_x, grad_w = total / n, grad_x / n, grad_w / n
        ctx.save_for_backward(grad_x, grad_w)
        return total

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[override]
        grad_x, grad_w = ctx.saved_tensors
        return grad_x * grad_out, grad_w * grad_out, None, None, None, None
