"""compare on synthetic runs that scored an extra held-out set (data.extra_val): one more table, known values."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from ffn_zoo.analysis import compare as C
from tests.helpers import make_run

GELU, GEGLU = [3.00, 3.20, 3.10], [2.90, 3.00, 2.95]  # main split
C4_GELU, C4_GEGLU = [4.00, 4.30, 4.10], [4.05, 4.20, 4.25]  # another ordering than the main split's


def add_extra(path: Path, name: str, loss: float) -> None:
    m = json.loads((path / "metrics.json").read_text())
    m.update({"extra_val": [name], f"val_{name}_loss": loss, f"val_{name}_ppl": math.exp(loss),
              f"val_{name}_bpb": loss / math.log(2) / 4})
    (path / "metrics.json").write_text(json.dumps(m))


def test_extra_set_gets_its_own_table(tmp_path: Path) -> None:
    for seed in range(3):
        add_extra(make_run(tmp_path, "gelu", seed, GELU[seed]), "c4", C4_GELU[seed])
        add_extra(make_run(tmp_path, "geglu", seed, GEGLU[seed]), "c4", C4_GEGLU[seed])
    report = C.compare([tmp_path], layout=False)
    main = {r["variant"]: r for r in report["rows"]}
    c4 = {r["variant"]: r for r in report["extra_val"]["c4"]}
    assert main["geglu"]["delta"] == pytest.approx(np.mean(GEGLU) - np.mean(GELU))  # the main table is unchanged
    assert c4["gelu"]["val_loss_mean"] == pytest.approx(np.mean(C4_GELU))
    assert c4["geglu"]["delta"] == pytest.approx(np.mean(C4_GEGLU) - np.mean(C4_GELU))
    ci = stats.ttest_ind(C4_GEGLU, C4_GELU, equal_var=False).confidence_interval(0.95)
    assert (c4["geglu"]["delta_lo"], c4["geglu"]["delta_hi"]) == pytest.approx((ci.low, ci.high))
    assert c4["geglu"]["val_bpb"] == pytest.approx(np.mean(C4_GEGLU) / math.log(2) / 4)
    md = (tmp_path / "compare" / "table.md").read_text()
    assert "Held-out set `c4`" in md and "val/c4/loss (mean ± std)" in md
    assert f"{c4['geglu']['delta']:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]" in md
    assert (tmp_path / "compare" / "table_c4.csv").read_text().count("\n") == 3


def test_runs_without_the_set_are_left_out_of_its_table(tmp_path: Path) -> None:
    for seed in range(2):
        add_extra(make_run(tmp_path, "gelu", seed, GELU[seed]), "c4", C4_GELU[seed])
        make_run(tmp_path, "geglu", seed, GEGLU[seed])  # scored the main split only
    report = C.compare([tmp_path], layout=False)
    assert {r["variant"] for r in report["rows"]} == {"gelu", "geglu"}  # one setting: extra_val does not split it
    assert [r["variant"] for r in report["extra_val"]["c4"]] == ["gelu"]
