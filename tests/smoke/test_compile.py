"""impl.compile (torch.compile, inductor on CPU): the compiled model computes the same loss and gradients as
eager, keeps its parameter names (so a checkpoint resumes with the switch flipped either way), and trains
through train.py with the activation instruments on. Needs a C++ compiler, which inductor calls on CPU."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.nn.model import TransformerLM
from tests.helpers import run_train, tiny

pytestmark = [
    pytest.mark.smoke,
    pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                       reason="torch.compile on CPU needs a C++ compiler"),
]


@pytest.mark.parametrize("ffn", ["gelu", "swiglu"])
def test_compiled_loss_and_gradients_match_eager(ffn: str) -> None:
    torch.manual_seed(0)
    vocab = 512
    eager = TransformerLM(model_config(compose(["model=tiny", f"ffn={ffn}"]), vocab_size=vocab))
    compiled = copy.deepcopy(eager)
    compiled.compile()  # in place, as train.py does for impl.compile=true
    x = torch.randint(0, vocab, (4, 33))  # (B, T + 1)

    losses = []
    for model in (eager, compiled):
        logits = model(x[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    assert list(compiled.state_dict()) == list(eager.state_dict())  # no _orig_mod. prefix
    for (name, p), (_, q) in zip(eager.named_parameters(), compiled.named_parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=f"gradient of {name}")


def test_compiled_run_resumes_without_compile(tmp_path: Path) -> None:
    args = tiny("trainer.max_steps=10", "trainer.val_check_interval=10", "checkpoint.every_n_steps=5",
                "instruments.every_n_steps=5")
    run_train([*args, "impl.compile=true"], tmp_path / "a", timeout=600)
    (run_a,) = (tmp_path / "a").glob("runs/*/")
    m = json.loads((run_a / "metrics.json").read_text())
    assert m["status"] == "ok" and m["steps"] == 10 and m["val_loss"] < torch.log(torch.tensor(2048.0)).item()
    assert m["act_stats_step"] == 10 and len(m["act_dead_frac"]) == 2  # instruments measured the compiled model
    keys = torch.load(run_a / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
    assert not [k for k in keys if "_orig_mod" in k]

    ckpt = run_a / "checkpoints/last.ckpt"
    proc = run_train([*tiny("trainer.max_steps=12", "trainer.val_check_interval=12"), "impl.compile=false",
                      f'ckpt_path="{ckpt}"'], tmp_path / "b")
    assert f"resume   {ckpt} at step 10" in proc.stdout
    (run_b,) = (tmp_path / "b").glob("runs/*/")
    assert json.loads((run_b / "metrics.json").read_text())["steps"] == 12
