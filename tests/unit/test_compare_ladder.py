"""compare on synthetic ladders (fabricated run folders): known losses -> known Δ per budget, known slope, known
crossing, the crossing's interval, and the verdict when the trend does not cross 0 where it was fitted."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ffn_zoo.analysis.compare import ladder as LA
from ffn_zoo.analysis.compare import compare
from tests.helpers import LADDER_BUDGETS
from tests.helpers import ladder_sweep as sweep

BUDGETS = list(LADDER_BUDGETS)  # x = log10 = 5, 6, 7
SEEDS = [0, 1, 2]
U, V = [0.01, -0.02, 0.01], [0.002, -0.001, -0.001]  # per-seed offsets of intercept and slope, mean 0


def ladder_sweep(root: Path, delta, extra=None, init: str = "gpt2") -> Path:
    return sweep(root, delta, extra, model={"init": init})


A, B = 0.6, -0.1  # Δ = 0.6 − 0.1·x: 0 at x = 6, 1M tokens


@pytest.fixture
def crossing(tmp_path: Path) -> dict:
    ladder_sweep(tmp_path / "sweep", lambda s, x: A + U[s] + (B + V[s]) * x)
    return compare([tmp_path / "sweep"], layout=False)


def test_known_delta_per_budget(crossing: dict) -> None:
    rows = crossing["delta_rows"]
    assert [r["budget_tokens"] for r in rows] == BUDGETS and all(r["n"] == 3 for r in rows)
    for r in rows:
        x = math.log10(r["budget_tokens"])
        assert r["delta"] == pytest.approx(A + B * x, abs=1e-12)
        d = [U[s] + V[s] * x + A + B * x for s in SEEDS]  # the per-seed differences, by hand
        half = stats.t.ppf(0.975, 2) * np.std(d, ddof=1) / math.sqrt(3)
        assert (r["paired_lo"], r["paired_hi"]) == pytest.approx((np.mean(d) - half, np.mean(d) + half), abs=1e-12)
        assert r["delta_lo"] < r["delta"] < r["delta_hi"]  # Welch, from compare
    # per budget the full variant table (compare's rows): 2 variants × 3 budgets, trunks and summaries left out
    assert len(crossing["budget_rows"]) == 6 and not crossing["problems"]


def test_known_slope_and_crossing(crossing: dict) -> None:
    (t,) = crossing["trends"]
    assert t["variant"] == "geglu" and t["seeds"] == 3 and t["budgets"] == 3
    assert t["slope_per_decade"] == pytest.approx(B, abs=1e-12) and t["intercept"] == pytest.approx(A, abs=1e-9)
    assert t["crossing_tokens"] == pytest.approx(1e6, rel=1e-9)
    half = stats.t.ppf(0.975, 2) * np.std([B + v for v in V], ddof=1) / math.sqrt(3)
    assert (t["slope_lo"], t["slope_hi"]) == pytest.approx((B - half, B + half), abs=1e-12)
    # Fieller: at each end of the crossing's interval the line's 95% band just touches 0
    coef = np.array([[A + U[s], B + V[s]] for s in SEEDS])
    for end in (t["crossing_lo"], t["crossing_hi"]):
        x = math.log10(end)
        line = coef[:, 0].mean() + coef[:, 1].mean() * x
        se = np.std(coef[:, 0] + coef[:, 1] * x, ddof=1) / math.sqrt(3)
        assert abs(line) == pytest.approx(stats.t.ppf(0.975, 2) * se, rel=1e-6)
    assert t["crossing_lo"] < 1e6 < t["crossing_hi"]
    assert t["verdict"].startswith("crosses 0 at 1M tokens, 95% interval [")


def test_outputs_and_the_caveat(crossing: dict, tmp_path: Path) -> None:
    out = tmp_path / "sweep" / "compare"
    for name in ("ladder.md", "ladder_budgets.csv", "ladder_delta.csv", "ladder_trend.csv", "ladder.json",
                 "ladder_delta.png"):
        assert (out / name).is_file(), name
    text = (out / "ladder.md").read_text()
    assert "## budget 1M tokens (1,000,000; 1000 steps)" in text and "| geglu | gated |" in text
    assert "A trend fitted over 100k–10M tokens is no promise outside that range." in text
    assert len((out / "ladder_delta.csv").read_text().splitlines()) == 1 + 3


def test_no_crossing_within_the_fitted_range(tmp_path: Path) -> None:
    """A steady +0.05 gap (no slope): the band stays above 0 over the budgets."""
    ladder_sweep(tmp_path / "flat", lambda s, x: 0.05 + U[s] * 0.1 + V[s] * 0.1 * (x - 6))
    (t,) = compare([tmp_path / "flat"], layout=False)["trends"]
    assert t["verdict"].startswith("no crossing within the fitted range (100k–10M tokens): Δ > 0 throughout at 95%")


def test_a_crossing_outside_the_range_is_not_claimed(tmp_path: Path) -> None:
    """Δ = 0.9 − 0.1·x would reach 0 at 1G tokens, two decades past the largest budget."""
    ladder_sweep(tmp_path / "far", lambda s, x: 0.9 + U[s] + (B + V[s]) * x)
    (t,) = compare([tmp_path / "far"], layout=False)["trends"]
    assert t["crossing_tokens"] == pytest.approx(1e9, rel=1e-9)
    assert t["verdict"].startswith("no crossing within the fitted range")
    assert t["verdict"].endswith("the line would cross at 1G tokens, outside it")


def test_one_seed_gives_a_point_trend_without_interval() -> None:
    t = LA.fit_trend({0: {10**5: 0.1, 10**6: 0.0, 10**7: -0.1}})
    assert t["slope_per_decade"] == pytest.approx(-0.1) and t["slope_lo"] is None
    assert t["verdict"] == "crosses 0 at 1M tokens (1 seed: no interval)"


def test_an_unresolved_slope_leaves_the_crossing_unbounded() -> None:
    noisy = {0: {10**5: 0.1, 10**7: -0.1}, 1: {10**5: -0.1, 10**7: 0.12}}  # slopes −0.1 and +0.11
    t = LA.fit_trend(noisy)
    assert t["slope_lo"] < 0 < t["slope_hi"] and t["crossing_lo"] is None and t["crossing_hi"] is None


def test_an_extra_held_out_set_gets_its_own_delta_and_trend(tmp_path: Path) -> None:
    """data.extra_val sets (C4 beside Wikipedia) are laddered too: their own Δ per budget, trend and files, from
    their own losses (here Δ_c4 = 2·Δ_main + 0.01), while the main set's numbers stay those of val_loss."""
    main = lambda s, x: A + U[s] + (B + V[s]) * x  # noqa: E731
    c4 = lambda s, x, ffn: {"c4": 5.0 + (2 * main(s, x) + 0.01 if ffn == "geglu" else 0.0) + 0.001 * s}  # noqa: E731
    ladder_sweep(tmp_path / "sweep", main, extra=c4)
    report = compare([tmp_path / "sweep"], layout=False)
    assert [r["delta"] for r in report["delta_rows"]] == pytest.approx([A + B * x for x in (5, 6, 7)], abs=1e-12)
    c4r = report["extra_val"]["c4"]
    assert [r["delta"] for r in c4r["delta_rows"]] == pytest.approx([2 * (A + B * x) + 0.01 for x in (5, 6, 7)],
                                                                     abs=1e-12)
    (t,) = c4r["trends"]
    assert t["slope_per_decade"] == pytest.approx(2 * B, abs=1e-12)
    out = tmp_path / "sweep" / "compare"
    for name in ("ladder_budgets_c4.csv", "ladder_delta_c4.csv", "ladder_trend_c4.csv", "ladder_delta_c4.png"):
        assert (out / name).is_file(), name
    text = (out / "ladder.md").read_text()
    assert "# Held-out set `c4`" in text and "## c4: Δ against the baseline by budget" in text
    assert "## c4: budget 1M tokens (1,000,000; 1000 steps)" in text


def test_settings_are_named_and_their_change_of_the_gap_has_an_interval(tmp_path: Path) -> None:
    """Two recipes (model.init) in two folders: each setting labelled by the key that differs, never pooled, and
    each Δ of setting 2 carries its change against setting 1's with the paired interval computed by hand."""
    base = lambda s, x: A + U[s] + (B + V[s]) * x  # noqa: E731
    shift = [0.02, 0.03, 0.01]  # per seed: the second recipe moves the gap by −0.02 on average
    ladder_sweep(tmp_path / "gpt2", base)
    ladder_sweep(tmp_path / "fan_in", lambda s, x: base(s, x) - shift[s], init="fan_in")
    report = compare([tmp_path / "gpt2", tmp_path / "fan_in"], out=tmp_path / "cmp", layout=False)
    rows = report["delta_rows"]
    assert [(r["ladder_setting"], r["setting_label"]) for r in rows] == \
        [(1, "model.init=gpt2")] * 3 + [(2, "model.init=fan_in")] * 3
    assert all(r["vs_ref"] is None for r in rows[:3])
    half = stats.t.ppf(0.975, 2) * np.std(shift, ddof=1) / math.sqrt(3)
    for r in rows[3:]:
        assert r["vs_ref"] == pytest.approx(-np.mean(shift), abs=1e-12) and r["vs_ref_paired"] is True
        assert (r["vs_ref_lo"], r["vs_ref_hi"]) == pytest.approx((-np.mean(shift) - half, -np.mean(shift) + half),
                                                                 abs=1e-12)
    assert [t["setting_label"] for t in report["trends"]] == ["model.init=gpt2", "model.init=fan_in"]
    text = (tmp_path / "cmp" / "ladder.md").read_text()
    assert "| 2: model.init=fan_in | geglu | 1M (1,000,000) |" in text
    assert "## ladder setting 2 (model.init=fan_in), budget 100k tokens" in text
    assert "- setting 2 (model.init=fan_in): geglu − gelu" in text


def test_setting_labels_name_the_choices_not_another_optimizers_options() -> None:
    adamw = (("model.init", "gpt2"), ("optim.name", "adamw"), ("optim.lr", 0.001), ("optim.betas", (0.9, 0.95)),
             ("optim.eps1", None))
    adafactor = (("model.init", "fan_in"), ("optim.name", "adafactor"), ("optim.lr", 0.01), ("optim.betas", None),
                 ("optim.eps1", 1e-30))
    assert LA.setting_labels([adamw, adafactor]) == ["model.init=gpt2, optim.lr=0.001, optim.name=adamw",
                                                  "model.init=fan_in, optim.lr=0.01, optim.name=adafactor"]
    only_null = ((("a", 1), ("b", None)), (("a", 1), ("b", 2)))  # nothing else differs: the null key is the label
    assert LA.setting_labels(list(only_null)) == ["b=None", "b=2"]
