"""Budget ladders under objective=mlm (model=tiny, byte tokenizer, local text with an extra held-out set): a branch
ends bitwise where the plain WSD MLM run of its length ends — the training masks come from the training RNG stream
the checkpoint carries, the validation masks from (row, mlm.mask_seed) — and a sweep of MLM ladders is compared per
budget on the masked-token loss and on the extra set, as causal ladders are. TensorBoard's HParams tab gets each
piece's budget and role, and the extra set's loss as a metric column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from filelock import FileLock

from tests.helpers import TIMING, TrainOnce, assert_same_state, only_run, run_train
from tests.helpers import results as metrics_without

pytestmark = pytest.mark.smoke

# 8 × 32 = 256 tokens a step: budgets 10 and 20 steps, cooldowns 2 and 4, branch points 8 and 16; warm-up 2 steps
BASE = [
    "model=tiny", "data=text", "tokenizer=bytes", "objective=mlm", "data.batch_size=8", "data.val_batch_size=16",
    "data.val_tokens=1024", "trainer.val_check_interval=5", "trainer.log_every_n_steps=5", "model.dropout=0.1",
    "trainer.enable_progress_bar=false", "impl.threads=1", "instruments.act_stats=false", "optim.schedule=wsd",
    "optim.warmup=2", "checkpoint.every_n_steps=null",
]
LADDER = ["trainer.max_steps=20", "ladder.budgets=[2560,5120]"]


@pytest.fixture(scope="module")
def texts(shared_tmp: Path) -> list[str]:
    """Three small text files, written once for every xdist worker (so the ladder below is trained once)."""
    root = shared_tmp / "mlm-texts"
    files = {k: root / f"{k}.txt" for k in ("train", "val", "other")}
    with FileLock(f"{root}.lock"):
        if not all(f.is_file() for f in files.values()):
            root.mkdir(exist_ok=True)
            for name, text, n in (("train", "the quick brown fox jumps over the lazy dog.", 600),
                                  ("val", "the lazy dog sleeps under the brown fox.", 60)):
                files[name].write_text("".join(f"line {i}: {text}\n" for i in range(n)))
            files["other"].write_text("".join(f"verse {i}: shall I compare thee to a summer's day?\n" for i in range(60)))
    return [f"data.train={files['train']}", f"data.val={files['val']}", f"+data.extra_val.other.files={files['other']}",
            "+data.extra_val.other.tokens=1024", f"data.cache_dir={root / 'cache'}"]


@pytest.fixture(scope="module")
def ladder(texts: list[str], train_once: TrainOnce) -> Path:
    return train_once("mlm_ladder", [*BASE, *texts, *LADDER])  # once per pytest, every worker included


def test_an_mlm_branch_equals_the_plain_wsd_mlm_run(ladder: Path, texts: list[str], tmp_path: Path) -> None:
    run_train([*BASE, *texts, "trainer.max_steps=10"], tmp_path)  # budget 2560: its branch leaves the trunk at step 8
    plain, branch = only_run(tmp_path), ladder / "budget=2560"
    mine = {k: v for k, v in metrics_without(branch, TIMING | {"ladder_parent"}).items() if not k.startswith("ladder_")}
    assert mine == metrics_without(plain) and mine["objective"] == "mlm"
    assert mine["extra_val"] == ["other"] and mine["val_other_loss"] != mine["val_loss"]
    assert_same_state(branch / "checkpoints/last.ckpt", plain / "checkpoints/last.ckpt")


def test_ladder_pieces_in_tensorboard_hparams(ladder: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import backend_context, metadata

    seen = {}
    for piece in ("trunk", "budget=2560", "budget=5120"):
        ea = EventAccumulator(str(ladder / piece))
        ea.Reload()
        content = ea.PluginTagToContent(metadata.PLUGIN_NAME)
        experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
        backend_context._sort_and_reduce_to_hparams_limit(experiment)  # the column order the HParams tab shows
        names = [h.name for h in experiment.hparam_infos]
        assert names[:2] == ["ladder.budget_tokens", "ladder.role"]
        tags = {m.name.tag for m in experiment.metric_infos}
        if piece == "trunk":  # ladder.validate=ends: nothing is scored on the trunk, so it never validates
            assert not any(t.startswith("val/") for t in tags) and "train/mean_tokens_per_s" in tags
        else:
            assert {"val/loss", "val/other/loss"} <= tags
        start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
        seen[piece] = (start.hparams["ladder.role"].string_value, start.hparams["ladder.budget_tokens"].number_value)
    assert seen == {"trunk": ("trunk", 16 * 256), "budget=2560": ("branch", 2560), "budget=5120": ("branch", 5120)}


def test_a_sweep_of_mlm_ladders_is_compared_on_both_sets(texts: list[str], tmp_path: Path) -> None:
    from ffn_zoo.analysis.compare import compare

    run_train(["-m", "ffn=gelu,swiglu", "seed=0,1", *BASE, *texts, *LADDER], tmp_path)
    (sweep,) = (tmp_path / "multiruns").iterdir()
    report = compare([sweep], layout=False)
    for rows in (report["budget_rows"], report["extra_val"]["other"]["budget_rows"]):
        assert {(r["variant"], r["budget_tokens"], r["n"]) for r in rows} == \
            {(v, t, 2) for v in ("gelu", "swiglu") for t in (2560, 5120)}
    assert not report["problems"] and (sweep / "compare" / "ladder_delta_other.png").is_file()
    m = json.loads(next(sweep.glob("*/budget=5120/metrics.json")).read_text())
    assert m["objective"] == "mlm" and m["ladder_budget_tokens"] == 5120
