"""A ladder's checkpoints on disk (ladder/storage.py): which ones ``ladder.keep_checkpoints=needed`` deletes, and
how many files the banner's ladder disk line counts at the peak, played forward from what is on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ffn_zoo.training.ladder.plan import plan_ladder
from ffn_zoo.training.ladder.storage import disk_note, peak_files, prune, unneeded
from ffn_zoo.training.recipe.build import compose

GB = 10**9


@pytest.fixture(scope="module")
def plan():
    """budgets of 10, 20 and 40 steps (512 tokens a step): branch points 8, 16 and 32, the trunk to step 32."""
    optim = dict(compose(["optim.schedule=wsd", "optim.warmup=2", "optim.decay_fraction=0.2"]).optim)
    return plan_ladder(["5120", "10240", "20480"], optim, 512, 40)


def piece(folder: Path, *ckpts: str, steps: int | None = None) -> None:
    """A run folder with these checkpoint files (empty) and, given ``steps``, a finished metrics.json."""
    (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
    for name in ckpts:
        (folder / "checkpoints" / name).write_bytes(b"x" * 10)
    if steps is not None:
        (folder / "metrics.json").write_text(json.dumps({"status": "ok", "steps": steps}))


def names(root: Path, paths) -> set[str]:
    return {str(p.relative_to(root)) for p in paths}


def test_needed_keeps_what_a_resume_or_a_larger_ladder_reads(plan, tmp_path: Path) -> None:
    points = ("branch-step=8.ckpt", "branch-step=16.ckpt", "branch-step=32.ckpt")
    piece(tmp_path / "trunk", "last.ckpt", *points, steps=32)
    piece(tmp_path / "budget=5120", "last.ckpt", "best.ckpt", steps=10)  # finished
    piece(tmp_path / "budget=10240", "last.ckpt")  # stopped mid-way: resumes from its own last.ckpt
    assert names(tmp_path, unneeded(tmp_path, plan)) == {
        "trunk/checkpoints/last.ckpt", "budget=5120/checkpoints/last.ckpt", "budget=5120/checkpoints/best.ckpt",
        "trunk/checkpoints/branch-step=8.ckpt"}
    assert prune(tmp_path, plan) == 40
    left = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.ckpt")}
    assert left == {"trunk/checkpoints/branch-step=16.ckpt", "trunk/checkpoints/branch-step=32.ckpt",
                    "budget=10240/checkpoints/last.ckpt"}
    piece(tmp_path / "budget=10240", "best.ckpt", steps=20)
    piece(tmp_path / "budget=20480", "last.ckpt", "best.ckpt", steps=40)
    prune(tmp_path, plan)
    assert names(tmp_path, tmp_path.rglob("*.ckpt")) == {"trunk/checkpoints/branch-step=32.ckpt"}  # a grown ladder's


def test_a_trunk_short_of_its_plan_keeps_its_last(plan, tmp_path: Path) -> None:
    """A ladder being grown: the trunk finished an earlier, smaller plan and continues from its last checkpoint."""
    piece(tmp_path / "trunk", "last.ckpt", "branch-step=16.ckpt", steps=16)
    assert unneeded(tmp_path, plan) == []


@pytest.mark.parametrize("keep, peak", [("all", 3 + 1 + 3 * 2 + 1), ("needed", 6)])
def test_peak_of_a_fresh_ladder(plan, keep: str, peak: int, tmp_path: Path) -> None:
    """all: 3 branch points, the trunk's last, each branch's last and best, one being written. needed: the trunk's
    4 files, its last deleted; the first branch adds 2 on top of the 3 points (+ 1 being written), the most at once."""
    assert peak_files(tmp_path, plan, keep, save_last=True, save_best=True, trunk_validates=False) == peak


def test_peak_counts_from_what_is_on_disk(plan, tmp_path: Path) -> None:
    piece(tmp_path / "trunk", "last.ckpt", "branch-step=8.ckpt", "branch-step=16.ckpt", "branch-step=32.ckpt",
          steps=32)
    piece(tmp_path / "budget=5120", "last.ckpt", "best.ckpt", steps=10)
    assert peak_files(tmp_path, plan, "all", True, True, False) == 2 * 2 + 1
    assert peak_files(tmp_path, plan, "all", True, False, False) == 2 + 1  # checkpoint.save_best=false
    assert peak_files(tmp_path, plan, "needed", True, True, False) == 2 + 1


def test_the_banner_line(plan, tmp_path: Path) -> None:
    note = disk_note(tmp_path, plan, "all", True, True, False)
    assert note(10**6, 100 * GB) is None  # small checkpoints with room: quiet
    assert note(GB, 100 * GB).startswith("ladder: its checkpoints still to come need ~11.00 GB at their peak (11 of")
    short = note(GB, 8 * GB)
    assert short.endswith("8.00 GB free; NOT ENOUGH: set ladder.keep_checkpoints=needed (~6.00 GB at its peak)")
    assert note(GB, 2 * GB).endswith("NOT ENOUGH: free space or set ladder.keep_checkpoints=needed")
    assert disk_note(tmp_path, plan, "needed", True, True, False)(GB, 2 * GB).endswith("NOT ENOUGH: free space")
