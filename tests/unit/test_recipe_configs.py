"""Per-optimizer settings belong to the optimizer: a preset selects an optimizer config and never sets optim.*,
so `experiment=X optim=Y` runs Y at Y's own settings, and the presets compose the AdamW they always had."""

import pytest

from ffn_zoo.training.recipe.build import CONFIG_DIR, compose
from ffn_zoo.training.recipe.optim import describe_optim

PRESETS = sorted(p.stem for p in (CONFIG_DIR / "experiment").glob("*.yaml"))
OPTIMIZERS = sorted(p.stem for p in (CONFIG_DIR / "optim").glob("*.yaml"))

# the AdamW the presets composed before optimizer configs carried them (commit 65a596c): their results stand
ADAMW = {"name": "adamw", "lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "fused": True,
         "warmup": 0.1, "schedule": "cosine", "min_lr_ratio": 0.1, "grad_clip": 1.0,
         "decay_fraction": 0.2, "decay_shape": "linear"}  # the wsd schedule's keys, added since; cosine never reads them
BEFORE = {
    "glu_variants_cpu": {**ADAMW, "warmup": 0.2},
    "glu_variants_toy": {**ADAMW, "warmup": 0.2},
    "glu_variants_c4": {**ADAMW, "warmup": 10000},
    # added since, pinned the same way: the GLU-gap study's presets (experiments/glu_variants)
    "glu_wikipedia_cpu": {**ADAMW, "warmup": 0.2},
    "glu_ladder_cpu": {**ADAMW, "warmup": 48, "schedule": "wsd"},
    "glu_recipe_cpu": {**ADAMW, "warmup": 48, "schedule": "wsd"},
    "glu_ladder_mlm_cpu": {**ADAMW, "warmup": 48, "schedule": "wsd"},
}


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_the_adamw_it_always_had(preset: str) -> None:
    assert dict(compose([f"experiment={preset}"]).optim) == BEFORE[preset]


@pytest.mark.parametrize("optim", OPTIMIZERS)
@pytest.mark.parametrize("preset", PRESETS)
def test_preset_never_clobbers_the_optimizers_settings(preset: str, optim: str) -> None:
    assert compose([f"experiment={preset}", f"optim={optim}"]).optim == compose([f"optim={optim}"]).optim


def test_cpu_preset_with_adafactor_runs_t5s_adafactor() -> None:
    cfg = compose(["experiment=glu_variants_cpu", "optim=adafactor"])
    o = cfg.optim
    assert (o.name, o.lr, o.schedule, o.warmup, o.grad_clip) == ("adafactor", 1e-2, "inverse_sqrt", 10000, None)
    assert cfg.model.name == "mini" and cfg.trainer.max_steps == 240  # the rest of the preset still applies


def test_startup_line_says_the_effective_optimizer() -> None:
    cpu = compose(["experiment=glu_variants_cpu"])
    assert describe_optim(cpu.optim, cpu.trainer.max_steps) == (
        "optim    adamw, lr 0.001, cosine to 0.1·lr after 48 warm-up steps, grad clip 1.0")
    t5 = compose(["experiment=glu_variants_cpu", "optim=adafactor"])
    line = describe_optim(t5.optim, t5.trainer.max_steps)
    assert line.startswith("optim    adafactor, relative step lr 0.01") and "inverse_sqrt: held 10000 steps" in line
    assert line.endswith("grad clip off") and "\n" not in line


def test_the_recipe_ladder_shares_the_headline_ladders_default_branches() -> None:
    """experiment=glu_recipe_cpu reuses glu_ladder_cpu's 0.25 Mi and 1 Mi branches as its default recipe: the plain
    WSD run each of those branches equals must be the same run in both presets (and the factors change it)."""
    from omegaconf import OmegaConf

    from ffn_zoo.analysis.compare.runs import experiment_key, flatten
    from ffn_zoo.training.ladder.run import _with, piece_changes
    from ffn_zoo.training.ladder.plan import plan_of

    def branches(overrides: list[str]) -> dict[int, tuple]:
        cfg = compose(overrides)
        plan = plan_of(cfg)
        return {r.tokens: experiment_key(flatten(OmegaConf.to_container(
            _with(cfg, piece_changes(plan, r, None)), resolve=True))) for r in plan.rungs}

    headline, recipe = branches(["experiment=glu_ladder_cpu"]), branches(["experiment=glu_recipe_cpu"])
    assert sorted(recipe) == [2**18, 2**20]
    assert all(recipe[t] == headline[t] for t in recipe)
    fan_in = branches(["experiment=glu_recipe_cpu", "model.init=fan_in"])
    assert all(fan_in[t] != headline[t] for t in fan_in)


def test_adafactor_on_the_ladder_is_t5s_adafactor_with_a_cooldown() -> None:
    o = compose(["experiment=glu_recipe_cpu", "optim=adafactor_wsd_cpu"]).optim
    t5 = compose(["optim=adafactor"]).optim
    assert (o.name, o.lr, o.schedule, o.warmup, o.grad_clip) == ("adafactor", 1e-2, "wsd", 0, None)
    assert {k: v for k, v in o.items() if k not in ("schedule", "warmup")} == \
        {k: v for k, v in t5.items() if k not in ("schedule", "warmup")}


def test_the_mlm_ladder_is_the_causal_ladder_with_bert_objective() -> None:
    """Side by side (issue 22) means one difference: the objective. Every other setting, budgets included, is
    glu_ladder_cpu's."""
    from omegaconf import OmegaConf

    from ffn_zoo.analysis.compare.runs import flatten

    clm, mlm = (flatten(OmegaConf.to_container(compose([f"experiment={p}"]), resolve=True))
                for p in ("glu_ladder_cpu", "glu_ladder_mlm_cpu"))
    assert {k for k in clm.keys() | mlm.keys() if clm.get(k) != mlm.get(k)} == {"objective"}
    assert (clm["objective"], mlm["objective"]) == ("clm", "mlm")


def test_the_token_cache_is_not_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs made on machines with different FFNZOO_CACHE folders are the same experiment (compare pools them);
    the corpus itself still is a setting."""
    from omegaconf import OmegaConf

    from ffn_zoo.analysis.compare.runs import experiment_key, flatten

    def key(overrides: list[str]) -> tuple:
        return experiment_key(flatten(OmegaConf.to_container(compose(overrides), resolve=True)))

    monkeypatch.setenv("FFNZOO_CACHE", "/one/machine/cache")
    here = key(["experiment=glu_ladder_cpu"])
    monkeypatch.setenv("FFNZOO_CACHE", "/another/cache")
    assert key(["experiment=glu_ladder_cpu"]) == here
    assert compose(["experiment=glu_ladder_cpu"]).data.cache_dir == "/another/cache"
    assert key(["experiment=glu_ladder_cpu", "data=c4"]) != here
