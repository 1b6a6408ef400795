"""MLM masking: BERT's 15% / 80-10-10 rates, fixed validation masks, [MASK] past the corpus
vocabulary, and a loss on masked positions only."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.data.types import Corpus
from ffn_zoo.errors import ConfigError, UnknownNameError
from ffn_zoo.training.recipe.module import LitLM
from ffn_zoo.nn.ffn import FFNSpec
from ffn_zoo.nn.model import ModelConfig, TransformerLM
from ffn_zoo.training.recipe.objectives import IGNORE_INDEX, Objective, fixed_masks, mask_tokens, model_vocab_size, prepare_objective

V = 1000  # corpus vocabulary; [MASK] is id V


def test_masking_rates_on_a_large_sample() -> None:
    tokens = torch.randint(0, V, (1000, 1000))  # 10^6 positions
    inputs, targets = mask_tokens(tokens, V, V, generator=torch.Generator().manual_seed(0))
    chosen = targets != IGNORE_INDEX
    n = chosen.sum().item()
    assert n / tokens.numel() == pytest.approx(0.15, abs=0.002)
    masked = (inputs == V) & chosen
    kept = (inputs == tokens) & chosen  # includes random draws that hit the same id (1/V of 10%)
    replaced = chosen & ~masked & ~kept
    assert masked.sum().item() / n == pytest.approx(0.8, abs=0.005)
    assert kept.sum().item() / n == pytest.approx(0.1 + 0.1 / V, abs=0.004)
    assert replaced.sum().item() / n == pytest.approx(0.1 - 0.1 / V, abs=0.004)
    # unchosen positions: input unchanged and no target; chosen ones: the original token is the target
    assert torch.equal(inputs[~chosen], tokens[~chosen])
    assert torch.equal(targets[chosen], tokens[chosen])
    assert inputs.max().item() == V and inputs[inputs != V].max().item() < V  # random ids never [MASK]


def test_validation_masks_are_fixed_per_row() -> None:
    rows = torch.randint(0, V, (12, 32))
    x_all, y_all = fixed_masks(rows, V, V, seed=0)
    x_part, y_part = fixed_masks(rows[5:9], V, V, seed=0)  # another batching of the same rows
    assert torch.equal(x_all[5:9], x_part) and torch.equal(y_all[5:9], y_part)
    x_again, _ = fixed_masks(rows, V, V, seed=0)
    assert torch.equal(x_all, x_again)
    x_other, _ = fixed_masks(rows, V, V, seed=1)
    assert not torch.equal(x_all, x_other)


def test_objective_shapes_and_vocab() -> None:
    batch = torch.randint(0, V, (3, 17))  # (B, seq_len + 1)
    x, y = Objective("clm")(batch, train=True)
    assert torch.equal(x, batch[:, :-1]) and torch.equal(y, batch[:, 1:])
    mlm = Objective("mlm", corpus_vocab=V)
    x, y = mlm(batch, train=True)
    assert x.shape == y.shape == (3, 16) and mlm.mask_id == V
    chosen = y != IGNORE_INDEX
    assert torch.equal(y[chosen], batch[:, :-1][chosen])  # MLM reads the same first seq_len tokens
    assert model_vocab_size("clm", V) == V and model_vocab_size("mlm", V) == V + 1
    with pytest.raises(UnknownNameError, match="valid: clm, mlm"):
        model_vocab_size("xlm", V)


def _objective_cfg(overrides: list[str]) -> tuple:
    cfg = compose(overrides)
    return cfg.objective, cfg.mlm


def test_prepare_objective_drops_the_clm_floor() -> None:
    blocks = np.random.default_rng(0).integers(0, V, (4, 9))
    corpus = Corpus("c", V, blocks, blocks, optimal_val_loss=3.0, val_bytes=100)
    same, obj = prepare_objective(*_objective_cfg(["objective=clm"]), corpus)
    assert same is corpus and obj.name == "clm"
    masked, obj = prepare_objective(*_objective_cfg(["objective=mlm"]), corpus)
    assert obj.name == "mlm" and masked.optimal_val_loss is None and masked.val_bytes is None
    with pytest.raises(ConfigError, match="mlm.mask_prob"):
        prepare_objective(*_objective_cfg(["objective=mlm", "mlm.mask_prob=0"]), corpus)


def test_loss_is_on_masked_positions_only() -> None:
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(vocab_size=V + 1, seq_len=32, d_model=32, n_layers=1, n_heads=2,
                                      ffn=FFNSpec(hidden=64), causal=False))
    module = LitLM(model, compose([]).optim, max_steps=10, objective=Objective("mlm", corpus_vocab=V),
                   fused_loss=False)
    batch = torch.randint(0, V, (4, 33))
    x, y = module.objective(batch, train=False)
    chosen = y != IGNORE_INDEX
    assert 0 < chosen.sum() < chosen.numel()
    logits = model(x)  # (B, T, V + 1)
    by_hand = F.cross_entropy(logits[chosen], y[chosen], reduction="sum")
    assert module.nll(x, y, "sum").item() == pytest.approx(by_hand.item(), rel=1e-5)
    module.eval()
    assert module.loss(batch, "mean").item() == pytest.approx(by_hand.item() / chosen.sum().item(), rel=1e-5)


def test_projecting_only_the_chosen_positions_trains_as_the_full_output_layer_does() -> None:
    """Under MLM the output layer runs on the chosen positions only (TransformerLM's ``select``): the logits of those
    rows are the full layer's, and 30 AdamW steps follow the full-logits loss within 1e-5, weights within 1e-5."""
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=V + 1, seq_len=32, d_model=32, n_layers=2, n_heads=2, ffn=FFNSpec(True, "silu", 64),
                      causal=False)
    full, chosen_only = TransformerLM(cfg), TransformerLM(cfg)
    chosen_only.load_state_dict(full.state_dict())
    module = LitLM(chosen_only, compose([]).optim, max_steps=30, objective=Objective("mlm", corpus_vocab=V),
                   fused_loss=False)
    batch = torch.randint(0, V, (8, 33))
    x, y = module.objective(batch, train=False)
    torch.testing.assert_close(chosen_only(x, select=y != IGNORE_INDEX), full(x)[y != IGNORE_INDEX], rtol=0, atol=1e-6)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (full, chosen_only)]
    g = torch.Generator().manual_seed(1)
    for _ in range(30):
        x, y = mask_tokens(torch.randint(0, V, (8, 32), generator=g), V, V, generator=g)
        ref = F.cross_entropy(full(x).flatten(0, 1), y.flatten(), ignore_index=IGNORE_INDEX)
        ours = module.nll(x, y, "mean")
        assert ours.item() == pytest.approx(ref.item(), abs=1e-5)
        for opt, loss in zip(opts, (ref, ours)):
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, a), b in zip(full.named_parameters(), chosen_only.parameters()):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5, msg=name)
