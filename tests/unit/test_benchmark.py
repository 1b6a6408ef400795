"""ffn-zoo-bench (ffn_zoo.tools.benchmark) runs a tiny configuration end to end and reports well-formed rows (no timing asserts)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from ffn_zoo.tools.bench_results import Case
from ffn_zoo.tools.benchmark import benchmark, build_hf, build_ours
from ffn_zoo.training.recipe.build import compose


TINY = ["--model", "tiny", "--seq", "16", "--batch", "2", "--vocab", "256", "--repeats", "2", "--steps", "1",
        "--warmup", "1", "--threads", "1", "--device", "cpu"]


def _check_row(row: dict, impl: str) -> None:
    assert row["impl"] == impl and row["model"] == "tiny"
    assert len(row["repeats"]) == 2 and all(t > 0 for t in row["repeats"])
    assert row["tokens_per_s"] > 0 and math.isfinite(row["mfu"]) and row["mfu"] > 0
    assert row["flops_per_token"] > 0 and row["gemm_peak_flops"] > 0
    assert len(row["load_1min"]) == 2


def test_benchmark_ours_and_hf_peer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "bench.jsonl"
    rows = benchmark([*TINY, "--ffn", "gelu", "geglu", "--precision", "32-true", "bf16-mixed",
                              "--peer", "hf", "--json", str(out)])
    assert [(r["ffn"], r["precision"], r["impl"]) for r in rows] == [
        (f, p, i) for f in ("gelu", "geglu") for p in ("32-true", "bf16-mixed") for i in ("ours", "hf")
    ]
    for row in rows:
        _check_row(row, row["impl"])
        if row["impl"] == "ours":
            assert row["vs_hf"] > 0 and 0 <= row["data_share"] < 1
        else:
            assert row["vs_ours"] > 0
    # same shape, same FLOP convention: within the few bias/LayerNorm parameters HF has and we do not
    gelu_ours, gelu_hf = rows[0], rows[1]
    assert gelu_hf["flops_per_token"] == pytest.approx(gelu_ours["flops_per_token"], rel=0.05)

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines == json.loads(json.dumps(rows))  # the file holds one JSON line per table row
    printed = capsys.readouterr().out
    assert "tok/s" in printed and printed.count("\njson ") == len(rows)


def test_benchmark_trainer_mode(tmp_path: Path) -> None:
    """--trainer times the real train.py path (Lightning, logger, callbacks) beside the bare step."""
    rows = benchmark([*TINY, "--ffn", "gelu", "--trainer", "--trainer-steps", "8"])
    assert [r["impl"] for r in rows] == ["ours", "trainer"]
    _check_row(rows[1], "trainer")
    assert rows[1]["vs_ours"] > 0


def test_an_mlm_case_times_the_masked_step_without_the_causal_peer(capsys: pytest.CaptureFixture[str]) -> None:
    """--objective mlm: our masked-LM step (what MLM ladders train); GPT-2, a causal LM, is no peer for it."""
    pytest.importorskip("transformers")
    rows = benchmark([*TINY, "--ffn", "gelu", "--objective", "clm", "mlm", "--peer", "hf"])
    assert [(r["objective"], r["impl"]) for r in rows] == [("clm", "ours"), ("clm", "hf"), ("mlm", "ours")]
    _check_row(rows[2], "ours")
    assert rows[0]["vs_hf"] > 0 and "vs_hf" not in rows[2]
    assert " mlm " in capsys.readouterr().out  # the table names each row's objective


def test_the_mlm_step_has_the_mask_token_and_its_own_losses() -> None:
    clm, mlm = (Case("tiny", "gelu", 16, 2, "32-true", o) for o in ("clm", "mlm"))
    d = compose(["model=tiny"]).model.d_model
    torch.manual_seed(0)
    step_clm, flops_clm = build_ours(clm, vocab=256, device="cpu", compile_=False)
    torch.manual_seed(0)
    step_mlm, flops_mlm = build_ours(mlm, vocab=256, device="cpu", compile_=False)
    assert flops_mlm - flops_clm == 6 * d  # one more embedding row: [MASK], id 256
    batch = torch.randint(0, 256, (2, 17), generator=torch.Generator().manual_seed(0))  # (B, T + 1)
    a, b = step_clm(batch), step_mlm(batch)
    assert a.ndim == 0 and not a.requires_grad and math.isfinite(a.item()) and math.isfinite(b.item())
    assert a.item() != b.item()
    with pytest.raises(ValueError, match="causal"):
        build_hf(mlm, vocab=256, device="cpu")


def test_flush_denormal_is_refused_as_an_in_process_ablation() -> None:
    """The intra-op threads take FTZ/DAZ when they start, so an arm beside the default would not be what it says."""
    with pytest.raises(SystemExit, match="bench_denormals.py"):
        benchmark([*TINY, "--ablate", "impl.flush_denormal=false"])
