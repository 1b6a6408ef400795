"""The Transformer: shapes, causality, init, parameter counts, and that build_model is train.py's network."""

import pytest
import torch

from ffn_zoo import build_model
from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.errors import ConfigError
from ffn_zoo.nn.ffn import FFNSpec
from ffn_zoo.nn.model import ModelConfig, TransformerLM


def tiny(**kw) -> TransformerLM:
    base = dict(vocab_size=50, seq_len=16, d_model=32, n_layers=2, n_heads=4, ffn=FFNSpec(hidden=64))
    return TransformerLM(ModelConfig(**{**base, **kw}))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_logits_shape(norm: str) -> None:
    model = tiny(norm=norm)
    idx = torch.randint(0, 50, (3, 10))
    assert model(idx).shape == (3, 10, 50)


@pytest.mark.parametrize("gated, act", [(False, "gelu"), (True, "silu")])
def test_causal(gated: bool, act: str) -> None:
    torch.manual_seed(0)
    model = tiny(ffn=FFNSpec(gated, act, hidden=64)).eval()
    idx = torch.randint(0, 50, (2, 12))
    t = 7
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % 50
    a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :t], b[:, :t])  # positions before t cannot see token t
    assert not torch.allclose(a[:, t:], b[:, t:])


def test_bidirectional_sees_the_future() -> None:
    model = tiny(causal=False).eval()
    idx = torch.randint(0, 50, (1, 8))
    changed = idx.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 50
    assert not torch.allclose(model(idx)[:, 0], model(changed)[:, 0])


def test_head_is_tied_and_residual_projections_scaled() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=1000, d_model=256, n_layers=8, n_heads=4, ffn=FFNSpec(hidden=1024)))
    assert model.head.weight is model.tok_emb.weight
    assert model.blocks[0].attn.qkv.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].ffn.w_out.weight.std().item() == pytest.approx(0.02 / 4, rel=0.05)  # 1/sqrt(2*8)


def test_sequence_longer_than_position_table() -> None:
    with pytest.raises(ConfigError, match="position table"):
        tiny()(torch.zeros(1, 17, dtype=torch.long))


def test_heads_must_divide_d_model() -> None:
    with pytest.raises(ConfigError, match="n_heads"):
        tiny(n_heads=5)


@pytest.mark.parametrize("field", ["d_model", "n_layers", "vocab_size", "seq_len"])
def test_non_positive_sizes(field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        tiny(**{field: 0})


def test_bert_base_shape_and_counts() -> None:
    model = build_model("bert_base", "gelu", vocab_size=8192)
    cfg = model.cfg
    assert (cfg.d_model, cfg.n_layers, cfg.n_heads, cfg.ffn.hidden) == (768, 12, 12, 3072)
    assert model.num_params(ffn_only=True) == 12 * 4_718_592
    gated = build_model("bert_base", "geglu", vocab_size=8192)
    assert gated.cfg.ffn == FFNSpec(True, "gelu", 2048)
    assert gated.num_params() == model.num_params()  # parameter-matched end to end


def test_build_model_matches_train_composition() -> None:
    """build_model and train.py resolve the same configs through the same function."""
    model = build_model("mini", "swiglu", vocab_size=512, seq_len=64)
    cfg = compose(["model=mini", "ffn=swiglu", "model.vocab_size=512", "model.seq_len=64"])
    assert model.cfg == model_config(cfg, vocab_size=512)
    out = model(torch.randint(0, 512, (2, 64)))
    assert out.shape == (2, 64, 512)


def test_build_model_rejects_unknown_override() -> None:
    with pytest.raises(ConfigError, match="d_modle"):
        build_model("tiny", "gelu", d_modle=8)


def test_vocab_mismatch_is_reported() -> None:
    cfg = compose(["model=tiny", "model.vocab_size=100"])
    with pytest.raises(ConfigError, match="vocab"):
        model_config(cfg, vocab_size=2048)


def test_the_attention_benchmark_runs_and_its_forms_agree(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/bench_attention.py at a tiny shape: the three forms of causal attention, each within rounding of the
    flash kernel (output and gradients), one row each."""
    import runpy

    from tests.helpers import REPO

    monkeypatch.setattr("sys.argv", ["bench", "--model", "tiny", "--batch", "2", "--seq", "16", "--repeats", "1",
                                     "--calls", "1", "--threads", "1"])
    runpy.run_path(str(REPO / "scripts" / "bench_attention.py"), run_name="__main__")
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [r.split("  ")[0].strip() for r in rows] == ["SDPA (flash)", "SDPA math", "written out"]
    for row in rows:
        diffs = dict(part.split() for part in row.split("vs flash: ")[1].split(", "))  # {"out": ..., "grad": ...}
        out, grad = float(diffs["out"]), float(diffs["grad"])
        assert out < 1e-5 and grad < 1e-4
