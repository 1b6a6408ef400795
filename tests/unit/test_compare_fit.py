"""ffn-zoo-compare --fit on synthetic ladders with known curves: L(D) = E + a·(D/D0)^(−α) per variant, E shared.
It recovers the parameters, tells a different exponent from a different offset, finds the crossing, gives the
multiplier the curves imply, fixes E where it cannot be identified, refuses a form that misses, and says in one
line when there are too few budgets."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from ffn_zoo.analysis.compare import compare
from ffn_zoo.analysis.compare.fit import fit_pair
from ffn_zoo.errors import ConfigError
from tests.helpers import ladder_sweep

D0 = 250_000
BUDGETS = [D0 * 2**k for k in range(6)]


def ladder(curve, seeds=(0, 1, 2), noise: float = 0.002, rng_seed: int = 0) -> dict[int, dict[int, float]]:
    """{budget: {seed: loss}}: the curve at each budget plus independent noise per seed."""
    rng = np.random.default_rng(rng_seed)
    return {t: {s: curve(t / D0) + noise * rng.standard_normal() for s in seeds} for t in BUDGETS}


def law(e: float, a: float, alpha: float):
    return lambda x: e + a * x ** -alpha


def test_a_different_exponent_is_recovered_with_its_crossing() -> None:
    f = fit_pair(ladder(law(3.0, 2.0, 0.5)), ladder(law(3.0, 2.2, 0.7), rng_seed=1))
    assert "fitted" in f["e_note"] and f["e"] == pytest.approx(3.0, abs=0.05)
    assert f["alpha_base"] == pytest.approx(0.5, abs=0.03) and f["alpha_other"] == pytest.approx(0.7, abs=0.03)
    assert f["d_alpha_lo"] > 0 and f["verdict"] == "different exponent"
    truth = D0 * 1.1 ** (1 / 0.2)  # a_o / a_b = 1.1, Δα = 0.2: the curves meet at x = 1.1^5
    assert f["crossing_tokens"] == pytest.approx(truth, rel=0.1)


def test_a_different_offset_at_one_exponent_is_a_constant_multiplier() -> None:
    f = fit_pair(ladder(law(3.0, 2.0, 0.5)), ladder(law(3.0, 1.8, 0.5), rng_seed=1))
    assert f["d_alpha_lo"] < 0 < f["d_alpha_hi"]
    assert f["verdict"] == "same exponent within its interval, different offset" and f["a_ratio_hi"] < 1
    # L_b(k·D) = L_o(D) for every D when k = (a_b / a_o)^(1/α): the variant is worth k× the baseline's tokens
    assert f["multipliers"] == pytest.approx([(2.0 / 1.8) ** 2] * len(BUDGETS), rel=0.03)
    assert f["crossing_tokens"] is None or not BUDGETS[0] <= f["crossing_tokens"] <= BUDGETS[-1]


def test_e_is_fixed_at_zero_where_it_cannot_be_identified() -> None:
    """Curves that fall faster than any E >= 0 allows (their best E is negative): E runs into its bound, so it is
    fixed at 0 and said; the exponents are then the local log-log slopes, still ordered as the truth."""
    f = fit_pair(ladder(law(-1.0, 8.0, 0.1)), ladder(law(-1.0, 8.2, 0.12), rng_seed=1))
    assert f["e"] == 0.0 and "not identifiable" in f["e_note"] and "fixed at 0" in f["e_note"]
    assert f["alpha_other"] > f["alpha_base"] > 0


def test_a_form_that_misses_gives_no_verdict() -> None:
    """Loss straight in log D with a bend the law cannot follow (as the CPU ladders' early budgets are): the
    bootstrap knows only seed noise, so the tight interval must not become a verdict."""
    bent = lambda x: 7.0 - 0.4 * math.log2(x) - 0.05 * math.log2(x) ** 2  # noqa: E731
    f = fit_pair(ladder(bent), ladder(lambda x: bent(x) + 0.01, rng_seed=1))
    assert f["misfit"] and f["verdict"].startswith("not decided: the form misses")


def test_too_few_budgets_is_one_line() -> None:
    two = {t: {0: 5.0, 1: 5.1} for t in BUDGETS[:2]}
    with pytest.raises(ConfigError, match=r"--fit needs >= 3 budgets .* has 2") as e:
        fit_pair(two, two, "setting 1, swiglu vs gelu")
    assert "\n" not in str(e.value)


def test_compare_fit_writes_its_tables(tmp_path: Path) -> None:
    budgets = tuple(10**k for k in (5, 5.5, 6, 6.5, 7)) and (100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)
    base = lambda seed, tokens: 3.0 + 2.0 * (tokens / 1e5) ** -0.4 + 0.002 * seed  # noqa: E731
    root = ladder_sweep(tmp_path / "sweep", lambda seed, x: -0.05 * (x - 5), budgets=budgets, base=base)
    report = compare([root], out=tmp_path / "out", layout=False, fit=True)
    (row,) = report["fit"]["main"]["fits"]
    assert row["variant"] == "geglu" and row["baseline"] == "gelu" and row["verdict"]
    assert len(report["fit"]["main"]["budgets"]) == len(budgets)
    assert (tmp_path / "out" / "ladder_fit.csv").is_file() and (tmp_path / "out" / "ladder_fit_budgets.csv").is_file()
    assert "Fitted curves" in (tmp_path / "out" / "ladder.md").read_text()
    assert json.loads((tmp_path / "out" / "ladder.json").read_text())["fit"]["main"]["fits"][0]["variant"] == "geglu"
