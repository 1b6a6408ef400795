"""model.init: the measured std of every weight and of the FFN pre-activations at init, against the formula.

Tolerances are 5 standard errors of the sampling: a sample std of n i.i.d. weights has relative error 1/√(2n)
(normal weights; the truncated normal has a lower kurtosis, so less), and the mean square of the pre-activations
h = W·x over the H hidden units, given the inputs x (covariance S), has std σ_w²·√(2·tr(S²)/H) around σ_w²·tr(S).
"""

import math

import pytest
import torch

from ffn_zoo import build_model
from ffn_zoo.errors import ConfigError, UnknownNameError
from ffn_zoo.nn.ffn import FFNSpec
from ffn_zoo.nn.model import INITS, ModelConfig, TransformerLM

D, LAYERS, VOCAB = 128, 2, 2048
HIDDEN = {False: 512, True: 344}  # dense d_ff and its parameter-matched gated width
VARIANTS = [(False, "gelu"), (True, "silu")]

# std of N(0, 1) truncated to [-2, 2] (TF1 truncated_normal_initializer draws, no variance correction)
_PHI2, _CDF2 = math.exp(-2.0) / math.sqrt(2 * math.pi), 0.5 * (1 + math.erf(2 / math.sqrt(2)))
TRUNCATED = math.sqrt(1 - 4 * _PHI2 / (2 * _CDF2 - 1))


def model(init: str, gated: bool, act: str) -> TransformerLM:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=VOCAB, seq_len=64, d_model=D, n_layers=LAYERS, n_heads=4, init=init,
                      ffn=FFNSpec(gated, act, HIDDEN[gated]))
    return TransformerLM(cfg)


def expected_std(init: str, name: str, p: torch.Tensor) -> float:
    """The formula, written out per weight (nn.Linear weights are (out, in): fan_in = p.shape[1])."""
    residual_out = name.endswith(("attn.out.weight", "ffn.w_out.weight"))
    if init == "gpt2":
        return 0.02 / math.sqrt(2 * LAYERS) if residual_out else 0.02
    if name in ("tok_emb.weight", "pos_emb.weight"):
        return 1.0
    return p.shape[1] ** -0.5 * (TRUNCATED if ".ffn." in name else 1.0)


def test_truncated_factor_is_the_known_constant() -> None:
    assert TRUNCATED == pytest.approx(0.87962566, abs=1e-8)


@pytest.mark.parametrize("gated, act", VARIANTS)
@pytest.mark.parametrize("init", ["gpt2", "fan_in"])
def test_weight_std_matches_the_formula(init: str, gated: bool, act: str) -> None:
    m = model(init, gated, act)
    matrices = [(n, p) for n, p in m.named_parameters() if p.dim() == 2]
    names = {n.split(".")[-2] for n, _ in matrices}
    assert names >= ({"w_gate", "w_up"} if gated else {"w_in"}) | {"w_out", "qkv", "out", "tok_emb", "pos_emb"}
    for name, p in matrices:
        std, n = expected_std(init, name, p), p.numel()
        assert abs(p.std().item() / std - 1) < 5 / math.sqrt(2 * n), (name, p.std().item(), std)
        assert abs(p.mean().item()) < 5 * std / math.sqrt(n), name
        if init == "fan_in" and ".ffn." in name:  # truncated at ±2σ, σ = 1/√fan_in
            assert p.abs().max().item() <= 2 * p.shape[1] ** -0.5
    assert m.head.weight is m.tok_emb.weight


@pytest.mark.parametrize("gated, act", VARIANTS)
@pytest.mark.parametrize("init", ["gpt2", "fan_in"])
def test_ffn_preactivation_std_matches_the_formula(init: str, gated: bool, act: str) -> None:
    m = model(init, gated, act).eval()
    inputs: list[torch.Tensor] = []
    hooks = [b.ffn.register_forward_pre_hook(lambda mod, args: inputs.append(args[0].detach().flatten(0, 1)))
             for b in m.blocks]
    with torch.no_grad():
        m(torch.randint(0, VOCAB, (8, 64), generator=torch.Generator().manual_seed(1)))
    for h in hooks:
        h.remove()
    for block, x in zip(m.blocks, inputs):  # x: (N, d), the normed FFN input
        S = x.T @ x / x.shape[0]  # (d, d)
        assert torch.trace(S).item() == pytest.approx(D, rel=0.02)  # LayerNorm output: |x|² ≈ d
        for proj in [block.ffn.w_gate, block.ffn.w_up] if gated else [block.ffn.w_in]:
            sigma_w = expected_std(init, "blocks.0.ffn.w_in.weight", proj.weight)
            h = proj(x)  # (N, hidden) pre-activations
            mean_square = h.square().mean().item()
            predicted = sigma_w ** 2 * torch.trace(S).item()
            se = sigma_w ** 2 * math.sqrt(2 * torch.trace(S @ S).item() / h.shape[1])
            assert abs(mean_square - predicted) < 5 * se, (init, mean_square, predicted, se)
            # the headline: std ≈ σ_w·√d, i.e. 0.02·√d for gpt2 and 0.88 (truncated 1/√d) for fan_in
            assert math.sqrt(mean_square) == pytest.approx(sigma_w * math.sqrt(D), rel=0.1)


@pytest.mark.parametrize("init", ["gpt2", "fan_in"])
def test_logits_start_at_the_scale_the_init_promises(init: str) -> None:
    """fan_in: N(0, 1) embeddings and the head input ×d^-0.5 (T5) give logits of std ~1; gpt2: 0.02·√d."""
    m = model(init, False, "gelu").eval()
    with torch.no_grad():
        logits = m(torch.randint(0, VOCAB, (4, 64), generator=torch.Generator().manual_seed(2)))  # (B, T, V)
    expected = 1.0 if init == "fan_in" else 0.02 * math.sqrt(D)
    assert logits.square().mean().sqrt().item() == pytest.approx(expected, rel=5 * math.sqrt(2 / VOCAB))
    assert (m.head_scale is not None) == INITS[init].scaled_head


def test_unknown_init_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match=r"^unknown model.init 'xavier'; valid: fan_in, gpt2$") as e:
        ModelConfig(vocab_size=10, init="xavier")
    assert "\n" not in str(e.value)


def test_build_model_takes_the_init() -> None:
    assert build_model("tiny", "swiglu", vocab_size=64, init="fan_in").cfg.init == "fan_in"
    assert build_model("tiny", "swiglu", vocab_size=64).cfg.init == "gpt2"  # the yaml default


@pytest.mark.parametrize("init", list(INITS))
def test_banner_line_states_the_weights_actual_scale(init: str) -> None:
    """The banner's init line is filled in with this model's σ; for gpt2, the residual σ it states is the measured
    std of the FFN's output weights (so a run at ``model.init_std=0.0115`` says which scale it trained at)."""
    m = model(init, False, "gelu")
    line = INITS[init].describe(m.cfg)
    assert "{" not in line and INITS[init].summary.split("  [")[-1] in line  # every field filled, paper kept
    if init == "gpt2":
        w_out = m.blocks[0].ffn.w_out.weight
        stated = float(line.split("residual outputs N(0, ")[1].split(")")[0])
        assert stated == pytest.approx(w_out.std().item(), rel=5 / math.sqrt(2 * w_out.numel()) + 1e-3)
        assert f"N(0, {m.cfg.init_std:.3g})" in line


# ---- model.residual_std: the residual-output σ, apart from depth (the depth study's mechanism test) -----------

RESIDUAL_OUT = ("attn.out.weight", "ffn.w_out.weight")


def _weights(**kw) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=64, seq_len=16, d_model=64, n_layers=4, n_heads=4,
                      ffn=FFNSpec(gated=True, activation="silu", hidden=128), **kw)
    return {n: p.detach().clone() for n, p in TransformerLM(cfg).named_parameters()}


def test_the_default_residual_std_is_gpt2s_rule_bitwise() -> None:
    """residual_std=gpt2 (the default) draws what an explicit init_std/√(2·layers) draws, bit for bit: every
    committed run's initial weights are unchanged by the setting."""
    default, explicit = _weights(), _weights(residual_std=0.02 / math.sqrt(2 * 4))
    assert default.keys() == explicit.keys()
    assert all(torch.equal(default[n], explicit[n]) for n in default)


def test_residual_std_reaches_exactly_the_residual_output_matrices() -> None:
    default, moved = _weights(), _weights(residual_std=0.05)
    changed = {n for n in default if not torch.equal(default[n], moved[n])}
    assert changed == {n for n in default if n.endswith(RESIDUAL_OUT)} and changed
    assert all(abs(moved[n].std().item() - 0.05) < 0.005 for n in changed)


@pytest.mark.parametrize("value,words", [("deep", "give gpt2"), (-0.01, "positive"), (0.0, "positive")])
def test_a_bad_residual_std_is_one_line(value, words: str) -> None:
    with pytest.raises(ConfigError, match="model.residual_std") as e:
        _weights(residual_std=value)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_residual_std_belongs_to_the_gpt2_init() -> None:
    with pytest.raises(ConfigError, match="model.init=fan_in has none"):
        _weights(init="fan_in", residual_std=0.01)
    cfg = ModelConfig(vocab_size=64, seq_len=16, d_model=64, n_layers=4, n_heads=4, residual_std=0.01)
    assert "(model.residual_std)" in INITS["gpt2"].describe(cfg) and "0.01" in INITS["gpt2"].describe(cfg)
