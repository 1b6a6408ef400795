"""The WSD schedule, ladder planning and the ladder's bad inputs: each one line naming the key and what is valid."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ffn_zoo.errors import ConfigError, FFNZooError
from ffn_zoo.training.recipe.build import compose
from ffn_zoo.training.recipe.optim import lr_multiplier, lr_schedule
from ffn_zoo.training.ladder.plan import parse_tokens, plan_of
from ffn_zoo.training.ladder.run import Pace
from tests.helpers import run_train, tiny


def optim(**changes: object) -> dict:
    cfg = dict(compose(["optim.schedule=wsd"]).optim)
    return {**cfg, **changes}


def test_wsd_values() -> None:
    """10 steps, warm-up 2, decay_fraction 0.2: warm-up, peak through step 7, cooldown over steps 8 and 9."""
    for shape, mid in (("linear", 0.5), ("1-sqrt", 1 - math.sqrt(0.5))):
        f = lr_schedule(optim(warmup=2, decay_fraction=0.2, decay_shape=shape, min_lr_ratio=0.1), 10)
        assert [f(s) for s in range(8)] == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
        assert f(8) == pytest.approx(0.1 + 0.9 * mid) and f(9) == pytest.approx(0.1)


def test_wsd_before_its_cooldown_is_the_constant_schedule_bitwise() -> None:
    """What lets every budget share one trunk: the same floats, step by step, whatever the run's length."""
    for total in (50, 100, 400):
        wsd = lr_schedule(optim(warmup=7), total)
        start = total - round(0.2 * total)
        constant = [lr_multiplier(s, schedule="constant", warmup_steps=7, total_steps=10**6, min_lr_ratio=0.1)
                    for s in range(start)]
        assert [wsd(s) for s in range(start)] == constant
        assert wsd(start) < 1.0  # the cooldown begins at its first step


@pytest.mark.parametrize("value, tokens", [("250k", 250_000), ("0.5M", 500_000), ("1Mi", 2**20), ("0.25Mi", 2**18),
                                           (1_000_000, 1_000_000), (1e6, 1_000_000), ("2G", 2 * 10**9)])
def test_parse_tokens(value: object, tokens: int) -> None:
    assert parse_tokens(value, "b") == tokens


def plan(*overrides: str):
    return plan_of(compose(["model=tiny", "data.batch_size=16", "optim.schedule=wsd", *overrides]))  # 512 tokens/step


def test_plan_warmup_is_a_fraction_of_the_smallest_budget() -> None:
    p = plan("ladder.budgets=[5120,10240,20480]", "optim.warmup=0.2", "trainer.max_steps=40")
    assert p.warmup == 2 and [r.steps for r in p.rungs] == [10, 20, 40] and [r.cooldown for r in p.rungs] == [2, 4, 8]
    assert p.trunk_steps == 32 and p.steps_trained == 46
    assert plan("ladder.budgets=[5120,10240]", "optim.warmup=3").warmup == 3  # steps stay steps


BAD = [  # (overrides, the one-line message)
    (["ladder.budgets=[10240,5120]"], r"ladder.budgets must increase: ladder.budgets\[1\]=5120 \(5,120 tokens\) comes "
                                      r"after 10240 \(10,240 tokens\)"),
    (["ladder.budgets=[5120,5120]"], r"ladder.budgets must increase"),
    (["ladder.budgets=[5120,1Mi]"], r"ladder.budgets\[1\]=1Mi is 2048 steps, longer than the run "
                                    r"\(trainer.max_steps=300\); raise trainer.max_steps to 2048 or drop the budget"),
    (["ladder.budgets=[512,5120]"], r"ladder.budgets\[0\]=512 is 1 step\(s\), shorter than its cooldown of "
                                    r"optim.decay_fraction=0.2 × 1 < 1 step; give at least 1,536 tokens \(3 steps\)"),
    (["ladder.budgets=[0.25M]"], r"ladder.budgets\[0\]=0.25M is 488.28 steps of 512 tokens \(data.batch_size × "
                                 r"data.seq_len\); give whole steps, e.g. 249,856 or 250,368 tokens"),
    (["ladder.budgets=[lots]"], r"ladder.budgets\[0\]='lots' is not a token count; valid: an integer or a number "
                                r"with k, M, G"),
    (["ladder.budgets=[5120]", "optim.schedule=cosine"], r"ladder.budgets needs optim.schedule=wsd \(got cosine\)"),
    (["ladder.budgets=[2048,5120]", "optim.warmup=4"],
     r"ladder.budgets\[0\]=2048 is 4 steps: its 1-step cooldown would start at step 3, before the 4-step warm-up"),
    (["ladder.budgets=[5120]", "optim.decay_fraction=0"], r"optim.decay_fraction=0 must be in \(0, 1\]"),
    (["ladder.budgets=[5120]", "optim.decay_fraction=1.5"], r"optim.decay_fraction=1.5 must be in \(0, 1\]"),
    (["ladder.budgets=[5120]", "optim.decay_shape=cosine"], r"unknown optim.decay_shape 'cosine'; valid: 1-sqrt, linear"),
]


@pytest.mark.parametrize("overrides, message", BAD, ids=[" ".join(o) for o, _ in BAD])
def test_bad_ladder_inputs_are_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        plan(*overrides)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("changes, message", [
    ({"decay_fraction": 0.0}, r"optim.decay_fraction=0.0 must be in \(0, 1\]"),
    ({"decay_fraction": -0.1}, r"optim.decay_fraction=-0.1 must be in \(0, 1\]"),
    ({"decay_fraction": 1.01}, r"optim.decay_fraction=1.01 must be in \(0, 1\]"),
    ({"warmup": 9}, r"optim.schedule=wsd: warm-up 9 \+ cooldown 2 steps .* do not fit in trainer.max_steps=10"),
])
def test_bad_wsd_settings(changes: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        lr_schedule(optim(**changes), 10)
    lr_schedule(optim(decay_fraction=1.0, warmup=0), 10)  # the edge of the range is valid: all decay


@pytest.mark.parametrize("args, message", [
    (["optim.schedule=wsd", "ladder.budgets=[10240,5120]"], "error: ladder.budgets must increase"),
    (["optim.schedule=wsd", "optim.decay_fraction=1.5"], "error: optim.decay_fraction=1.5 must be in (0, 1]"),
    (["optim.schedule=wsd", "ladder.budgets=[5120]", "ckpt_path=last"], "error: ckpt_path=last: no ladder under"),
    (["optim.schedule=wsd", "ladder.budgets=[5120]", "ladder.keep_checkpoints=some"],
     "error: unknown ladder.keep_checkpoints 'some'; valid: all, needed"),
], ids=["ladder", "plain-wsd", "last", "keep"])
def test_train_py_prints_one_line_and_fails(args: list[str], message: str, tmp_path: Path) -> None:
    proc = run_train(tiny(*args), tmp_path, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    (line,) = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert line.startswith(message), proc.stderr[-2000:]
    assert not list(tmp_path.glob("runs/*/checkpoints"))  # refused before anything trained


def test_a_bool_or_a_fraction_of_a_token_is_refused() -> None:
    with pytest.raises(FFNZooError, match="is not a token count"):
        parse_tokens(True, "b")
    with pytest.raises(FFNZooError, match="must be a positive whole number of tokens"):
        parse_tokens("0.0001k", "b")


def test_last_continues_the_ladder_in_its_own_fixed_folder(tmp_path):
    """A requeued sweep job (fixed hydra.sweep.dir, ckpt_path=last) continues the ladder already in its folder."""
    from ffn_zoo.training.ladder.run import MANIFEST
    from ffn_zoo.training.lifecycle.runs import resume_point

    (tmp_path / MANIFEST).write_text("{}")
    assert resume_point("last", tmp_path / "elsewhere", tmp_path, marker=MANIFEST) == tmp_path / MANIFEST
    (tmp_path / "trunk").mkdir()  # a folder or file inside a ladder names the ladder
    assert resume_point(str(tmp_path / "trunk"), tmp_path, tmp_path / "new", marker=MANIFEST) == tmp_path / MANIFEST


GROW = [  # (the ladder's budgets, this command's, the budgets added or the refusal)
    ("[5120,10240]", "[5120,10240,20480]", ["20480"]),  # a larger budget: its cooldown starts after step 16
    ("[5120,10240]", "[5120,10240]", []),
    ("[5120,20480]", "[5120,10240,20480]", r"trunk trained to step 32; budget 10240's cooldown would start at step "
                                           r"16, inside it, where no state was kept"),
    ("[5120,10240]", "[10240,20480]", r"drops or changes 5120\. A continued ladder keeps every budget it has"),
]


@pytest.mark.parametrize("saved, budgets, expected", GROW)
def test_a_continued_ladder_may_add_larger_budgets_only(saved: str, budgets: str, expected, tmp_path: Path) -> None:
    """The trunk continues from its last branch point; a budget branching inside the trained trunk, or a dropped
    one, is one line. (tests/smoke/test_ladder.py: a grown ladder equals the ladder planned whole, bitwise.)"""
    from ffn_zoo.training.ladder.run import _open

    def cfg(b: str):
        return compose(["model=tiny", "data.batch_size=16", "optim.schedule=wsd", "optim.warmup=2",
                        "trainer.max_steps=40", f"ladder.budgets={b}"])

    _open(tmp_path, plan_of(cfg(saved)), cfg(saved))
    if isinstance(expected, list):
        assert _open(tmp_path, plan_of(cfg(budgets)), cfg(budgets)) == expected
        assert _open(tmp_path, plan_of(cfg(budgets)), cfg(budgets)) == []  # the manifest now has the grown plan
    else:
        with pytest.raises(FFNZooError, match=expected) as e:
            _open(tmp_path, plan_of(cfg(budgets)), cfg(budgets))
        assert "\n" not in str(e.value)


def test_a_continued_ladder_keeps_its_warmup(tmp_path: Path) -> None:
    from ffn_zoo.training.ladder.run import _open

    def cfg(*o: str):
        return compose(["model=tiny", "data.batch_size=16", "optim.schedule=wsd", "trainer.max_steps=40", *o])

    first = cfg("optim.warmup=0.2", "ladder.budgets=[5120,10240]")  # 2 steps: a fifth of the smallest budget
    _open(tmp_path, plan_of(first), first)
    grown = cfg("optim.warmup=0.2", "ladder.budgets=[10240,20480]")  # a new smallest budget: a 4-step warm-up
    with pytest.raises(FFNZooError, match="has 2 warm-up steps but this command 4; a ladder grows only with the same warm-up"):
        _open(tmp_path, plan_of(grown), grown)


MLM_GROW = [
    ([], ["objective=mlm"], r"was trained with objective=clm but this command has objective=mlm; a ladder keeps its "
                            r"objective"),
    (["objective=mlm"], ["objective=mlm", "mlm.mask_seed=1"],
     r"has mlm\.mask_seed=0 but this command has mlm\.mask_seed=1; continue it with its own settings"),
    (["objective=mlm"], ["objective=mlm", "mlm.mask_prob=0.2"], r"has mlm\.mask_prob=0\.15 but this command has"),
]


@pytest.mark.parametrize("first, again, message", MLM_GROW, ids=["objective", "mask-seed", "mask-prob"])
def test_a_continued_ladder_keeps_its_objective_and_masks(first: list, again: list, message: str, tmp_path: Path) -> None:
    """Growing a causal ladder as MLM, or an MLM ladder with other masks (the validation masks every budget is
    scored on), is one line; the grown budgets would not be comparable with the ones kept."""
    from ffn_zoo.training.ladder.run import _open

    def cfg(*o: str):
        return compose(["model=tiny", "data.batch_size=16", "optim.schedule=wsd", "optim.warmup=2",
                        "trainer.max_steps=20", "ladder.budgets=[5120,10240]", *o])

    _open(tmp_path, plan_of(cfg(*first)), cfg(*first))
    with pytest.raises(FFNZooError, match=message) as e:
        _open(tmp_path, plan_of(cfg(*again)), cfg(*again))
    assert "\n" not in str(e.value)


def test_a_causal_ladder_from_before_objectives_were_recorded_still_grows(tmp_path: Path) -> None:
    """Manifests written before MLM ladders have no ``objective`` in their settings: they are causal ladders."""
    from ffn_zoo.training.ladder.run import MANIFEST, _open

    def cfg(b: str):
        return compose(["model=tiny", "data.batch_size=16", "optim.schedule=wsd", "optim.warmup=2",
                        "trainer.max_steps=40", f"ladder.budgets={b}"])

    _open(tmp_path, plan_of(cfg("[5120,10240]")), cfg("[5120,10240]"))
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    del manifest["settings"]["objective"]
    (tmp_path / MANIFEST).write_text(json.dumps(manifest))
    assert _open(tmp_path, plan_of(cfg("[5120,10240,20480]")), cfg("[5120,10240,20480]")) == ["20480"]
    with pytest.raises(FFNZooError, match="objective=clm but this command has objective=mlm"):
        mlm = compose(["model=tiny", "data.batch_size=16", "optim.schedule=wsd", "optim.warmup=2",
                       "trainer.max_steps=40", "ladder.budgets=[5120,10240,20480]", "objective=mlm"])
        _open(tmp_path, plan_of(mlm), mlm)


def test_keeping_fewer_checkpoints_is_the_same_run_folder() -> None:
    """ladder.keep_checkpoints changes no number, so it is not in the run's folder name: a finished ladder run again
    with ``ladder.keep_checkpoints=needed ckpt_path=last`` finds its own folder (and is pruned), not a fresh one."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ffn_zoo.training.lifecycle.runs import register_resolvers
    from ffn_zoo.training.recipe.build import config_dir

    register_resolvers()
    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        def name(*extra: str) -> str:
            cfg = hydra_compose(config_name="train", overrides=["ffn=gelu", "seed=2", *extra], return_hydra_config=True)
            return cfg.hydra.job.override_dirname

        assert name("ladder.keep_checkpoints=needed", "ckpt_path=last") == name() == "ffn=gelu,seed=2"


def test_pace_says_what_is_left_at_the_ladders_own_pace() -> None:
    """Seconds per step over the pieces trained so far, a piece that trained nothing (resumed from its own
    checkpoint) left out; nothing to say when nothing is left."""
    now = [0.0]
    pace = Pace(clock=lambda: now[0])
    assert pace.line(10, "budget=1Mi") == "ladder   10 steps left (budget=1Mi next)"  # no piece timed yet
    now[0] = 100.0
    pace.piece_done(50)  # 2 s a step
    now[0] = 130.0
    pace.piece_done(0)  # its 30 s are not counted
    now[0] = 150.0
    pace.piece_done(10)  # 60 steps in 120 s
    assert pace.line(90, "budget=2Mi") == ("ladder   90 steps left (budget=2Mi next), ~3m at this ladder's pace of "
                                           "2.00 s/step")
    assert pace.line(0, "budget=2Mi") is None
