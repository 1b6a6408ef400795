"""Every bad input is one line naming the setting or file and what would be valid (README's reliability table).

Most rows run ``ffn_zoo.train.run`` in-process (the code path train.py takes, without interpreter start-up);
a few go through ``train.py`` in a subprocess to check the exit code and that no traceback is printed.
"""

import shutil
from pathlib import Path

import pytest
import torch
from hydra.errors import ConfigCompositionException

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.training.lifecycle.checkpoint import CheckpointError
from ffn_zoo.errors import FFNZooError
from tests.helpers import run_train, train

SETTINGS = [  # (overrides, what the one-line message must say)
    (["data.name=foo"], r"unknown data 'foo'; valid: .*toy"),
    (["optim.name=sgd"], r"unknown optim 'sgd'; valid: adafactor, adamw"),
    (["ffn.activation=elo"], r"^unknown ffn.activation 'elo'; valid: gelu, .*, silu"),
    (["ffn.gated=true"], r"ffn.name=gelu means gated=False, activation=gelu, but the config says gated=True"),
    (["model.n_heads=3"], r"model.d_model=64 is not divisible by model.n_heads=3; pick n_heads from \[1, 2, 4"),
    (["trainer.max_steps=0"], r"trainer.max_steps must be > 0, got 0"),
    (["trainer.max_steps=-5"], r"trainer.max_steps must be > 0, got -5"),
    (["data.batch_size=0"], r"data.batch_size must be > 0, got 0"),
    (["data.batch_size=-1"], r"data.batch_size must be > 0, got -1"),
    (["data.val_batch_size=0"], r"data.val_batch_size must be > 0"),
    (["model.init=xavier"], r"unknown model.init 'xavier'; valid: fan_in, gpt2"),
    (["optim.lr=0"], r"optim.lr must be > 0, got 0"),
    (["optim.lr=-1e-3"], r"optim.lr must be > 0, got -0.001"),
    (["optim.warmup=-1"], r"optim.warmup=-1 must be >= 0"),
    (["model.d_model=0"], r"model.d_model must be > 0"),
    (["model.n_layers=0"], r"model.n_layers must be > 0"),
    (["model.n_heads=0"], r"model.n_heads must be > 0"),
    (["model.d_ff=0"], r"model.d_ff must be > 0"),
    (["data.seq_len=0"], r"data.seq_len must be > 0"),
    (["data.train_tokens=0"], r"data.train_tokens must be > 0"),
    (["trainer.val_check_interval=0"], r"trainer.val_check_interval must be > 0"),
    (["checkpoint.every_n_steps=0"], r"checkpoint.every_n_steps=0 must be > 0, or null"),
    (["faults.on_nonfinite=ignore"], r"faults.on_nonfinite='ignore'; valid: stop, skip"),
    (["debug.sigterm_at=restore"], r"debug.sigterm_at='restore'; valid: null, setup, or a step number"),
    (["data.seq_len=64"],
     r"data.seq_len=64 is longer than the position table \(model.seq_len=32\); set model.seq_len >= 64"),
    (["model.vocab_size=1000"],
     r"model.vocab_size=1000 but the corpus/tokenizer has 2048 tokens; set model.vocab_size=2048"),
    (["ckpt_path=/nonexistent/last.ckpt"], r"ckpt_path=/nonexistent/last.ckpt: no such file or folder; valid: last"),
    (["ckpt_path=last"], r"ckpt_path=last: no run under .* has checkpoints/last.ckpt"),
]


@pytest.mark.parametrize("overrides,message", SETTINGS, ids=[o[0] for o, _ in SETTINGS])
def test_bad_setting_is_one_line(overrides: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(FFNZooError, match=message) as e:
        train(overrides, tmp_path)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("group", ["ffn", "model", "data", "tokenizer", "optim"])
def test_unknown_group_name_lists_the_valid_ones(group: str) -> None:
    listing = rf"Could not find '{group}/nope'\s+Available options in '{group}'"
    with pytest.raises(ConfigCompositionException, match=listing):
        compose([f"{group}=nope"])


def test_unknown_key_is_refused() -> None:
    with pytest.raises(ConfigCompositionException, match=r"Could not override 'model.d_modl'"):
        compose(["model.d_modl=3"])


def test_train_py_exits_nonzero_without_traceback(tmp_path: Path) -> None:
    # Hydra's own errors too (tests/smoke/test_train.py checks an unknown ffn name the same way)
    proc = run_train(["model=tiny", "model.d_modl=3"], tmp_path, check=False)
    assert proc.returncode == 1
    assert "Could not override 'model.d_modl'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # no run folder for a config that never composed


# ---------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def gelu_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished model=tiny ffn=gelu run's last.ckpt."""
    root = tmp_path_factory.mktemp("ckpt")
    train(["ffn=gelu"], root)
    return root / "run" / "checkpoints" / "last.ckpt"


def test_truncated_checkpoint(gelu_ckpt: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(gelu_ckpt.read_bytes()[: gelu_ckpt.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=rf"ckpt_path={cut} is not a readable checkpoint .* truncated"):
        train(["ffn=gelu", f"ckpt_path={cut}"], tmp_path)


def test_not_a_checkpoint(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(CheckpointError, match=rf"ckpt_path={text} is not a readable checkpoint"):
        train([f"ckpt_path={text}"], tmp_path)
    tensors = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2)}, tensors)  # a torch file, but not a training checkpoint
    with pytest.raises(CheckpointError, match=r"is not an ffn-zoo training checkpoint \(no state_dict/global_step\)"):
        train([f"ckpt_path={tensors}"], tmp_path, name="run2")


def test_checkpoint_from_another_variant_names_the_parameter_and_shapes(gelu_ckpt: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"from another model: model.blocks.0.ffn.w_out.weight has shape "
                                              r"\(64, 256\) in the checkpoint but \(64, 168\) in this model"):
        train(["ffn=geglu", f"ckpt_path={gelu_ckpt}"], tmp_path)


def test_checkpoint_from_another_shape(gelu_ckpt: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"model.blocks.0.ffn.w_in.weight has shape \(256, 64\) in the "
                                              r"checkpoint but \(128, 64\) in this model"):
        train(["ffn=gelu", "model.d_ff=128", f"ckpt_path={gelu_ckpt}"], tmp_path)


def test_checkpoint_with_same_shapes_but_another_activation(gelu_ckpt: Path, tmp_path: Path) -> None:
    with pytest.raises(CheckpointError,
                       match=r"was trained with ffn.activation=gelu but this run has ffn.activation=relu"):
        train(["ffn=relu", f"ckpt_path={gelu_ckpt.parent.parent}"], tmp_path)  # a run folder works as ckpt_path too


def test_nothing_is_overwritten_by_a_bad_resume(gelu_ckpt: Path, tmp_path: Path) -> None:
    before = gelu_ckpt.read_bytes()
    copy = tmp_path / "run_a"
    shutil.copytree(gelu_ckpt.parent.parent, copy)
    with pytest.raises(CheckpointError):
        train(["ffn=geglu", f"ckpt_path={copy}"], tmp_path)
    assert (copy / "checkpoints" / "last.ckpt").read_bytes() == before
