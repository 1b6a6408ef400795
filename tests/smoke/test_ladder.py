"""Budget ladders on model=tiny, CPU, 1 thread: a branch ends bitwise where the plain WSD run of its length ends
(weights, optimizer moments, lr schedule, validation points, metrics.json), and a ladder SIGKILLed in its trunk or in
a branch continues, with ckpt_path=last, to the same result in its own folder."""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest
import torch

from tests.helpers import TIMING, TrainOnce, assert_same_state, only_run, run_train, tiny
from tests.helpers import results as metrics_without

pytestmark = pytest.mark.smoke

# 16 × 32 = 512 tokens a step: budgets of 10, 20 and 40 steps; cooldowns 2, 4, 8 (decay_fraction 0.2); the warm-up
# fraction 0.2 is of the smallest budget, 2 steps for every rung. dropout > 0: the training RNG stream matters.
LADDER = tiny("trainer.max_steps=40", "trainer.val_check_interval=5", "checkpoint.every_n_steps=3",
              "model.dropout=0.1", "optim.schedule=wsd", "optim.warmup=0.2", "optim.decay_shape=1-sqrt",
              "ladder.budgets=[5120,10240,20480]", "ladder.validate=every")  # full curves: compared point by point
BUDGETS = {"5120": 10, "10240": 20, "20480": 40}
IGNORE = TIMING | {"ladder_parent"}  # the parent checkpoint's path differs between two ladders


def results(run_dir: Path) -> dict:
    return metrics_without(run_dir, IGNORE)


def val_points(run_dir: Path) -> dict[int, float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    ea = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    ea.Reload()
    return {e.step: e.value for e in ea.Scalars("val/loss")}


@pytest.fixture(scope="module")
def ladder(train_once: TrainOnce) -> Path:
    return train_once("ladder", LADDER)


def test_layout_and_cost(ladder: Path) -> None:
    plan = json.loads((ladder / "ladder.json").read_text())["plan"]
    assert [(r["steps"], r["cooldown"], r["branch_step"]) for r in plan["rungs"]] == [(10, 2, 8), (20, 4, 16), (40, 8, 32)]
    assert plan["warmup"] == 2
    trunk = json.loads((ladder / "trunk/metrics.json").read_text())
    assert trunk["ladder_role"] == "trunk" and trunk["steps"] == 32  # constant lr up to the last branch point
    summary = json.loads((ladder / "metrics.json").read_text())
    assert summary["steps_trained"] == 32 + 2 + 4 + 8 and summary["tokens_as_separate_runs"] == (10 + 20 + 40) * 512
    for label, steps in BUDGETS.items():
        m = json.loads((ladder / f"budget={label}/metrics.json").read_text())
        assert m["status"] == "ok" and m["steps"] == steps and m["ladder_budget_tokens"] == int(label)
        assert Path(m["ladder_parent"]).is_file() and m["ladder_parent"].endswith(f"branch-step={m['ladder_branch_step']}.ckpt")
        assert list((ladder / f"budget={label}").glob("events.out.tfevents.*"))  # a normal run folder
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(ladder / f"budget={label}/.hydra/config.yaml")  # the plain run it stands for
        assert cfg.trainer.max_steps == steps and cfg.optim.schedule == "wsd" and cfg.optim.warmup == 2


@pytest.mark.parametrize("label", ["10240", "20480"])  # mid-trunk branch point, and the trunk's last step
def test_branch_equals_plain_wsd_run(ladder: Path, label: str, tmp_path: Path) -> None:
    steps = BUDGETS[label]
    plain = [a for a in LADDER if not a.startswith("ladder.")]
    run_train(tiny(*plain, f"trainer.max_steps={steps}", "optim.warmup=2"), tmp_path)
    plain_dir, branch = only_run(tmp_path), ladder / f"budget={label}"
    mine = {k: v for k, v in results(branch).items() if not k.startswith("ladder_")}
    assert mine == results(plain_dir)  # val loss/ppl, steps, tokens seen, instruments, ...
    assert_same_state(branch / "checkpoints/last.ckpt", plain_dir / "checkpoints/last.ckpt")
    ca, cb = (torch.load(d / "checkpoints/last.ckpt", weights_only=True) for d in (branch, plain_dir))
    assert ca["lr_schedulers"] == cb["lr_schedulers"]
    assert [g["lr"] for g in ca["optimizer_states"][0]["param_groups"]] == \
        [g["lr"] for g in cb["optimizer_states"][0]["param_groups"]]
    # every validation the branch ran is one the plain run ran at the same step, with the same value
    branch_points, plain_points = val_points(branch), val_points(plain_dir)
    assert branch_points and all(plain_points[s] == v for s, v in branch_points.items())
    start = json.loads((branch / "metrics.json").read_text())["ladder_branch_step"]
    assert sorted(branch_points) == [s for s in sorted(plain_points) if s >= start]


def test_sigterm_after_the_trunks_last_step_starts_no_branch(ladder: Path, tmp_path: Path) -> None:
    """The trunk is whole when the signal lands after its last step (32): no branch may start (the job was asked to
    stop), and ckpt_path=last then finishes the ladder as if nothing had happened."""
    stopped = run_train([*LADDER, "debug.sigterm_at=32"], tmp_path, check=False)
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stderr[-2000:]
    root = only_run(tmp_path)
    assert json.loads((root / "trunk/metrics.json").read_text())["status"] == "ok"
    assert not any((root / f"budget={label}/metrics.json").exists() for label in BUDGETS)
    run_train([*LADDER, "ckpt_path=last"], tmp_path)
    for label in BUDGETS:
        assert results(root / f"budget={label}") == results(ladder / f"budget={label}"), label


@pytest.mark.parametrize("kill_at, every", [(16, 4), (36, 3), (12, "null")],
                         ids=["trunk-at-branch-point", "in-a-branch", "trunk-without-last"])
def test_killed_ladder_continues_where_it_stopped(ladder: Path, kill_at: int, every: int, tmp_path: Path) -> None:
    args = tiny(*LADDER, f"checkpoint.every_n_steps={every}")
    killed = run_train([*args, f"debug.kill_at_step={kill_at}"], tmp_path, check=False)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    root = only_run(tmp_path)
    assert not (root / "metrics.json").exists()

    again = run_train([*args, "ckpt_path=last"], tmp_path)
    assert f"ladder   continuing {root}" in again.stdout
    assert only_run(tmp_path) == root  # continued in place; this invocation's empty folder is gone
    if every == "null":  # no last.ckpt before the end: the trunk goes on from its newest branch point, step 8
        assert "trunk resumes at step 8 (its newest branch point" in again.stdout
    if kill_at > 32:  # killed in budget=20480's cooldown: the finished branches are kept, not retrained
        assert "budget=5120 finished before; kept" in again.stdout
        assert "at step 36" in again.stdout  # budget=20480 resumes from its own last.ckpt
    for label in BUDGETS:
        assert results(root / f"budget={label}") == results(ladder / f"budget={label}")
        assert_same_state(root / f"budget={label}/checkpoints/last.ckpt", ladder / f"budget={label}/checkpoints/last.ckpt")


def test_a_grown_ladder_equals_the_ladder_planned_whole(ladder: Path, tmp_path: Path) -> None:
    """budgets 5120, 10240 (trunk to step 16), then the same ladder given 20480 too: the trunk goes on from its
    step-16 state and the new branch ends bitwise where the fixture's (planned whole) does; the rest is kept."""
    changed = {"trainer.max_steps": "20", "ladder.budgets": "[5120,10240]"}
    small = [a for a in LADDER if a.split("=", 1)[0] not in changed] + [f"{k}={v}" for k, v in changed.items()]
    run_train(small, tmp_path)
    root = only_run(tmp_path)
    assert json.loads((root / "trunk/metrics.json").read_text())["steps"] == 16

    grown = run_train([*LADDER, f'ckpt_path="{root}"'], tmp_path)  # the full plan, in the small ladder's folder
    assert "ladder   adds budgets 20480: the trunk continues from step 16 to 32" in grown.stdout
    assert "budget=5120 finished before; kept" in grown.stdout and "budget=10240 finished before; kept" in grown.stdout
    assert only_run(tmp_path) == root
    assert json.loads((root / "trunk/metrics.json").read_text())["steps"] == 32
    assert json.loads((root / "ladder.json").read_text())["plan"] == json.loads((ladder / "ladder.json").read_text())["plan"]
    for label in BUDGETS:
        assert results(root / f"budget={label}") == results(ladder / f"budget={label}")
        assert_same_state(root / f"budget={label}/checkpoints/last.ckpt", ladder / f"budget={label}/checkpoints/last.ckpt")


def test_keeping_only_needed_checkpoints_changes_no_number(ladder: Path, tmp_path: Path) -> None:
    """ladder.keep_checkpoints=needed: the ladder [5120, 10240] ends with one checkpoint, its last branch point, and
    the same numbers; grown to the fixture's plan from that point alone, it ends as the fixture did, again with one."""
    changed = {"trainer.max_steps": "20", "ladder.budgets": "[5120,10240]", "ladder.keep_checkpoints": "needed"}
    small = [a for a in LADDER if a.split("=", 1)[0] not in changed] + [f"{k}={v}" for k, v in changed.items()]
    run = run_train(small, tmp_path)
    assert "ladder   freed" in run.stdout
    root = only_run(tmp_path)
    assert [p.relative_to(root).as_posix() for p in root.rglob("*.ckpt")] == ["trunk/checkpoints/branch-step=16.ckpt"]
    grown = run_train([*LADDER, "ladder.keep_checkpoints=needed", f'ckpt_path="{root}"'], tmp_path)
    assert "ladder   adds budgets 20480: the trunk continues from step 16 to 32" in grown.stdout
    assert [p.relative_to(root).as_posix() for p in root.rglob("*.ckpt")] == ["trunk/checkpoints/branch-step=32.ckpt"]
    for label in BUDGETS:
        assert results(root / f"budget={label}") == results(ladder / f"budget={label}")

    # the fixture's finished ladder (every checkpoint kept) run again with needed, as a requeue would: pruned, and its
    # summary keeps the time of the run that trained it
    done = tmp_path / "done"
    shutil.copytree(ladder, done)
    summary = json.loads((done / "metrics.json").read_text())
    again = run_train([*LADDER, "ladder.keep_checkpoints=needed", f'ckpt_path="{done}"'], tmp_path)
    assert again.stdout.count("finished before; kept") == 3 and "ladder   freed" in again.stdout
    assert [p.relative_to(done).as_posix() for p in done.rglob("*.ckpt")] == ["trunk/checkpoints/branch-step=32.ckpt"]
    assert json.loads((done / "metrics.json").read_text())["time_s"] == summary["time_s"]


def test_validating_only_where_scored_changes_no_number(ladder: Path, tmp_path: Path) -> None:
    """ladder.validate=ends (the default): each branch validates once, at its budget, and the trunk never (the
    fixture's trunk, every 5 steps: 7 times); every budget's metrics.json and final state are the fixture's:
    validation never touched training."""
    run = run_train([a for a in LADDER if a != "ladder.validate=every"], tmp_path)  # the default
    assert "ladder   validates only where a budget is scored" in run.stdout
    assert "not validated (a ladder's trunk" in run.stdout
    lefts = [line for line in run.stdout.splitlines() if " steps left (" in line]  # the ladder's own pace
    assert [line.split(", ~")[0] for line in lefts] == [
        "ladder   14 steps left (budget=5120 next)", "ladder   12 steps left (budget=10240 next)",
        "ladder   8 steps left (budget=20480 next)"]
    assert all("at this ladder's pace of " in line for line in lefts)
    root = only_run(tmp_path)
    assert len(val_points(ladder / "trunk")) == 7
    trunk = json.loads((root / "trunk/metrics.json").read_text())
    assert trunk["status"] == "ok" and trunk["steps"] == 32 and trunk["val_loss"] is None
    assert trunk["time_s"]["validation"] == 0.0
    with pytest.raises(KeyError):
        val_points(root / "trunk")  # no val/loss tag at all
    for piece in (f"budget={label}" for label in BUDGETS):  # one point: the fixture's last, same step
        every = val_points(ladder / piece)
        assert every and val_points(root / piece) == {max(every): every[max(every)]}
    for label in BUDGETS:
        branch = root / f"budget={label}"
        assert results(branch) == results(ladder / f"budget={label}")  # val/loss, ppl, extra sets, instruments, ...
        assert_same_state(branch / "checkpoints/last.ckpt", ladder / f"budget={label}/checkpoints/last.ckpt")
    bad = run_train([*LADDER, "ladder.validate=end"], tmp_path, check=False)
    assert bad.returncode != 0 and "unknown ladder.validate 'end'; valid: ends, every" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_sweep_of_ladders_then_compare(tmp_path: Path) -> None:
    """In a -m sweep every job is a ladder; compare then tables each budget and fits Δ against it."""
    from ffn_zoo.analysis.compare import compare

    args = tiny("trainer.max_steps=20", "trainer.val_check_interval=10", "checkpoint.every_n_steps=null",
                "optim.schedule=wsd", "ladder.budgets=[5120,10240]")
    run_train(["-m", "ffn=gelu,swiglu", "seed=0,1", *args], tmp_path)
    (sweep,) = (tmp_path / "multiruns").iterdir()
    assert sorted(p.name for p in sweep.glob("*/budget=*")) == ["budget=10240"] * 4 + ["budget=5120"] * 4
    report = compare([sweep], layout=False)
    assert {(r["variant"], r["budget_tokens"], r["n"]) for r in report["budget_rows"]} == \
        {(v, t, 2) for v in ("gelu", "swiglu") for t in (5120, 10240)}
    (trend,) = report["trends"]
    assert trend["variant"] == "swiglu" and trend["seeds"] == 2 and trend["budgets"] == 2
    assert not report["problems"] and (sweep / "compare" / "ladder_delta.png").is_file()
