"""Loss-vs-budget ladders: one constant-lr trunk per run and a WSD cooldown branch per token budget.

Hägele et al. 2024 ("Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations"): a
warmup-stable-decay (WSD) run matches a cosine run of its length, and its stable phase does not depend on the
length. So one trunk at constant lr serves every budget B: from the trunk's state at the start of B's cooldown, a
branch decays the lr over B's last round(optim.decay_fraction × steps) steps and ends exactly where
``optim.schedule=wsd trainer.max_steps=<B's steps>`` ends (tests/smoke/test_ladder.py checks it bitwise). Cost:
the largest budget plus the other budgets' cooldowns, instead of the sum of the budgets.

Why a branch equals the plain run:
- the lr: before its cooldown a WSD schedule *is* the constant one (``recipe/optim.py``, ``lr_multiplier``). The
  warm-up must not depend on the budget, so ``optim.warmup`` counts steps, or is a fraction of the *smallest* budget
  (that rung is then the default plain run). After the restore a branch sets the lr from its own schedule
  (:class:`BranchSchedule`): the checkpoint holds the trunk's constant lr.
- the data: batch k is a function of (seed, k) alone (``StepSampler``, the stream), not of trainer.max_steps;
- the training RNG stream (dropout), optimizer moments and loop counters come from the checkpoint
  (``lifecycle/checkpoint.py``); validation draws nothing from the training stream. ``ladder.validate=ends`` (the
  default) validates only where a budget is scored: each branch once, at its budget; the trunk, where no budget ends,
  never. ``every``: every piece every trainer.val_check_interval steps and at its end, as any run (full curves).
  The scored numbers and the training are the same either way; ``ends`` spends validation time only on them.

Layout of ``<run>/`` (the Hydra job folder):
    ladder.json        the plan (budgets -> steps, warm-up, cooldowns); marks the folder as a ladder
    trunk/             a run folder (constant lr to the last branch point); checkpoints/branch-step=<k>.ckpt
    budget=<B>/        a run folder per budget: metrics.json (+ ladder_budget_tokens, ladder_parent), TensorBoard
                       events from its branch step on, .hydra/ with the config of the equivalent plain WSD run
    metrics.json       the ladder's summary (ladder_role: ladder)
``ladder.keep_checkpoints=needed`` deletes, as pieces finish, the checkpoints no resume or larger ladder reads
(``storage.py``); ``all`` (the default) keeps every one.
A ladder stopped anywhere continues in its own folder when its command runs again with ``ckpt_path=last`` (or
the resume command it printed): finished pieces are kept, a started piece resumes from its own last.ckpt (a
trunk killed outright with none newer than its newest branch point, from that point).
A finished ladder grows the same way, given larger budgets: its trunk continues from its last branch point (a
mid-training state, like any resume point) and only the new cooldowns run (:func:`_added_rungs` says which can).
"""

from __future__ import annotations

import copy
import json
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import lightning as L
from omegaconf import DictConfig, OmegaConf

from ffn_zoo.atomic import atomic_write, write_json
from ffn_zoo.errors import CheckpointError
from ffn_zoo.training.lifecycle.checkpoint import MUST_MATCH, Checkpointing, first_difference, load_checkpoint
from ffn_zoo.training.ladder.plan import Plan, Rung, check_validate, describe_plan, plan_of
from ffn_zoo.training.ladder.storage import (TRUNK, check_keep, disk_note, finished, metrics_of, point, prune,
                                             steps_done)
from ffn_zoo.training.lifecycle.runs import CKPT_DIR, resume_point
from ffn_zoo.training.reporting.progress import duration, time_line
from ffn_zoo.training.reporting.summary import DiskNote

MANIFEST = "ladder.json"
STOPS = ("debug.kill_at_step", "debug.sigterm_at")  # the tests' stops: a continued ladder runs without them


class BranchPoints(L.Callback):
    """Keeps the trunk's whole training state at the start of each rung's cooldown (``branch-step=<k>.ckpt``).

    Runs after TrainRNG (it is appended after the built-in callbacks), so the saved RNG stream is the one the
    next step draws from; written atomically by :class:`Checkpointing`, like ``last.ckpt``.
    """

    def __init__(self, paths: Mapping[int, Path]) -> None:
        self.paths = dict(paths)

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        path = self.paths.get(trainer.global_step)
        if path is not None and not path.is_file():
            checkpoints = next(cb for cb in trainer.callbacks if isinstance(cb, Checkpointing))
            checkpoints.save(trainer, path.name)


class BranchSchedule(L.Callback):
    """After the restore, the lr at the restored step from this run's own schedule.

    The checkpoint holds the trunk's lr for the next step (the constant peak); the branch's cooldown may already
    have begun there. LambdaLR would only apply its own factor after the first step.
    """

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for config in trainer.lr_scheduler_configs:
            s = config.scheduler
            for group, base, factor in zip(s.optimizer.param_groups, s.base_lrs, s.lr_lambdas):
                group["lr"] = base * factor(s.last_epoch)  # LambdaLR.get_lr's own expression
            s._last_lr = [group["lr"] for group in s.optimizer.param_groups]


# ---------------------------------------------------------------------------------------------- orchestration


def _with(cfg: DictConfig, changes: Mapping[str, Any]) -> DictConfig:
    out = copy.deepcopy(cfg)
    for key, value in changes.items():
        OmegaConf.update(out, key, value)
    return out


def piece_changes(plan: Plan, rung: Rung | None, ckpt: Path | None, validate: str = "every",
                  val_check_interval: int = 1) -> dict[str, Any]:
    """The overrides that make the ladder's config the trunk's (``rung`` None) or a rung's plain WSD run.
    ``validate="ends"`` (``ladder.validate``): a branch validates once, at its budget (the trunk not at all:
    ``_trunk`` trains it with ``validate=False``, so its interval is left as configured)."""
    end = rung.steps if rung else plan.trunk_steps
    changes = {"trainer.max_steps": end, "optim.schedule": "wsd" if rung else "constant", "optim.warmup": plan.warmup,
               "ladder.budgets": None, "ckpt_path": str(ckpt) if ckpt else None}
    if check_validate(validate) == "ends" and rung:  # validation never touches training: the same weights either way
        # the end validated as under "every": inside the loop where the interval divides it, else by the closing
        # validation (end + 1 is never reached), so TensorBoard draws the point at the same step in both modes
        changes["trainer.val_check_interval"] = end if end % val_check_interval == 0 else end + 1
    return changes


def _write_hydra(folder: Path, cfg: DictConfig, changes: Mapping[str, Any]) -> None:
    """``.hydra/config.yaml`` and ``overrides.yaml`` of a piece, as Hydra writes them for a run."""
    from hydra.core.hydra_config import HydraConfig

    task = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
    own = [a for a in task if a.split("=")[0].lstrip("+~") not in (*changes, *STOPS)]
    overrides = own + [f"{k}={'null' if v is None else v}" for k, v in changes.items()]
    (folder / ".hydra").mkdir(parents=True, exist_ok=True)
    OmegaConf.save(cfg, folder / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(overrides), folder / ".hydra" / "overrides.yaml")


def _settings(cfg: DictConfig) -> dict[str, Any]:
    """What a continued ladder must share with the one it continues: network, data, seed, optimizer and objective;
    under MLM the ``mlm`` settings too (``mlm.mask_seed`` fixes the validation masks every budget is scored on)."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    settings = {k: resolved.get(k) for k in (*MUST_MATCH, "optim", "objective")}
    if settings["objective"] == "mlm":
        settings["mlm"] = resolved.get("mlm")
    return settings


def _open(root: Path, plan: Plan, cfg: DictConfig) -> list[str]:
    """Write the plan, or check that the ladder being continued had these settings and this plan, or one this
    plan extends; return the labels of the budgets it adds."""
    manifest = root / MANIFEST
    mine = json.loads(json.dumps({"plan": plan.as_dict(), "settings": _settings(cfg)}, default=str))  # as saved
    if not manifest.is_file():
        write_json(manifest, mine)
        return []
    saved = json.loads(manifest.read_text())
    objective = saved["settings"].setdefault("objective", "clm")  # manifests from before MLM ladders: all causal
    if objective != mine["settings"]["objective"]:
        raise CheckpointError(f"ckpt_path: the ladder in {root} was trained with objective={objective} but this "
                              f"command has objective={mine['settings']['objective']}; a ladder keeps its objective "
                              f"(start the other one in a new folder)")
    diff = first_difference(saved["settings"], mine["settings"])  # data.cache_dir and the like may differ
    if diff:
        raise CheckpointError(f"ckpt_path: the ladder in {root} has {diff[0]}={diff[1]} but this command has "
                              f"{diff[0]}={diff[2]}; continue it with its own settings")
    if saved["plan"] == mine["plan"]:
        return []
    added = _added_rungs(saved["plan"], mine["plan"], root)
    write_json(manifest, mine)  # the grown plan: the next continuation checks against it
    return added


def _added_rungs(saved: dict[str, Any], mine: dict[str, Any], root: Path) -> list[str]:
    """A continued ladder may grow: it keeps every rung it has and adds budgets whose cooldowns start after its
    trunk's end (the trunk continues from its last branch point; its state at earlier steps was not kept)."""
    where = f"ckpt_path: the ladder in {root}"
    for key, unit in (("warmup", "warm-up steps"), ("tokens_per_step", "tokens a step")):
        if saved[key] != mine[key]:
            raise CheckpointError(f"{where} has {saved[key]} {unit} but this command {mine[key]}; a ladder grows "
                                  f"only with the same warm-up and batch (a warm-up fraction is of the smallest "
                                  f"budget: keep that one)")
    dropped = [r["label"] for r in saved["rungs"] if r not in mine["rungs"]]
    if dropped:
        raise CheckpointError(f"{where} has budgets {', '.join(r['label'] for r in saved['rungs'])}; this command's "
                              f"ladder.budgets drops or changes {', '.join(dropped)}. A continued ladder keeps "
                              f"every budget it has and may add larger ones")
    end = max(r["branch_step"] for r in saved["rungs"])
    added = [r for r in mine["rungs"] if r not in saved["rungs"]]
    inside = [r for r in added if r["branch_step"] <= end]
    if inside:
        r = inside[0]
        raise CheckpointError(f"{where} has its trunk trained to step {end}; budget {r['label']}'s cooldown would "
                              f"start at step {r['branch_step']}, inside it, where no state was kept. Add only "
                              f"budgets whose cooldown starts after step {end}, or run {r['label']} as a ladder "
                              f"of its own")
    return [r["label"] for r in added]


def _reopen_trunk(folder: Path, step: int) -> None:
    """Continue a finished trunk: its state at its last branch point (kept mid-training, as any resume point)
    becomes ``last.ckpt``, unless an extension already under way wrote a later one."""
    last = folder / CKPT_DIR / "last.ckpt"
    if last.is_file() and int(load_checkpoint(last)["global_step"]) > step:
        return
    kept = point(folder.parent, step)
    if not kept.is_file():
        raise CheckpointError(f"ladder: {kept} (the trunk's state at its end, step {step}) is missing, so the "
                              f"trunk cannot be continued; start the larger ladder in a new folder")
    _copy(kept, last)


def _copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as f:
        atomic_write(dst, lambda out: shutil.copyfileobj(f, out))


def _trunk(cfg: DictConfig, plan: Plan, root: Path, train_one: Callable[..., dict[str, Any]]) -> int:
    """Train the trunk (from where it stopped, if it did); the steps it trained."""
    folder = root / TRUNK
    points = {r.branch_step: point(root, r.branch_step) for r in plan.rungs}
    last = folder / CKPT_DIR / "last.ckpt"
    resume, step = (last, int(load_checkpoint(last)["global_step"])) if last.is_file() else (None, -1)
    if resume is not None:
        at = points.get(step)
        if at is not None and not at.is_file():  # stopped right at a branch point, before keeping it
            _copy(resume, at)
    newest = max((k for k, p in points.items() if p.is_file()), default=-1)
    if newest > step:  # killed outright with no last.ckpt since its newest branch point, a full training state too
        resume, step = points[newest], newest
    if resume is not None:
        print(f"ladder   trunk resumes at step {step}" + ("" if resume == last else " (its newest branch point: no "
              "later last.ckpt)"), flush=True)
    changes = piece_changes(plan, None, resume, cfg.ladder.validate, cfg.trainer.val_check_interval)
    trunk_cfg = _with(cfg, changes)
    _write_hydra(folder, trunk_cfg, changes)
    train_one(trunk_cfg, folder, callbacks=[BranchPoints(points)], extra_metrics={
        "ladder_role": "trunk", "ladder_budgets_tokens": [r.tokens for r in plan.rungs],
        "ladder_branch_steps": [r.branch_step for r in plan.rungs]},
        validate=cfg.ladder.validate == "every",  # ends: no budget is scored on the trunk, so it never validates
        disk_note=_disk_note(cfg, plan, root))
    return plan.trunk_steps - max(step, 0)


def _branch(cfg: DictConfig, plan: Plan, rung: Rung, root: Path, train_one: Callable[..., dict[str, Any]]) -> int:
    """Train one budget's cooldown; the steps it trained (0 where it resumed from its own checkpoint, whose step
    only that file knows: the pace then skips it)."""
    folder = root / rung.folder
    parent = point(root, rung.branch_step)
    own = folder / CKPT_DIR / "last.ckpt"
    start = own if own.is_file() else parent  # a started branch resumes from its own checkpoint
    if not start.is_file():
        raise CheckpointError(f"ladder: {parent} (the trunk's state at step {rung.branch_step}) is missing; "
                              f"delete {root / TRUNK} to train the trunk again")
    changes = piece_changes(plan, rung, start, cfg.ladder.validate, cfg.trainer.val_check_interval)
    branch_cfg = _with(cfg, changes)
    _write_hydra(folder, branch_cfg, changes)
    train_one(branch_cfg, folder, callbacks=[BranchSchedule()], extra_metrics={
        "ladder_role": "branch", "ladder_budget": rung.label, "ladder_budget_tokens": rung.tokens,
        "ladder_branch_step": rung.branch_step, "ladder_cooldown_steps": rung.cooldown, "ladder_parent": str(parent)},
        disk_note=_disk_note(cfg, plan, root))
    return rung.cooldown if start == parent else 0


class Pace:
    """The ladder's own pace over the pieces this invocation trained (validation, restores and checkpoints
    included, unlike a piece's tokens/s), to say after each piece what is left and about when it ends."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock, self.steps, self.seconds = clock, 0, 0.0
        self._since = clock()

    def piece_done(self, steps: int) -> None:
        now = self.clock()
        if steps > 0:
            self.steps, self.seconds = self.steps + steps, self.seconds + now - self._since
        self._since = now

    def line(self, left: int, upcoming: str) -> str | None:
        """``ladder   179 steps left (budget=0.5Mi next), ~15m at this ladder's pace of 5.10 s/step``"""
        if left <= 0:
            return None
        line = f"ladder   {left} steps left ({upcoming} next)"
        if self.steps:
            per = self.seconds / self.steps
            line += f", ~{duration(left * per)} at this ladder's pace of {per:.2f} s/step"
        return line


def _disk_note(cfg: DictConfig, plan: Plan, root: Path) -> DiskNote:
    c = cfg.checkpoint
    return disk_note(root, plan, cfg.ladder.keep_checkpoints, c.save_last, c.save_best, cfg.ladder.validate == "every")


def run_ladder(cfg: DictConfig, run_dir: Path, train_one: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Train a whole ladder (``train_one`` is ``ffn_zoo.train.run``); write its summary and return it."""
    started = time.time()
    check_validate(cfg.ladder.validate)  # a typo fails before any training
    lean = check_keep(cfg.ladder.keep_checkpoints) == "needed"
    plan = plan_of(cfg)
    found = resume_point(cfg.ckpt_path, Path(cfg.log_dir), run_dir, marker=MANIFEST, kind="ladder")
    root = run_dir if found is None else found.parent  # a new ladder, or the one ckpt_path names, to continue it
    added = _open(root, plan, cfg)
    for line in describe_plan(plan, cfg.optim):
        print(line, flush=True)
    if cfg.ladder.validate == "ends":
        print("ladder   validates only where a budget is scored: each branch at its budget, the trunk never "
              "(ladder.validate=ends; every: full curves)", flush=True)
    if root != run_dir:
        print(f"ladder   continuing {root}", flush=True)

    trunk = root / TRUNK
    done = steps_done(trunk) if finished(trunk) else None
    if done is not None and done < plan.trunk_steps:  # a ladder grown by larger budgets
        print(f"ladder   adds budgets {', '.join(added) or '(none)'}: the trunk continues from step {done} to "
              f"{plan.trunk_steps}", flush=True)
        _reopen_trunk(trunk, done)
    trained = []  # the pieces this invocation trains (the time line's)
    pace = Pace()
    if done is None or done < plan.trunk_steps:
        pace.piece_done(_trunk(cfg, plan, root, train_one))
        trained.append(TRUNK)
    if lean:
        prune(root, plan)  # also what a ladder first trained with keep_checkpoints=all no longer needs
    left = sum(r.cooldown for r in plan.rungs if not finished(root / r.folder))  # the branches' steps still to run
    for rung in plan.rungs:
        if finished(root / rung.folder):
            print(f"ladder   {rung.folder} finished before; kept", flush=True)
            continue
        if trained and (line := pace.line(left, rung.folder)):
            print(line, flush=True)
        pace.piece_done(_branch(cfg, plan, rung, root, train_one))
        left -= rung.cooldown
        trained.append(rung.folder)
        if lean:
            prune(root, plan)

    pieces = {f: json.loads((root / f / "metrics.json").read_text()) for f in [TRUNK, *(r.folder for r in plan.rungs)]}
    summary = {
        "status": "ok", "ladder_role": "ladder", "ffn": cfg.ffn.name, "seed": cfg.seed, "model": cfg.model.name,
        "data": cfg.data.name, **plan.as_dict(), "trunk_steps": plan.trunk_steps, "steps_trained": plan.steps_trained,
        "tokens_trained": plan.steps_trained * plan.tokens_per_step,
        "tokens_as_separate_runs": sum(r.steps for r in plan.rungs) * plan.tokens_per_step,
        "wall_s": time.time() - started,  # this invocation; each piece's own time is in its metrics.json
        "pieces": [{"folder": f, "steps": m.get("steps"), "val_loss": m.get("val_loss"), "wall_s": m.get("wall_s")}
                   for f, m in pieces.items()],
    }
    summary["time_s"] = ladder_time([pieces[f] for f in trained], summary["wall_s"])
    before = metrics_of(root)
    if not trained and before.get("time_s"):  # a finished ladder run again: keep the time of the runs that trained it
        summary["wall_s"], summary["time_s"] = before["wall_s"], before["time_s"]
    write_json(root / "metrics.json", summary)
    for r in plan.rungs:
        m = pieces[r.folder]
        print(f"ladder   {r.folder}: val/loss {m['val_loss']:.4f}, val/ppl {m['val_ppl']:.2f} after {r.steps} steps",
              flush=True)
    if root != run_dir and _only_hydra_files(run_dir):
        shutil.rmtree(run_dir)  # this invocation's fresh folder: the ladder lives on in its own
    print(f"ladder   done in {time.time() - started:.0f} s -> {root}", flush=True)  # this invocation's
    print(f"ladder   time: {time_line(summary['time_s'])}", flush=True)
    return summary


def ladder_time(pieces: Iterable[Mapping[str, Any]], wall_s: float) -> dict[str, float]:
    """The time lines of the pieces this invocation trained, summed, with the ladder's own work between them (plans,
    copies, the summary) under other."""
    mine = [p["time_s"] for p in pieces if isinstance(p.get("time_s"), dict)]
    total: dict[str, float] = {}
    for split in mine:
        for k, v in split.items():
            total[k] = total.get(k, 0.0) + v
    if not total:
        return {"total": wall_s, "train_steps": 0.0, "validation": 0.0, "checkpoints": 0.0, "start_up": 0.0,
                "other": wall_s, "masking": 0.0}
    total["other"] += max(0.0, wall_s - total["total"])
    total["total"] = max(wall_s, total["total"])
    return total


def _only_hydra_files(folder: Path) -> bool:
    return folder.is_dir() and all(p.name == ".hydra" or p.suffix == ".log" for p in folder.iterdir())

