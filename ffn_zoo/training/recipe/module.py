"""LightningModule: the objective's cross-entropy (next-token or masked, ``objectives.py``), the optimizer and lr
schedule that ``optim`` names (``optim.py``), exact whole-split validation."""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.plugins.precision import MixedPrecision
from torch.optim.lr_scheduler import LambdaLR

from ffn_zoo.nn.losses import linear_cross_entropy
from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.training.recipe.objectives import IGNORE_INDEX, Objective
from ffn_zoo.training.recipe.optim import build_optimizer, lr_schedule


class LitLM(L.LightningModule):
    """Wraps a :class:`TransformerLM`. ``val/ppl`` is exp of the token-weighted mean NLL over the
    whole validation split (not a mean of per-batch perplexities). ``val_sets`` = (name, bytes) of the
    extra held-out sets (validation dataloaders 1, 2, ...), logged as ``val/<name>/loss|ppl|bpb``."""

    def __init__(
        self,
        model: TransformerLM,
        optim: Mapping[str, Any],
        max_steps: int,
        optimal_val_loss: float | None = None,
        val_bytes: int | None = None,
        objective: Objective | None = None,
        val_sets: Sequence[tuple[str, int | None]] = (),
        *,
        fused_loss: bool,
    ) -> None:
        super().__init__()
        self.model = model
        self.optim_cfg = dict(optim)
        self.max_steps = max_steps
        self.optimal_val_loss = optimal_val_loss
        self.val_bytes = val_bytes
        self.objective = objective or Objective("clm")  # batch -> (inputs, targets); mlm: masked positions only
        self.val_sets = list(val_sets)
        self.fused_loss = fused_loss  # impl.fused_loss: the output layer and cross-entropy by row chunks (nn/losses.py)
        self._val_nll = torch.zeros(1 + len(self.val_sets), dtype=torch.float64)  # (sets,): main split first
        self._val_count = torch.zeros(1 + len(self.val_sets), dtype=torch.float64)
        self.last_val: dict[str, float] = {}
        self.mask_seconds = 0.0  # wall time validation spends making its inputs (mlm: the fixed masks)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # (B, T) -> (B, T, V)
        return self.model(idx)

    def loss(self, batch: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
        """The objective's loss on a batch of rows (B, seq_len + 1): what a training step minimises."""
        x, y = self.objective(batch, train=self.training)  # (B, T) inputs, (B, T) targets (IGNORE_INDEX: no loss)
        return self.nll(x, y, reduction)

    def nll(self, x: torch.Tensor, y: torch.Tensor, reduction: str) -> torch.Tensor:
        """Cross-entropy of targets ``y`` (B, T) given inputs ``x`` (B, T); IGNORE_INDEX targets carry none."""
        chosen = y != IGNORE_INDEX if self.objective.name == "mlm" else None  # (B, T): mlm scores only those
        targets = y[chosen] if chosen is not None else y.flatten()  # (N,) or (B·T,)
        if self.fused_loss:  # the logits never held whole: nn/losses.py
            h = self.model(x, select=chosen, head=False)  # (N, C) or (B, T, C)
            return linear_cross_entropy(h.flatten(0, -2), self.model.head.weight, targets, ignore_index=IGNORE_INDEX,
                                        reduction=reduction)
        # mlm projects only the chosen positions (N of B·T); clm needs no more of a model than forward(idx)
        logits = self.model(x) if chosen is None else self.model(x, select=chosen)  # (B, T, V) or (N, V)
        return F.cross_entropy(logits.flatten(0, -2).float(), targets, reduction=reduction, ignore_index=IGNORE_INDEX)

    def training_step(self, batch: torch.Tensor, batch_idx: int) -> torch.Tensor:
        loss = self.loss(batch, "mean")
        tokens = batch[:, 1:].numel() * self.trainer.world_size
        self.log("train/loss", loss, prog_bar=False)
        self.log("train/ppl", torch.exp(loss.detach()), prog_bar=True)
        # host numbers as CPU tensors: a Python float would be copied to the GPU, a host sync every step
        self.log("train/tokens_seen", torch.tensor(float((self.global_step + 1) * tokens)))
        self.log("train/lr", torch.tensor(float(self.trainer.optimizers[0].param_groups[0]["lr"])))
        return loss

    def on_validation_epoch_start(self) -> None:
        self._val_nll = torch.zeros(1 + len(self.val_sets), dtype=torch.float64, device=self.device)  # (sets,)
        self._val_count = torch.zeros(1 + len(self.val_sets), dtype=torch.float64, device=self.device)

    def validation_step(self, batch: torch.Tensor, batch_idx: int, dataloader_idx: int = 0) -> None:
        start = time.perf_counter()
        x, y = self.objective(batch, train=False)  # mlm: the fixed validation masks
        self.mask_seconds += time.perf_counter() - start
        self._val_nll[dataloader_idx] += self.nll(x, y, "sum").double()
        self._val_count[dataloader_idx] += (y != IGNORE_INDEX).sum()  # scored tokens: all (clm) or masked (mlm)

    def on_validation_epoch_end(self) -> None:
        nll = self.trainer.strategy.reduce(self._val_nll, reduce_op="sum")  # (sets,)
        count = self.trainer.strategy.reduce(self._val_count, reduce_op="sum")
        loss = (nll[0] / count[0]).item()
        metrics = {"val/loss": loss, "val/ppl": math.exp(min(loss, 80.0))}
        if self.optimal_val_loss is not None:
            metrics["val/optimal_ppl"] = math.exp(self.optimal_val_loss)
            metrics["val/excess_loss"] = loss - self.optimal_val_loss  # nats/token above the Bayes floor
        if self.val_bytes:
            metrics["val/bpb"] = nll[0].item() / math.log(2) / self.val_bytes
        for i, (name, n_bytes) in enumerate(self.val_sets, start=1):  # the extra held-out sets
            set_loss = (nll[i] / count[i]).item()
            metrics[f"val/{name}/loss"] = set_loss
            metrics[f"val/{name}/ppl"] = math.exp(min(set_loss, 80.0))
            if n_bytes:
                metrics[f"val/{name}/bpb"] = nll[i].item() / math.log(2) / n_bytes
        self.last_val = metrics
        self.log_dict(metrics, sync_dist=False, rank_zero_only=True, add_dataloader_idx=False)
        self.log("val_ppl", metrics["val/ppl"], prog_bar=True, logger=False, add_dataloader_idx=False)

    def extra_val_metrics(self) -> dict[str, Any]:
        """The last validation's extra held-out sets as ``metrics.json`` keys: val_<name>_loss, _ppl, _bpb."""
        out: dict[str, Any] = {"extra_val": [name for name, _ in self.val_sets]}
        for name, _ in self.val_sets:
            for stat in ("loss", "ppl", "bpb"):
                out[f"val_{name}_{stat}"] = self.last_val.get(f"val/{name}/{stat}")
        return out

    def configure_optimizers(self) -> dict[str, Any]:
        opt = build_optimizer(self.model, self.optim_cfg)
        schedule = LambdaLR(opt, lr_schedule(self.optim_cfg, self.max_steps))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def configure_gradient_clipping(self, optimizer: Any, gradient_clip_val: Any = None,
                                    gradient_clip_algorithm: Any = None) -> None:
        # Lightning's mixed-precision plugin refuses to clip for a fused optimizer, in case a grad scaler
        # unscales inside step(); bf16-mixed has no scaler, so the gradients are true and we clip them here
        plugin = self.trainer.precision_plugin
        if gradient_clip_val and type(plugin) is MixedPrecision and plugin.scaler is None:
            torch.nn.utils.clip_grad_norm_(self.parameters(), gradient_clip_val)
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)
