"""The FLOP and parameter report against hand-computed BERT-base values."""

import subprocess
import sys

import pytest

from ffn_zoo.errors import UnknownNameError
from ffn_zoo.analysis.report import measure_times, report, to_markdown, variant_row
from tests.helpers import REPO

BERT = ["model=bert_base"]
W = 4_718_592  # 2·768·3072 = 3·768·2048


@pytest.mark.parametrize("name,form,hidden", [("gelu", "dense", 3072), ("geglu", "gated", 2048)])
def test_bert_base_counts_by_hand(name: str, form: str, hidden: int) -> None:
    r = variant_row(name, BERT, seq_len=512)
    assert (r["form"], r["hidden"]) == (form, hidden)
    assert r["ffn_weights_per_layer"] == W
    assert r["params_ffn"] == 12 * W
    assert r["ffn_fwd_flops_per_token"] == 2 * 12 * W  # 2 FLOPs per weight per token, 12 layers
    assert r["ffn_fwd_bwd_flops_per_token"] == 3 * 2 * 12 * W
    assert r["act_evals_per_forward"] == 512 * 12 * hidden  # dense: 18,874,368
    # embeddings (toy vocab 2048, 128 positions) + 12 × (attention 4·768² + 2 LayerNorms + FFN) + final norm
    attn = 4 * 768 * 768
    assert r["params_total"] == 2048 * 768 + 128 * 768 + 12 * (attn + 2 * 768 + W) + 768
    # 6·N without position embeddings + 12·L·d·T attention
    n = r["params_total"] - 128 * 768
    assert r["model_fwd_bwd_flops_per_token"] == 6 * n + 12 * 12 * 768 * 512


def test_dense_activation_evaluations_at_bert_base() -> None:
    assert variant_row("relu", BERT, 512)["act_evals_per_forward"] == 18_874_368


def test_unmatched_gated_width_costs_one_and_a_half() -> None:
    r = variant_row("swiglu", [*BERT, "ffn.match_params=false"], 512)
    assert r["hidden"] == 3072 and r["ffn_weights_per_layer"] == 3 * 768 * 3072 == 1.5 * W


def test_learnable_beta_counts_one_parameter_per_layer() -> None:
    assert variant_row("learnable_gelu", BERT, 512)["params_ffn"] == 12 * W + 12


def test_timing_and_table() -> None:
    rows = report(["model=tiny"], seq_len=8, variants=["relu", "geglu"], timing=False)
    measure_times(rows, seq_len=8, repeats=1, warmup=0)
    assert all(r["ffn_ms"] > 0 and r["act_ms"] > 0 for r in rows)
    table = to_markdown(rows, 8).splitlines()
    assert len(table) == 4 and "FFN fwd+bwd ms" in table[0] and table[2].startswith("| relu | dense | 256 |")
    with pytest.raises(UnknownNameError, match="valid:"):
        report(["model=tiny"], 8, variants=["nope"], timing=False)


@pytest.mark.parametrize("entry", [["-m", "ffn_zoo.analysis.report"]])
def test_command_line(entry: list[str]) -> None:
    proc = subprocess.run([sys.executable, *entry, "model=tiny", "--seq-len", "32", "--no-time", "--variants",
                           "gelu,swiglu"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "| swiglu | gated | 168 |" in proc.stdout

def test_command_line_error_is_one_line() -> None:
    bad = subprocess.run([sys.executable, "-m", "ffn_zoo.analysis.report", "--variants", "nope", "--no-time"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.strip().startswith("error: unknown ffn variant 'nope'")
    assert "Traceback" not in bad.stderr
