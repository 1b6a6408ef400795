"""A ladder's pieces on disk: which are finished, which checkpoints it keeps (``ladder.keep_checkpoints``), how much
room they take at their peak (the banner's ``disk`` line), and deleting the ones nothing will read again.

A BERT-base checkpoint with AdamW's moments is ~1.1 GB, and a ladder keeps one per branch point, the trunk's last,
and each branch's last and best: ~15 GB for four budgets. ``needed`` keeps only what a resume or a larger ladder
reads: a finished branch is never trained again (its metrics.json is its result), the finished trunk's last
checkpoint holds the state of its last branch point, and a grown ladder continues from that point alone.
"""

from __future__ import annotations

import json
from pathlib import Path

from ffn_zoo.errors import UnknownNameError
from ffn_zoo.training.ladder.plan import Plan
from ffn_zoo.training.lifecycle.runs import CKPT_DIR
from ffn_zoo.training.reporting.summary import BIG_CHECKPOINT, DiskNote, size_text

TRUNK = "trunk"
KEEP = ("all", "needed")  # ladder.keep_checkpoints
OWN = ("last.ckpt", "best.ckpt")  # what a run folder writes itself (lifecycle/checkpoint.py)


def check_keep(value: str) -> str:
    if value not in KEEP:
        raise UnknownNameError("ladder.keep_checkpoints", value, KEEP)
    return value


def metrics_of(folder: Path) -> dict:
    """A piece's (or the ladder's) metrics.json; empty when it has none yet."""
    try:
        return json.loads((folder / "metrics.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def finished(folder: Path) -> bool:
    return metrics_of(folder).get("status") == "ok"


def steps_done(folder: Path) -> int:
    return int(metrics_of(folder)["steps"])


def point(root: Path, step: int) -> Path:
    """The trunk's state at a branch point."""
    return root / TRUNK / CKPT_DIR / f"branch-step={step}.ckpt"


def _own(folder: Path) -> list[Path]:
    return [folder / CKPT_DIR / name for name in OWN]


def unneeded(root: Path, plan: Plan) -> list[Path]:
    """The checkpoints of ``root`` that no resume or larger ladder reads: a finished branch's own, the trunk's own once
    it has reached its last branch point, and the branch points of finished branches but the last one."""
    trunk = root / TRUNK
    out = _own(trunk) if finished(trunk) and steps_done(trunk) == plan.trunk_steps else []
    for rung in plan.rungs:
        if finished(root / rung.folder):
            out += _own(root / rung.folder)
            if rung.branch_step != plan.trunk_steps:
                out.append(point(root, rung.branch_step))
    return [p for p in out if p.is_file()]


def prune(root: Path, plan: Plan) -> int:
    """Delete :func:`unneeded`'s checkpoints; one line says what was freed. Returns the bytes freed."""
    paths = unneeded(root, plan)
    freed = 0
    for p in paths:
        freed += p.stat().st_size
        p.unlink()
    if paths:
        print(f"ladder   freed {size_text(freed)}: {len(paths)} checkpoint(s) no resume or larger ladder reads "
              f"(ladder.keep_checkpoints=needed)", flush=True)
    return freed


def peak_files(root: Path, plan: Plan, keep: str, save_last: bool, save_best: bool, trunk_validates: bool) -> int:
    """The most checkpoint files this ladder adds to the disk at once from now on, one being written included.

    Played forward from what is on disk: the trunk writes its missing branch points (those of unfinished branches),
    its last and (when it validates) its best; each unfinished branch writes its last and best (a branch always
    validates at its end); under ``needed`` each finished piece's unneeded checkpoints go (:func:`unneeded`).
    """
    def own(folder: Path, validates: bool) -> list[Path]:
        return [p for p, on in zip(_own(folder), (save_last, save_best and validates)) if on]

    trunk = root / TRUNK
    pending = [r for r in plan.rungs if not finished(root / r.folder)]
    pieces: list[tuple[list[Path], list[Path]]] = []  # per piece still to train: (what it writes, what needed deletes)
    if not (finished(trunk) and steps_done(trunk) == plan.trunk_steps):
        pieces.append(([*(point(root, r.branch_step) for r in pending), *own(trunk, trunk_validates)], _own(trunk)))
    for rung in pending:
        spent = [point(root, rung.branch_step)] if rung.branch_step != plan.trunk_steps else []
        pieces.append((own(root / rung.folder, True), [*_own(root / rung.folder), *spent]))
    on_disk = {p for p in (*_own(trunk), *(point(root, r.branch_step) for r in plan.rungs),
                           *(q for r in pending for q in _own(root / r.folder))) if p.is_file()}
    start, peak = len(on_disk), 0
    for written, deleted in pieces:
        on_disk.update(written)
        if written:
            peak = max(peak, len(on_disk) - start + 1)  # + the temporary of the write under way
        if keep == "needed":
            on_disk.difference_update(deleted)
    return peak


def disk_note(root: Path, plan: Plan, keep: str, save_last: bool, save_best: bool,
              trunk_validates: bool) -> DiskNote:
    """The banner's ladder ``disk`` line, given a checkpoint's size and the free space (``train.run`` knows them)."""
    files = peak_files(root, plan, keep, save_last, save_best, trunk_validates)
    lean = peak_files(root, plan, "needed", save_last, save_best, trunk_validates)

    def note(size: int, free: int) -> str | None:
        line = (f"ladder: its checkpoints still to come need ~{size_text(files * size)} at their peak ({files} of "
                f"~{size_text(size)}, ladder.keep_checkpoints={keep}), {size_text(free)} free")
        if files * size <= free:
            return line if size >= BIG_CHECKPOINT else None  # small checkpoints with room: nothing to say
        if keep == "all" and lean * size <= free:
            return line + f"; NOT ENOUGH: set ladder.keep_checkpoints=needed (~{size_text(lean * size)} at its peak)"
        return line + "; NOT ENOUGH: free space" + (" or set ladder.keep_checkpoints=needed" if keep == "all" else "")
    return note
