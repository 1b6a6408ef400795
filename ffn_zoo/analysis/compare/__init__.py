"""Compare a sweep: run folders -> one row per variant, tables, PNGs and a TensorBoard layout.

    runs    run folders -> Run, grouped by config minus the seed -> Group
    stats   Welch-t and paired-by-seed intervals, the rows, Δ over training
    tables  Markdown and CSV (plus one table per extra held-out set, data.extra_val)
    plots   PNGs and the TensorBoard custom-scalars layout
    ladder  budget ladders (ffn_zoo/training/ladder/run.py): a table per budget, Δ against the budget, its trend
            (trend.py), the effective compute multiplier (multiplier.py), the Markdown and plot (ladder_text.py),
            and ladders of several widths set against the width (axis.py)
    reports a committed ladder comparison (its ladder.json) read back as its branch runs, to pool with run folders
    tuned   each variant at its own lr (a ffn-zoo-tune folder): shared-lr and tuned-lr tables side by side
    cli     compare() (all of the above, written to <sweep>/compare) and ``ffn-zoo-compare``

Imports neither Lightning nor Hydra: reading a sweep must not pay for the training stack.
"""

from ffn_zoo.analysis.compare.cli import compare, main
from ffn_zoo.analysis.compare.plots import LAYOUT_SUFFIX
from ffn_zoo.analysis.compare.runs import Group, Run, find_run_dirs, group_runs, load_run, val_curve
from ffn_zoo.analysis.compare.stats import delta_curves, paired_interval, summarize, welch_interval

__all__ = ["LAYOUT_SUFFIX", "Group", "Run", "compare", "delta_curves", "find_run_dirs", "group_runs", "load_run",
           "main", "paired_interval", "summarize", "val_curve", "welch_interval"]
