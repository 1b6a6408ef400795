"""A committed ladder comparison (its ``ladder.json``) read back as the branch runs it was made from, so ladders
run in different sessions are compared together after their run folders are gone:

    ffn-zoo-compare experiments/glu_variants/width/d128 logs/glu_width/d512/seed* --out ...

The report keeps, per setting, budget and variant, each seed's final loss on every held-out set, and (since
``ladder_settings`` was added) each setting's config, and (reports from 2026-12-06 on) each seed's precision and
denormal handling, so pooling reports still warns of mixed numerics; that is all a ladder comparison reads. What it
does not keep is not invented: per-seed bpb and tokens/s come back as their means, and a run left out for a
non-finite loss stays left out (named in one warning). A report from before ``ladder_settings`` has only the
settings' labels; give the keys it needs with ``--set`` (``--set model.d_model=128``), which applies to every report
given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ffn_zoo.analysis.compare.runs import Run, is_run_dir
from ffn_zoo.errors import DataError


def report_file(path: Path) -> Path | None:
    """The ladder report at ``path`` (a ``ladder.json`` written by compare, or the folder holding one), else None.
    A ladder's own manifest is also named ladder.json; only compare's has ``budget_rows``."""
    file = path / "ladder.json" if path.is_dir() else path
    if file.name != "ladder.json" or not file.is_file() or (path.is_dir() and is_run_dir(path)):
        return None
    try:
        report = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return file if isinstance(report, dict) and "budget_rows" in report else None


def runs_from_report(file: Path, extra_config: dict[str, Any] | None = None) -> tuple[list[Run], list[str]]:
    """(one finished branch Run per setting, budget, variant and seed of the report; warnings). ``extra_config``:
    dotted keys added to every setting's config (``--set``), e.g. the width of a report that predates
    ``ladder_settings``."""
    report = json.loads(file.read_text())
    settings = report.get("ladder_settings")
    rows = report["budget_rows"]
    if not rows:
        raise DataError(f"{file}: a ladder report with no budget rows (nothing to read back)")
    n_settings = max(r["ladder_setting"] for r in rows)
    if settings is None:
        labels = {r["ladder_setting"]: r["setting_label"] for r in rows}
        if n_settings > 1:
            raise DataError(f"{file}: {n_settings} ladder settings ({'; '.join(labels.values())}) but no "
                            f"ladder_settings to tell them apart (a report from before they were recorded); "
                            f"compare its run folders, or a report of one setting")
        settings = [{}]
    elif len(settings) != n_settings:
        raise DataError(f"{file}: {len(settings)} ladder_settings for {n_settings} settings in its rows")
    ffn = report.get("ladder_ffn") or {}
    extra = {name: {_row_key(r): r for r in sets.get("budget_rows", [])}
             for name, sets in (report.get("extra_val") or {}).items()}
    runs, nonfinite = [], []
    for row in rows:
        config = {**settings[row["ladder_setting"] - 1], **(extra_config or {}),
                  **ffn.get(row["variant"], {"ffn.name": row["variant"]}), "trainer.max_steps": row["steps"]}
        nonfinite += row.get("nonfinite_runs") or []
        unknown = [None] * len(row["seeds"])  # reports from before each seed's numerics were recorded
        numerics = zip(row.get("seed_precision") or unknown, row.get("seed_denormals") or unknown, strict=True)
        for seed, loss, (precision, denormals) in zip(row["seeds"], row["val_losses"], numerics, strict=True):
            metrics = {"status": "ok", "ladder_role": "branch", "ladder_budget_tokens": row["budget_tokens"],
                       "seed": seed, "ffn": row["variant"], "gated": row["form"] == "gated", "d_ff": row["hidden"],
                       "params_ffn": row["params_ffn"], "params_total": row["params_total"],
                       "flops_per_token": row["flops_per_token"], "steps": row["steps"],
                       "tokens_seen": row["tokens_seen"], "val_loss": loss, "val_bpb": row["val_bpb"],
                       "train_tokens_per_s": row["tokens_per_s"], "extra_val": sorted(extra),
                       "precision": precision, "denormals": denormals}
            for name, by_key in extra.items():
                other = by_key.get(_row_key(row))
                if other is not None and seed in other["seeds"]:
                    metrics[f"val_{name}_loss"] = other["val_losses"][other["seeds"].index(seed)]
                    metrics[f"val_{name}_bpb"] = other["val_bpb"]
            where = f"setting{row['ladder_setting']}/{row['variant']}/seed={seed}/budget={row['budget_tokens']}"
            runs.append(Run(file / where, "ok", {**config, "seed": seed}, metrics))
    warnings = [f"{file}: {len(nonfinite)} run(s) it left out for a non-finite loss stay out: {'; '.join(nonfinite)}"
                ] if nonfinite else []
    return runs, warnings


def _row_key(row: dict[str, Any]) -> tuple:
    return row["ladder_setting"], row["budget_tokens"], row["variant"]


def parse_sets(items: Sequence[str] | None) -> dict[str, Any]:
    """``--set key=value`` items -> {key: value}, the value read as JSON where it parses (128, 0.02, true)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise DataError(f"--set {item!r}: give key=value, e.g. --set model.d_model=128")
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out
