"""The fused output layer + cross-entropy (nn/losses.py, impl.fused_loss): the loss and both gradients of the plain
``F.cross_entropy(x @ W.T)`` for any chunking, ignored rows and reduction; and over 50 AdamW steps a model trained
through it has the plain path's losses within 1e-5 (weights within 1e-4), under both objectives and both inits (T5's
head scale included)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ffn_zoo.nn.ffn import FFNSpec
from ffn_zoo.nn.losses import linear_cross_entropy
from ffn_zoo.nn.model import ModelConfig, TransformerLM
from ffn_zoo.training.recipe.build import compose
from ffn_zoo.training.recipe.module import LitLM
from ffn_zoo.training.recipe.objectives import IGNORE_INDEX, Objective

V = 97


def _inputs(n: int = 37, c: int = 16, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x, w = torch.randn(n, c, generator=g), torch.randn(V, c, generator=g) * 0.3
    t = torch.randint(0, V, (n,), generator=g)
    t[::5] = IGNORE_INDEX  # some rows carry no loss, as MLM's unchosen positions or padding would
    return x, w, t


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("chunk_rows", [1, 8, 37, 512])  # one row, a ragged last chunk, exact, all in one
def test_loss_and_gradients_are_the_plain_cross_entropys(reduction: str, chunk_rows: int) -> None:
    x, w, t = _inputs()
    xa, wa = x.clone().requires_grad_(), w.clone().requires_grad_()
    plain = F.cross_entropy(xa @ wa.T, t, ignore_index=IGNORE_INDEX, reduction=reduction)
    plain.backward(torch.tensor(0.7))  # a scale from above (the loss is rarely the graph's last node)
    xb, wb = x.clone().requires_grad_(), w.clone().requires_grad_()
    fused = linear_cross_entropy(xb, wb, t, ignore_index=IGNORE_INDEX, reduction=reduction, chunk_rows=chunk_rows)
    fused.backward(torch.tensor(0.7))
    torch.testing.assert_close(fused, plain, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(wb.grad, wa.grad, rtol=1e-5, atol=1e-7)
    assert xb.grad[::5].abs().max() == 0  # an ignored row gets no gradient
    with torch.inference_mode():  # validation: the loss alone, no gradients computed
        alone = linear_cross_entropy(x, w, t, reduction=reduction, chunk_rows=chunk_rows)
    torch.testing.assert_close(alone, plain.detach(), rtol=1e-6, atol=1e-6)


def test_under_autocast_it_is_the_plain_path() -> None:
    x, w, t = _inputs()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = linear_cross_entropy(x, w, t)
        plain = F.cross_entropy((x @ w.T).float(), t, ignore_index=IGNORE_INDEX)
    assert torch.equal(fused, plain)


def test_a_bad_reduction_is_refused() -> None:
    x, w, t = _inputs()
    with pytest.raises(ValueError, match="reduction='none'"):
        linear_cross_entropy(x, w, t, reduction="none")


@pytest.mark.parametrize("objective", ["clm", "mlm"])
@pytest.mark.parametrize("init", ["gpt2", "fan_in"])  # fan_in: T5's d^-0.5 on the tied head's input
def test_fifty_steps_follow_the_plain_path(objective: str, init: str) -> None:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=V + 1, seq_len=32, d_model=32, n_layers=2, n_heads=2, ffn=FFNSpec(True, "silu", 64),
                      causal=objective == "clm", init=init)
    plain, fused = TransformerLM(cfg), TransformerLM(cfg)
    fused.load_state_dict(plain.state_dict())
    optim = compose([]).optim
    modules = [LitLM(m, optim, max_steps=50, objective=Objective(objective, corpus_vocab=V), fused_loss=f)
               for m, f in ((plain, False), (fused, True))]
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-3) for m in (plain, fused)]
    g = torch.Generator().manual_seed(1)
    for _ in range(50):
        batch = torch.randint(0, V, (8, 33), generator=g)
        x, y = modules[0].objective(batch, train=False)  # the same inputs for both (mlm: fixed masks)
        losses = [m.nll(x, y, "mean") for m in modules]
        assert losses[1].item() == pytest.approx(losses[0].item(), abs=1e-5)
        for opt, loss in zip(opts, losses):
            opt.zero_grad()
            loss.backward()
            opt.step()
    for (name, a), b in zip(plain.named_parameters(), fused.parameters()):  # Adam turns a rounding-level gradient
        torch.testing.assert_close(b, a, rtol=0, atol=1e-4, msg=name)  # near 0 into a step of up to lr: 2e-5 seen
    with torch.inference_mode():
        assert modules[1].nll(x, y, "sum").item() == pytest.approx(modules[0].nll(x, y, "sum").item(), rel=1e-6)


def test_the_benchmark_script_runs(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """scripts/bench_fused_loss.py at a tiny shape: one row per case, the plain path as the ratio's base."""
    import runpy

    from tests.helpers import REPO

    monkeypatch.setattr("sys.argv", ["bench", "--rows", "64", "--width", "8", "--vocab", "32", "--chunks", "16", "64",
                                     "--repeats", "2", "--steps", "1"])
    runpy.run_path(str(REPO / "scripts" / "bench_fused_loss.py"), run_name="__main__")
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == ["plain", "fused/16", "fused/64"]
