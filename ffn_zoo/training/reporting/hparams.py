"""Which config keys a run reports as its hyperparameters (TensorBoard's HParams tab, W&B's config).

Only what defines the experiment: the FFN, the model, the data and its size, the optimizer, the seed,
the step budget, the precision. Machinery (checkpoints, faults, debug, instruments, paths, caches,
logging, workers) never shows; it cannot change what is learned. The rule is the one table below:
a new experiment key is one line there.
"""

from __future__ import annotations

from typing import Any, Iterable

# A flat config key is a hyperparameter when it equals an entry, or starts with an entry that ends in ".".
HPARAMS: tuple[str, ...] = (
    "ffn.", "model.", "optim.", "seed", "objective", "mlm.",
    "data.name", "data.train_tokens", "data.train_docs", "data.val_tokens", "data.seq_len", "data.batch_size",
    "data.tokenizer.kind", "data.tokenizer.name", "data.tokenizer.vocab_size",
    "trainer.max_steps", "impl.precision",
)
NOT_HPARAMS: tuple[str, ...] = ("optim.fused",)  # how fast, not what is learned
ONLY_WHEN: dict[str, tuple[str, Any]] = {"mlm.": ("objective", "mlm")}  # prefix -> (key, value) it needs

# The final numbers beside the hyperparameters, as logged scalar tags (their last value).
FINAL_METRICS: tuple[str, ...] = (
    "val/loss", "val/ppl", "val/bpb", "val/excess_loss", "train/mean_tokens_per_s",
)


def ladder_hparams(metrics: dict[str, Any]) -> dict[str, int | str]:
    """A ladder piece's place on its ladder (``metrics.json``'s ``ladder_*`` fields): ``ladder.role`` (trunk or
    branch) and ``ladder.budget_tokens`` (a branch's budget; the trunk's tokens trained at constant lr), so the
    HParams table and scatter can show loss against budget. Empty for a plain run."""
    role = metrics.get("ladder_role")
    if role not in ("trunk", "branch"):
        return {}
    tokens = metrics["ladder_budget_tokens"] if role == "branch" else metrics["tokens_seen"]
    return {"ladder.role": role, "ladder.budget_tokens": int(tokens)}


def metric_tags(last_val: Iterable[str], finals: Iterable[str]) -> list[str]:
    """The metric columns: :data:`FINAL_METRICS` that were logged, then every extra held-out set's loss."""
    logged = set(last_val) | set(finals)
    extra = sorted(t for t in logged if t.startswith("val/") and t.endswith("/loss") and t not in FINAL_METRICS)
    return [t for t in FINAL_METRICS if t in logged] + extra


def _matches(key: str, entries: Iterable[str]) -> bool:
    return any(key == e or (e.endswith(".") and key.startswith(e)) for e in entries)


def is_hparam(key: str, flat: dict[str, Any]) -> bool:
    """Whether the dotted ``key`` of the flat config ``flat`` is a hyperparameter of the experiment."""
    if not _matches(key, HPARAMS) or _matches(key, NOT_HPARAMS):
        return False
    return all(flat.get(need) == value for prefix, (need, value) in ONLY_WHEN.items() if key.startswith(prefix))


def swept_hparams(swept: Iterable[str], keys: Iterable[str]) -> list[str]:
    """The hyperparameters a sweep varies: a swept leaf (``optim.lr``) is itself, a swept group (``ffn``,
    ``model``) is its ``.name`` key."""
    keys = list(keys)
    out = []
    for s in swept:
        key = s if s in keys else f"{s}.name"
        if key in keys and key not in out:
            out.append(key)
    return out


def experiment_hparams(flat: dict[str, Any], swept: Iterable[str] = ()) -> dict[str, bool | int | float | str]:
    """The hyperparameters of one run from its flat config: the swept ones first, then in config order;
    values are bool/int/float/str (None and lists as their text)."""
    chosen = [k for k in flat if is_hparam(k, flat)]
    first = swept_hparams(swept, chosen)
    ordered = first + [k for k in chosen if k not in first]
    return {k: (flat[k] if isinstance(flat[k], (bool, int, float, str)) else str(flat[k])) for k in ordered}
