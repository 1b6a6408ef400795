"""Give a committed ladder report from before compare recorded ``ladder_settings`` the settings of the command that
made it, so ``ffn-zoo-compare`` reads it back beside fresh run folders (ffn_zoo/analysis/compare/reports.py):

    python experiments/glu_variants/scripts/backfill_settings.py experiments/glu_variants/width/d128 \
        experiment=glu_ladder_cpu model=w128

The overrides are the training command's, without ffn= and seed=; the config is composed from today's configs/,
as train.py would, and made a branch's as the ladder makes it (``piece_changes``: ladder.budgets null, the WSD
schedule, the plan's warm-up); the settings are that config minus the seed, the FFN, trainer.max_steps and the keys
that cannot change results. The numbers in the report are not touched; ``ladder_settings_composed`` records the
overrides and the commit, so a reader knows the settings were composed afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf, open_dict

from ffn_zoo.analysis.compare.ladder import ladder_settings
from ffn_zoo.analysis.compare.runs import Run
from ffn_zoo.training.recipe.build import config_dir
from ffn_zoo.training.ladder.run import piece_changes
from ffn_zoo.training.ladder.plan import plan_of
from ffn_zoo.training.lifecycle.runs import flatten_dict


def composed(overrides: list[str]) -> dict:
    """A branch's config (its first rung's) of the ladder these overrides make, flattened to dotted keys."""
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]  # its run-folder resolvers are train.py's; the settings never hold hydra.*
        plan = plan_of(cfg)
        for key, value in piece_changes(plan, plan.rungs[0], None).items():
            OmegaConf.update(cfg, key, value)
        return flatten_dict(OmegaConf.to_container(cfg, resolve=True))


def main(folder: str, *overrides: str) -> None:
    file = Path(folder) / "ladder.json" if Path(folder).is_dir() else Path(folder)
    report = json.loads(file.read_text())
    if any(o.split("=", 1)[0].lstrip("+~") in ("ffn", "seed") for o in overrides):
        sys.exit("give the command's overrides without ffn= and seed= (the report's variants and seeds are its own)")
    if {r["ladder_setting"] for r in report["budget_rows"]} != {1}:
        sys.exit(f"{file}: more than one ladder setting; which overrides made which cannot be told from the report")
    variants = sorted({r["variant"] for r in report["budget_rows"]})
    settings, ffn = None, {}
    for v in variants:
        config = composed([f"ffn={v}", "seed=0", *overrides])
        key = dict(ladder_settings([Run(file, "ok", config)])[0])
        if settings is not None and key != settings:
            sys.exit(f"ffn={v} composes another setting than {variants[0]}: not one ladder setting")
        settings = key
        ffn[v] = {k: val for k, val in config.items() if k.startswith("ffn.")}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report.update(ladder_settings=[settings], ladder_ffn=ffn,
                  ladder_settings_composed={"overrides": list(overrides), "commit": commit})
    file.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"{file}: ladder_settings composed from {' '.join(overrides)} ({len(settings)} keys; "
          f"model.name={settings.get('model.name')}, model.d_model={settings.get('model.d_model')})")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(*sys.argv[1:])
