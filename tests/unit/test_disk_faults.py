"""A full disk (or another write the OS refuses) while checkpointing or writing metrics.json: the previous
file stays whole, no temporary is left, and the one-line message names the file, the last good checkpoint
(loaded to check it) and the resume command. Checkpoints are written once, never staged in /tmp."""

import errno
import re
import tempfile
from pathlib import Path

import pytest

from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.atomic import atomic_write, write_json
from ffn_zoo.training.lifecycle.checkpoint import load_checkpoint
from ffn_zoo.training.lifecycle.failures import WriteFailed, record_failure, write_failure
from ffn_zoo.training.recipe.optim import OPTIMIZERS
from ffn_zoo.training.reporting.summary import OPTIMIZER_STATE_COPIES, checkpoint_bytes
from tests.helpers import FAST, train


def visible(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_refused_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    write_json(target, {"status": "ok"})

    def fills_up(f) -> None:
        f.write(b'{"status": "fa')  # half the new file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"No space left on device: '.*metrics.json'") as e:
        atomic_write(target, fills_up)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(target)  # names the file, not the temporary
    assert target.read_text() == '{\n  "status": "ok"\n}\n'
    assert visible(tmp_path) == ["metrics.json"]


def test_full_disk_at_the_third_checkpoint_names_the_last_good_one(tmp_path: Path) -> None:
    # last.ckpt at 2, at 4, best.ckpt at 4 (the 3rd write: it fails after 4 KiB), ...
    overrides = ["trainer.max_steps=6", "trainer.val_check_interval=4", "checkpoint.every_n_steps=2",
                 "debug.disk_full_at_checkpoint=3"]
    with pytest.raises(OSError) as e:
        train(overrides, tmp_path)
    run_dir = tmp_path / "run"
    failed = write_failure(e.value, run_dir, ckpt_path=None, log_dir=tmp_path)
    assert isinstance(failed, WriteFailed)
    message = str(failed)
    assert "\n" not in message
    last = run_dir / "checkpoints" / "last.ckpt"
    assert re.fullmatch(rf"could not write {re.escape(str(run_dir / 'checkpoints/best.ckpt'))}: No space left on "
                        rf"device \(ENOSPC\); last good checkpoint {re.escape(str(last))} \(step 4, loads\); free "
                        rf"space, then resume: python train.py .*ckpt_path=\"{re.escape(str(last.resolve()))}\"'",
                        message), message
    assert load_checkpoint(last)["global_step"] == 4
    assert not any(p.name.startswith(".") for p in (run_dir / "checkpoints").iterdir())  # no temporary left
    assert not (run_dir / "checkpoints" / "best.ckpt").exists()
    assert record_failure(run_dir, failed, with_traceback=False)
    m = __import__("json").loads((run_dir / "metrics.json").read_text())
    assert m["status"] == "failed" and m["checkpoint"] == str(last) and m["checkpoint_step"] == 4
    assert "traceback" not in m


def test_other_errors_are_no_write_failures(tmp_path: Path) -> None:
    assert write_failure(FileNotFoundError(errno.ENOENT, "No such file", "x.txt"), tmp_path, None, tmp_path) is None
    assert write_failure(RuntimeError("a bug"), tmp_path, None, tmp_path) is None  # a read, above; a bug
    wrapped = RuntimeError("PytorchStreamWriter failed")  # how torch.save reports a failed write
    wrapped.__context__ = OSError(errno.EDQUOT, "Disk quota exceeded")
    failed = write_failure(wrapped, tmp_path, None, tmp_path)
    assert "Disk quota exceeded (EDQUOT); no checkpoint was written" in str(failed)


def test_checkpoints_are_written_once_never_staged_in_the_system_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def staged(*args, **kwargs):
        raise AssertionError("a checkpoint was staged in the system temp folder")

    monkeypatch.setattr(tempfile, "mkstemp", staged)  # fsspec's transaction, behind Lightning's _atomic_save
    monkeypatch.setattr("lightning.fabric.plugins.io.torch_io._atomic_save", staged)
    train(["trainer.max_steps=4", "checkpoint.every_n_steps=2"], tmp_path)
    assert load_checkpoint(tmp_path / "run/checkpoints/last.ckpt")["global_step"] == 4


def test_the_checkpoint_size_estimate_matches_a_written_checkpoint(tmp_path: Path) -> None:
    assert OPTIMIZER_STATE_COPIES.keys() == OPTIMIZERS.keys()  # every optimizer has its state size
    m = train(["trainer.max_steps=2", "model.d_model=128"], tmp_path)
    cfg = compose([f"log_dir={tmp_path}", *FAST, "model.d_model=128"])
    estimate = checkpoint_bytes(TransformerLM(model_config(cfg, vocab_size=2048)), "adamw")
    written = (tmp_path / "run/checkpoints/last.ckpt").stat().st_size
    assert m["status"] == "ok" and abs(estimate - written) / written < 0.02, (estimate, written)
