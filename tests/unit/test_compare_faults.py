"""compare's two faults on synthetic runs and ladders with known answers: a Δ over unequal seed sets (the paired
mean is reported beside its own interval, with the pairs and the dropped seeds named, in the table, the ladder's
vs_ref change and the trend), and a non-finite loss (never marked, always named); and the effective compute
multiplier read off the baseline's own ladder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ffn_zoo.analysis.compare import compare
from ffn_zoo.analysis.compare.multiplier import effective_multiplier, tokens_to_reach
from ffn_zoo.analysis.compare.tables import interval_cell
from tests.helpers import ladder_baseline_loss, ladder_sweep, make_run

OFFSET = [0.0, 0.05, 0.10]  # per-seed loss offsets, shared by both variants (a seed's data order)
GAP = [-0.020, -0.018, -0.019]  # per-seed true Δ


def paired_by_hand(seeds: list[int]) -> tuple[float, float, float]:
    d = np.array([GAP[s] for s in seeds])
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return d.mean(), d.mean() - half, d.mean() + half


def test_a_missing_seed_is_paired_out_and_named_in_the_table(tmp_path: Path) -> None:
    """The issue's case: offsets 0/0.05/0.10, the baseline's seed 0 removed. The difference of means (−0.044) falls
    outside the paired interval [−0.025, −0.012]; the paired mean (over seeds 1, 2) is inside it, shown beside it."""
    for s in range(3):
        make_run(tmp_path, "geglu", s, 3.0 + OFFSET[s] + GAP[s])
        if s:
            make_run(tmp_path, "gelu", s, 3.0 + OFFSET[s])
    report = compare([tmp_path], layout=False)
    (row,) = [r for r in report["rows"] if r["variant"] == "geglu"]
    mean, lo, hi = paired_by_hand([1, 2])
    assert row["delta"] == pytest.approx(np.mean([OFFSET[s] + GAP[s] for s in range(3)]) - np.mean(OFFSET[1:]))
    assert row["delta"] == pytest.approx(-0.044) and (lo, hi) == pytest.approx((-0.025, -0.012), abs=5e-4)
    assert not lo <= row["delta"] <= hi  # the fault: the difference of means is outside the paired interval
    assert row["paired_delta"] == pytest.approx(mean) and lo < row["paired_delta"] < hi
    assert (row["paired_lo"], row["paired_hi"]) == pytest.approx((lo, hi))
    assert row["n_pairs"] == 2 and row["unpaired_seeds"] == [0]
    text = (tmp_path / "compare" / "table.md").read_text()
    assert f"{mean:+.3f} [{lo:+.3f}, {hi:+.3f}] * (2 pairs)" in text
    assert "geglu vs gelu: seed(s) 0 in only one of them, dropped from the paired Δ (2 pairs)" in text


def test_a_ladder_missing_a_seed_names_it_in_delta_trend_and_vs_ref(tmp_path: Path) -> None:
    base = lambda s, t: ladder_baseline_loss(s, t) + OFFSET[s]  # noqa: E731
    ladder_sweep(tmp_path / "ref", lambda s, x: GAP[s], base=base)
    ladder_sweep(tmp_path / "fan_in", lambda s, x: GAP[s] - 0.01 * (s + 1), base=base, model={"init": "fan_in"},
                 skip=lambda ffn, s, t: ffn == "gelu" and s == 0)
    report = compare([tmp_path / "ref", tmp_path / "fan_in"], out=tmp_path / "cmp", layout=False)
    mean, lo, hi = paired_by_hand([1, 2])
    second = [d for d in report["delta_rows"] if d["ladder_setting"] == 2]
    for d in second:
        assert (d["n"], d["n_baseline"], d["n_pairs"], d["unpaired_seeds"]) == (3, 2, 2, [0])
        assert d["paired_delta"] == pytest.approx(mean - 0.025) and d["paired_lo"] < d["paired_delta"] < d["paired_hi"]
        # vs_ref: setting 2's per-seed Δ (seeds 1, 2) against setting 1's (0, 1, 2), paired over 1, 2: −0.025 exactly
        assert d["vs_ref"] == pytest.approx(-0.025) and d["vs_ref_pairs"] == 2 and d["vs_ref_unpaired_seeds"] == [0]
        assert d["vs_ref_lo"] <= d["vs_ref"] <= d["vs_ref_hi"]
    (t,) = [t for t in report["trends"] if t["ladder_setting"] == 2]
    assert t["seeds_used"] == [1, 2] and t["seeds_dropped"] == [0]
    text = (tmp_path / "cmp" / "ladder.md").read_text()
    assert "| 3 (gelu: 2) |" in text and "(2 pairs; seed(s) 0 unpaired)" in text
    assert "(seed(s) 0 dropped: not in both ladders at every budget)" in text
    assert "setting 2, geglu − gelu trend: seed(s) 0 dropped" in text


def test_a_nan_loss_is_never_marked_and_is_named(tmp_path: Path) -> None:
    ladder_sweep(tmp_path / "sweep", lambda s, x: GAP[s])
    bad = tmp_path / "sweep" / "ffn=geglu,seed=1" / "budget=1000000" / "metrics.json"
    metrics = json.loads(bad.read_text())
    bad.write_text(json.dumps({**metrics, "val_loss": math.nan}))  # json writes NaN, as Python's json does
    report = compare([tmp_path / "sweep"], layout=False)
    at_1m = next(d for d in report["delta_rows"] if d["budget_tokens"] == 1_000_000)
    assert at_1m["n"] == 2 and at_1m["n_pairs"] == 2 and math.isfinite(at_1m["paired_delta"])
    assert at_1m["paired_delta"] == pytest.approx(np.mean([GAP[0], GAP[2]]))
    text = (tmp_path / "sweep" / "compare" / "ladder.md").read_text()
    assert f"budget 1M: geglu: non-finite loss in {bad.parent} (seed 1: nan)" in text
    assert text.replace(str(tmp_path), "").count("nan") == 1  # named once, nowhere in a number or a mark
    (t,) = report["trends"]
    assert t["seeds_dropped"] == [1]


def test_a_nan_interval_is_not_marked() -> None:
    assert interval_cell(math.nan, math.nan) == "[+nan, +nan] (not finite)"
    assert interval_cell(-0.2, math.inf).endswith("(not finite)")
    assert interval_cell(-0.2, -0.1) == "[-0.200, -0.100] *"


def test_a_nan_run_in_a_plain_sweep_is_left_out_and_named(tmp_path: Path) -> None:
    for s in range(3):
        make_run(tmp_path, "gelu", s, 3.0 + 0.01 * s)
    for s, loss in enumerate([2.9, math.nan, 2.92]):
        make_run(tmp_path, "geglu", s, loss)
    report = compare([tmp_path], layout=False)
    (row,) = [r for r in report["rows"] if r["variant"] == "geglu"]
    assert row["n"] == 2 and row["seeds"] == [0, 2] and row["val_loss_mean"] == pytest.approx(2.91)
    assert any("non-finite loss in" in w and "seed=1" in w for w in report["warnings"])


# ---------------------------------------------------------------------------------------------- the multiplier


def test_tokens_to_reach_interpolates_in_log_tokens_and_says_beyond() -> None:
    curve = {10**5: 3.0, 10**6: 2.7, 10**7: 2.4}
    assert tokens_to_reach(curve, 2.85)[:2] == (pytest.approx(10**5.5), "")
    assert tokens_to_reach(curve, 2.7)[:2] == (pytest.approx(10**6), "")
    t, side, guess = tokens_to_reach(curve, 2.34)  # better than the baseline's largest budget
    assert (t, side) == (None, ">") and guess == pytest.approx(10**7.2)
    t, side, guess = tokens_to_reach(curve, 3.06)
    assert (t, side) == (None, "<") and guess == pytest.approx(10**4.8)
    assert tokens_to_reach({10**5: 3.0, 10**6: 3.1, 10**7: 2.5}, 2.8)[0] == pytest.approx(10**6.5)  # first reach


def test_the_multiplier_is_known_where_the_baseline_is_straight(tmp_path: Path) -> None:
    """The baseline loses 0.3 nats per decade, so a gap Δ is worth 10^(−Δ/0.3) of its tokens: Δ = −0.03 ± seeds
    is 1.26× at 100k and 1M; at 10M, the largest budget, it is beyond the ladder (> 1×)."""
    noise = [0.003, -0.004, 0.001]
    ladder_sweep(tmp_path / "sweep", lambda s, x: -0.03 + noise[s])
    report = compare([tmp_path / "sweep"], layout=False)
    logs = np.array([-(-0.03 + e) / 0.3 * math.log(10) for e in noise])
    half = stats.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    for d in report["delta_rows"][:2]:
        assert d["multiplier"] == pytest.approx(10**0.1, rel=1e-9)
        assert (d["multiplier_lo"], d["multiplier_hi"]) == pytest.approx(
            (math.exp(logs.mean() - half), math.exp(logs.mean() + half)), rel=1e-9)
    top = report["delta_rows"][2]
    assert top["multiplier"] is None and top["multiplier_note"] == \
        "beyond the ladder (> 1×; the nearest segment's line gives 1.26×)"
    text = (tmp_path / "sweep" / "compare" / "ladder.md").read_text()
    assert "- geglu, in gelu's tokens: at 100k 1.26× [" in text and "at 10M beyond the ladder (> 1×" in text
    assert top["multiplier_guess"] == pytest.approx(10**0.1, rel=1e-9)  # a guess, labelled so, never the number
    assert "multiplier" in (tmp_path / "sweep" / "compare" / "ladder_delta.csv").read_text().splitlines()[0]


def test_one_seed_gives_a_multiplier_without_interval() -> None:
    m = effective_multiplier({0: 2.85}, {10**5: {0: 3.0}, 10**6: {0: 2.7}}, 10**5)
    assert m["multiplier"] == pytest.approx(10**0.5) and m["multiplier_lo"] is None
    assert m["multiplier_note"] == "1 seed: no interval"
    assert effective_multiplier({0: 2.85}, {10**5: {0: 3.0}}, 10**5)["multiplier_note"].startswith("no seed")
