"""python experiments/glu_variants/scripts/vs_default.py [<own-lr out> [<ladder root>]]

Own-lr factor (issue 13 step 4): Δ(swiglu − gelu) per seed at each variant's tuned lr, against the default
recipe's Δ (the ladder branches of the same length), paired by seed. Reads the report_<B>/tuning.json copies
(made after each ffn-zoo-tune call: each call rewrites tuning.json with its own budget) and the run folders."""
import json, sys
from pathlib import Path
import numpy as np
from scipy import stats

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "logs/glu_recipe/own_lr")  # ffn-zoo-tune's --out
LADDER = Path(sys.argv[2] if len(sys.argv) > 2 else "logs/glu_ladder")  # step 3's sweeps: seed<k>/ffn=<v>/budget=<B>
def ci(x):
    x = np.asarray(x, float); n = len(x)
    h = stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / np.sqrt(n)
    return x.mean(), x.mean() - h, x.mean() + h
def f(m, lo, hi):
    return f"{m:+.4f} [{lo:+.3f}, {hi:+.3f}]" + ("" if lo <= 0 <= hi else " *")
print("| held-out set | budget (tokens) | lr gelu / swiglu | gelu mean | swiglu mean | Δ at own lr [paired 95%] | per-seed Δ | default Δ | Δ − default's Δ [paired 95%] |")
print("|---|---:|---|---:|---:|---|---|---:|---|")
for key, name in (("val_loss", "Wikipedia"), ("val_c4_loss", "C4")):
    for budget, label in (("0.25Mi", 262144), ("1Mi", 1048576)):
        rep = json.loads((ROOT / f"report_{budget}" / "tuning.json").read_text())
        tuned = rep["arms"]["tuned"]
        own = {v: {json.loads((ROOT / r / "metrics.json").read_text())["seed"]: json.loads((ROOT / r / "metrics.json").read_text())[key]
                   for r in tuned[v]["runs"]} for v in ("gelu", "swiglu")}
        dflt = {v: {s: json.loads((LADDER / f"seed{s}/ffn={v}/budget={budget}/metrics.json").read_text())[key] for s in (0, 1, 2)}
                for v in ("gelu", "swiglu")}
        seeds = sorted(set(own["gelu"]) & set(own["swiglu"]))
        d_own = [own["swiglu"][s] - own["gelu"][s] for s in seeds]
        d_def = [dflt["swiglu"][s] - dflt["gelu"][s] for s in seeds]
        print(f"| {name} | {label:,} | {tuned['gelu']['lr']:g} / {tuned['swiglu']['lr']:g} | {np.mean(list(own['gelu'].values())):.4f} | "
              f"{np.mean(list(own['swiglu'].values())):.4f} | {f(*ci(d_own))} | {' / '.join(f'{d:+.3f}' for d in d_own)} | "
              f"{np.mean(d_def):+.4f} | {f(*ci(np.subtract(d_own, d_def)))} |")
