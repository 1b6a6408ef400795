"""Compare a sweep: run folders -> one row per variant (mean ± std over seeds, Δ log-ppl against a
baseline with a Welch-t 95% interval), written as Markdown/CSV/JSON, two PNGs and a TensorBoard
custom-scalars layout that puts every run's ``val/loss`` on one chart.

    ffn-zoo-compare logs/multiruns/<time>            # or any run folders
    ffn-zoo-compare logs/multiruns/<time> --baseline relu --paper
    python -m ffn_zoo.analysis.compare logs/multiruns/<time>   # the same
    ffn-zoo-compare d128/ d256/ d512/   # budget ladders of several widths: + crossing_vs_width.csv and .png
    ffn-zoo-compare experiments/.../d128 logs/d512/seed* --budgets 0.25Mi 0.5Mi 1Mi 2Mi   # a committed report too

How runs are grouped: ``runs.py``; the statistics: ``stats.py``; what each written file records of the command,
version and git revision that made it: ``provenance.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from ffn_zoo.analysis.compare.ladder import compare_ladders, has_ladders
from ffn_zoo.analysis.compare.plots import plot_curves, plot_delta_curves, plot_deltas, write_tensorboard_layout
from ffn_zoo.analysis.compare.provenance import provenance, snapshot, stamp_outputs
from ffn_zoo.analysis.compare.reports import parse_sets, report_file, runs_from_report
from ffn_zoo.analysis.compare.runs import Run, find_run_dirs, group_runs, is_run_dir, load_run
from ffn_zoo.analysis.compare.stats import delta_curves, row_warnings, summarize
from ffn_zoo.analysis.compare.tables import report_text, write_csv
from ffn_zoo.analysis.compare.trend import tokens_label
from ffn_zoo.analysis.compare.tuned import compare_tuned
from ffn_zoo.errors import ConfigError, FFNZooError


def compare(paths: Sequence[str | Path], out: Path | None = None, baseline: str = "gelu", paper: bool = False,
            band: str = "minmax", layout: bool = True, axis: str | None = None,
            budgets: Sequence[str | int] | None = None, sets: dict[str, Any] | None = None,
            prov: dict[str, Any] | None = None, fit: bool = False) -> dict[str, Any]:
    """Load, group, summarize and write everything; returns the JSON report. ``axis``: the config key ladders of
    several settings are set against (ladder.py; default model.d_model where the settings differ in it).
    A path may be a committed ladder comparison (its ladder.json or folder: reports.py), read back as its runs,
    with ``sets`` added to their config; ``budgets``: only the ladder branches at these budgets; ``prov``: the
    command, version and revision stamped into every file written (provenance.py; ``main`` passes its own);
    ``fit``: ladders also get L(D) = E + a·D^(−α) fitted per variant (fit.py: exponent or offset)."""
    runs, run_dirs, warnings, read_back = [], [], [], False
    for path in map(Path, paths):  # in the order given: the first path's ladders are setting 1
        if file := report_file(path):
            runs_of, warns = runs_from_report(file, sets)
            runs += runs_of
            warnings += warns
            read_back = True
            continue
        new = [d for d in find_run_dirs([path]) if d not in run_dirs]
        run_dirs += new
        runs += [load_run(d) for d in new]
    if sets and not read_back:
        raise ConfigError("--set adds config to committed ladder reports, and none was given")
    first = Path(paths[0])
    root = first if len(paths) == 1 and not is_run_dir(first) else (run_dirs[0].parent if run_dirs else first)
    out = Path(out) if out else (root if root.is_dir() else root.parent) / "compare"
    if budgets is not None:
        runs = only_budgets(runs, budgets)
    before = snapshot(out)
    if has_ladders(runs):  # budget ladders: a table per budget, Δ against the budget and its trend
        report = compare_ladders(runs, out, baseline, axis, warnings, fit=fit)
        if prov:
            stamp_outputs(out, prov, before)
        return report
    if read_back:
        raise ConfigError("committed ladder reports can only be compared as ladders (no ladder branch among them)")
    if fit:
        raise ConfigError(f"--fit fits loss against budget, and no ladder branch is among {len(runs)} run(s)")
    if axis:
        raise ConfigError(f"--axis {axis}: only budget ladders are set against a setting (no ladder branch among "
                          f"{len(runs)} run(s))")
    groups, settings, warnings = group_runs(runs)
    problems = [r for r in runs if r.status != "ok"]
    for s in range(len(settings)):
        if not any(g.setting == s and g.label == baseline for g in groups):
            warnings.append(f"setting {s + 1}: no finished {baseline!r} runs, so no Δ column "
                            f"(choose another with --baseline)")
    rows = summarize(groups, baseline, paper)
    extra_names = sorted({n for r in runs for n in r.metrics.get("extra_val") or []})
    extra = {n: summarize(groups, baseline, val_set=n) for n in extra_names}  # data.extra_val sets
    warnings += row_warnings(rows) + [w for n, set_rows in extra.items() for w in row_warnings(set_rows, f"{n}: ")]
    out.mkdir(parents=True, exist_ok=True)

    text = report_text(rows, settings, problems, warnings, paper, extra)
    (out / "table.md").write_text(text)
    write_csv(rows, out / "table.csv")
    for name, set_rows in extra.items():
        write_csv(set_rows, out / f"table_{name}.csv")
    report = {"rows": rows, "extra_val": extra, "settings": settings, "warnings": warnings,
              "problems": [{"path": str(r.path), "status": r.status, "error": r.error,
                            "ffn": r.config.get("ffn.name"), "seed": r.seed} for r in problems],
              "runs": [str(p) for p in run_dirs]}
    gaps = delta_curves(groups, baseline)  # Δ at every validation point, not only the last
    if gaps:
        write_csv(gaps, out / "delta_curves.csv")
    report["delta_curves"] = gaps
    (out / "table.json").write_text(json.dumps(report, indent=2, default=str) + "\n")

    pngs = []
    for s in range(len(settings)):
        suffix = "" if len(settings) == 1 else f"_setting{s + 1}"
        gs = [g for g in groups if g.setting == s]
        if plot_curves(gs, out / f"loss_curves{suffix}.png", band):
            pngs.append(out / f"loss_curves{suffix}.png")
        if plot_deltas([r for r in rows if r["setting"] == s + 1], out / f"delta{suffix}.png"):
            pngs.append(out / f"delta{suffix}.png")
        if plot_delta_curves([r for r in gaps if r["setting"] == s + 1], out / f"delta_curves{suffix}.png"):
            pngs.append(out / f"delta_curves{suffix}.png")
    report["pngs"] = [str(p) for p in pngs]
    if prov:
        stamp_outputs(out, prov, before)
    if layout:
        write_tensorboard_layout(root, run_dirs)
    print(text, end="")
    print(f"wrote {out}/table.md, table.csv, table.json" + "".join(f", table_{n}.csv" for n in extra)
          + (", delta_curves.csv" if gaps else "")
          + "".join(f", {p.name}" for p in pngs))
    if layout:
        print(f"TensorBoard: tensorboard --logdir {root}   (Custom Scalars tab: val/loss of every run on one chart)")
    return report


def only_budgets(runs: list[Run], budgets: Sequence[str | int]) -> list[Run]:
    """The ladder branches at the given budgets (``0.25Mi``, ``1M``, 262144), so ladders of several settings are
    fitted over one range; every other branch is left out. A budget no ladder has is a mistake: one line."""
    from ffn_zoo.training.ladder.plan import parse_tokens  # pure arithmetic; only --budgets needs it

    wanted = {parse_tokens(b, "--budgets") for b in budgets}
    branches = [r for r in runs if r.metrics.get("ladder_role") == "branch"]
    if not branches:
        raise ConfigError("--budgets picks budgets of ladders, and no ladder branch was found")
    have = {int(r.metrics["ladder_budget_tokens"]) for r in branches}
    if missing := sorted(wanted - have):
        raise ConfigError(f"--budgets: no ladder has a branch at {', '.join(f'{t:,}' for t in missing)} tokens; "
                          f"they have {', '.join(f'{tokens_label(t)} ({t:,})' for t in sorted(have))}")
    return [r for r in runs if r.metrics.get("ladder_role") != "branch"
            or int(r.metrics["ladder_budget_tokens"]) in wanted]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ffn-zoo-compare", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="sweep folders (logs/multiruns/<time>) and/or run folders")
    p.add_argument("--baseline", default="gelu", help="variant the Δ column is measured against (default gelu)")
    p.add_argument("--out", type=Path, help="output folder (default <sweep>/compare)")
    p.add_argument("--paper", action="store_true", help="add Shazeer 2020 Table 1 as a reference column")
    p.add_argument("--band", choices=("minmax", "std"), default="minmax", help="band around the mean curve")
    p.add_argument("--axis", help="ladders of several settings: the numeric config key to set the crossing and Δ "
                   "against (default model.d_model when they differ in it, else the only key they differ in)")
    p.add_argument("--budgets", nargs="+", metavar="TOKENS", help="ladders: compare only these budgets "
                   "(0.25Mi 0.5Mi 1Mi 2Mi), e.g. to fit ladders of several widths over one range")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets", help="config added to committed "
                   "ladder reports given as paths, for one from before they recorded it (--set model.d_model=128)")
    p.add_argument("--fit", action="store_true", help="ladders: fit L(D) = E + a·D^(-α) per variant (E shared) and "
                   "say whether the variant changes the exponent or the offset (ladder_fit.csv, ladder_fit_budgets.csv)")
    p.add_argument("--no-layout", action="store_true", help="do not write the TensorBoard custom-scalars layout")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    prov = provenance(argv)
    try:
        if len(args.paths) == 1 and (Path(args.paths[0]) / "tuning.json").is_file():  # ffn_zoo.tools.tune made it
            out = args.out or Path(args.paths[0]) / "compare"  # compare_tuned's default
            before = snapshot(out)
            compare_tuned(args.paths[0], args.baseline, out)
            stamp_outputs(out, prov, before)
            return 0
        compare(args.paths, args.out, args.baseline, args.paper, args.band, layout=not args.no_layout, axis=args.axis,
                budgets=args.budgets, sets=parse_sets(args.sets), prov=prov, fit=args.fit)
    except FFNZooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
