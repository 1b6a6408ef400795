"""The device check's CUDA path, checked on the CPU: no host sync or CPU copy in the hot step, every tensor on
the step's device (the meta device refuses both), autocast dtypes, pinned loader memory on CUDA, and the
check's own planning (batch doubling, part glu's budgets, the parts' time limits, a missing package)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ffn_zoo.data.types import Corpus
from ffn_zoo.data.datamodule import LMDataModule
from ffn_zoo.nn.model import TransformerLM
from ffn_zoo.tools.device_check.cli import run_child
from ffn_zoo.tools.device_check.gemm import nominal_for
from ffn_zoo.tools.device_check.glu import glu_base, ladder_steps, plan_budgets, rung_steps
from ffn_zoo.tools.device_check.part import from_json
from ffn_zoo.tools.device_check.report import Report, markdown
from ffn_zoo.tools.device_check.sizes import DRY, GPU, PARTS
from ffn_zoo.tools.device_check.step import StepCase, StepResult, StepRow, largest_batch, step_ratios
from ffn_zoo.tools.bench_results import Case
from ffn_zoo.tools.benchmark import _train_step, build_ours
from ffn_zoo.training.recipe.build import compose, model_config
from ffn_zoo.training.recipe.module import LitLM

SYNCING = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__")


@pytest.fixture
def no_host_sync(monkeypatch: pytest.MonkeyPatch):
    """Inside ``with no_host_sync():`` any Python-level read of a tensor's value on the host raises."""
    from contextlib import contextmanager

    @contextmanager
    def guard():
        with pytest.MonkeyPatch.context() as m:
            for name in SYNCING:
                def refuse(self, *a, _name=name, **k):
                    raise AssertionError(f"Tensor.{_name}() in the training step: a host sync on a GPU")
                m.setattr(torch.Tensor, name, refuse)
            yield

    return guard


def tiny_model(ffn: str, vocab: int = 256) -> tuple[TransformerLM, object]:
    cfg = compose(["model=tiny", f"ffn={ffn}"])
    return TransformerLM(model_config(cfg, vocab_size=vocab)), cfg


@pytest.mark.parametrize("ffn", ["gelu", "swiglu"])
def test_meta_device_step_has_no_sync_and_no_stray_device(ffn: str) -> None:
    """On the meta device a .item(), a data-dependent branch or a tensor made on another device is an error,
    also inside C++ ops: forward, loss, backward and clipping of our step run there."""
    with torch.device("meta"):
        model, cfg = tiny_model(ffn)
        batch = torch.randint(0, 256, (4, 17))  # (B, T + 1)
    module = LitLM(model, cfg.optim, max_steps=10, fused_loss=False)
    loss = module.loss(batch, "mean")
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert loss.device.type == "meta"
    assert all(p.device.type == "meta" and p.grad is not None and p.grad.device.type == "meta"
               for p in model.parameters())


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_benchmark_step_reads_nothing_back_to_the_host(precision: str, no_host_sync) -> None:
    """The whole bare step (forward, loss, backward, clipping, fused AdamW) with every host read refused."""
    step, _ = build_ours(Case("tiny", "geglu", 16, 2, precision), vocab=256, device="cpu", compile_=False)
    batch = torch.randint(0, 256, (2, 17))
    step(batch)  # first step: optimizer state allocated
    with no_host_sync():
        step(batch)
        step(batch)


def test_lightning_training_step_logs_no_host_numbers(no_host_sync) -> None:
    """LitLM.training_step: no host read, and what it logs is a tensor (a Python number logged on a GPU module
    becomes torch.tensor(x, device=cuda), a synchronising copy every step)."""
    model, cfg = tiny_model("gelu")
    module = LitLM(model, cfg.optim, max_steps=10, fused_loss=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    module.trainer = SimpleNamespace(world_size=1, optimizers=[opt], global_step=0)
    logged = {}
    module.log = lambda name, value, **kw: logged.__setitem__(name, value)  # type: ignore[method-assign]
    with no_host_sync():
        module.training_step(torch.randint(0, 256, (2, 17)), 0)
    assert set(logged) == {"train/loss", "train/ppl", "train/tokens_seen", "train/lr"}
    assert all(isinstance(v, torch.Tensor) for v in logged.values()), {k: type(v) for k, v in logged.items()}
    assert logged["train/tokens_seen"].device.type == "cpu" and logged["train/lr"].device.type == "cpu"


def test_bf16_autocast_dtypes() -> None:
    """bf16-mixed as the step runs it: matmuls in bf16, the loss in fp32, the master weights and grads fp32."""
    model, cfg = tiny_model("swiglu")
    module = LitLM(model, cfg.optim, max_steps=10, fused_loss=False)
    seen = {}
    model.blocks[0].ffn.w_out.register_forward_hook(lambda m, i, o: seen.__setitem__("w_out", o.dtype))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = _train_step(model, lambda b: seen.setdefault("loss", module.loss(b, "mean")), opt, 1.0, "bf16-mixed",
                       "cpu")
    step(torch.randint(0, 256, (2, 17)))
    assert seen["w_out"] == torch.bfloat16 and seen["loss"].dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("device,pinned", [("cuda", True), ("cpu", False)])
def test_loader_pins_memory_on_cuda(device: str, pinned: bool) -> None:
    blocks = np.zeros((8, 17), dtype=np.int64)
    dm = LMDataModule(Corpus("t", 256, blocks, blocks), batch_size=2, val_batch_size=2, seed=0)
    dm.trainer = SimpleNamespace(global_step=0, global_rank=0, world_size=1,
                                 strategy=SimpleNamespace(root_device=torch.device(device)))
    assert dm.train_dataloader().pin_memory is pinned


def test_largest_batch_doubles_until_it_does_not_fit() -> None:
    tried = []

    def fits(b: int) -> bool:
        tried.append(b)
        return b <= 100

    assert largest_batch(fits, 8, 512) == 64 and tried == [8, 16, 32, 64, 128]
    assert largest_batch(lambda b: True, 8, 40) == 32
    assert largest_batch(lambda b: False, 8, 512) is None


GLU_OPTIM = {"schedule": "wsd", "warmup": 48, "decay_fraction": 0.2, "decay_shape": "linear"}  # glu_ladder_cpu's


@pytest.mark.parametrize("tokens_per_s", [5e4, 2e5, 5e5, 3e6])
def test_glu_budgets_are_the_most_doublings_that_fit_the_window(tokens_per_s: float) -> None:
    s = GPU
    tps = s.glu_batch * s.glu_seq
    steps, affordable, notes = plan_budgets(s, GLU_OPTIM, tokens_per_s, 200, corpus_tokens=None)
    assert affordable == pytest.approx(s.glu_safety * tokens_per_s * 200 / 4)  # four ladders share the window
    assert steps == rung_steps(s, len(steps)) and steps[0] == s.glu_min_steps  # 64, 128, 256, ...
    cost = ladder_steps(steps, GLU_OPTIM, tps) * tps
    if cost <= affordable:  # fits; one more doubling would not (or the cap is reached)
        assert not notes
        assert len(steps) == s.glu_max_rungs or \
            ladder_steps(rung_steps(s, len(steps) + 1), GLU_OPTIM, tps) * tps > affordable
    else:  # not even the smallest ladder fits: it runs anyway, and a note says so
        assert len(steps) == 1 and "smallest ladder" in notes[0]


def test_glu_budgets_stop_where_the_carried_corpus_ends() -> None:
    s = GPU
    tps = s.glu_batch * s.glu_seq
    steps, _, notes = plan_budgets(s, GLU_OPTIM, 1e7, 200, corpus_tokens=int(1.5 * 128 * tps))
    assert steps == [64, 128] and len(notes) == 1  # 256 steps would repeat tokens
    assert "carry >=" in notes[0] and "train shards" in notes[0]


def test_glu_ladders_fit_the_device_disk(tmp_path) -> None:
    """Part glu's four BERT-base ladders at once, five rungs each, keep no more checkpoints at their peak than fit
    the 64 GiB disk with room left for the image, the carried corpus and its token cache (ladder/storage.py)."""
    from ffn_zoo.training.ladder.plan import plan_of
    from ffn_zoo.training.ladder.storage import peak_files
    from ffn_zoo.training.reporting.summary import checkpoint_bytes

    s = GPU
    steps = rung_steps(s, s.glu_max_rungs)
    cfg = compose([*glu_base(s, None, tmp_path), f"trainer.max_steps={steps[-1]}",
                   f"ladder.budgets=[{','.join(str(n * s.glu_batch * s.glu_seq) for n in steps)}]"])
    c = cfg.checkpoint
    files = peak_files(tmp_path, plan_of(cfg), cfg.ladder.keep_checkpoints, c.save_last, c.save_best,
                       cfg.ladder.validate == "every")
    size = checkpoint_bytes(TransformerLM(model_config(cfg, vocab_size=s.glu_tokenizer_vocab + 1)), cfg.optim.name)
    assert len(s.glu_ffns) * len(s.glu_objectives) * files * size < 0.6 * 64 * 2**30


def test_a_missing_package_is_one_line_naming_it(tmp_path, monkeypatch, capsys) -> None:
    """Without Hydra (the GPU image, no wheels carried), the parts that need it fail with one line naming the
    package and what to do; the parts that need nothing of it still run."""
    from ffn_zoo.tools.device_check import cli

    monkeypatch.setattr(cli, "TRAINING_STACK", {**cli.TRAINING_STACK, "no_such_module_ffnzoo": "no-such-package"})
    assert cli.missing_packages(None) == ["no-such-package"]
    rc = cli.main(["--dry-run", "--parts", "env", "step", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w")])
    report = from_json(Report, json.loads((tmp_path / "out" / "report.json").read_text()))
    assert rc == 1 and report.parts["env"].status == "ok"
    step = report.parts["step"]
    assert step.status == "failed" and "needs no-such-package" in step.error and "device_prep.sh" in step.error
    assert "\n" not in step.error and "needs no-such-package" in capsys.readouterr().err


def test_gpu_budgets_fit_the_device_limit() -> None:
    """The parts' hard budgets sum to under 8 minutes, inside one 10-minute device command."""
    assert sum(GPU.budgets.values()) <= 480
    assert set(GPU.budgets) == set(PARTS) == set(DRY.budgets)


def test_nominal_peaks_by_gpu_name() -> None:
    assert nominal_for("NVIDIA H200")["bf16"] == pytest.approx(989, rel=0.01)
    assert nominal_for("NVIDIA H200")["tf32"] == pytest.approx(495, rel=0.01)
    assert nominal_for("NVIDIA A10G") is None and nominal_for(None) is None


def test_a_part_past_its_budget_is_killed_and_recorded(tmp_path) -> None:
    """The hard budget: a child that cannot finish in time (here: not even import torch) is killed."""
    res = run_child("env", DRY, tmp_path, budget=0.3)
    assert res.status == "timeout" and res.rc is None and res.wall_s < 30


def test_report_renders_a_half_finished_part() -> None:
    report = from_json(Report, {"dry_run": True, "started": "now", "sizes": {}, "work": "w", "wall_s": 1.0, "parts": {
        "step": {"status": "timeout", "rc": None, "wall_s": 190, "budget_s": 190, "error": None,
                 "result": {"batch": 64, "rows": [{"impl": "ours"}]}},
        "glu": {"status": "failed", "rc": 1, "wall_s": 3, "budget_s": 140, "error": "RuntimeError: boom",
                "result": {}}}})
    md = markdown(report)
    assert "## 3. Training step — timeout" in md and "(incomplete" in md and "RuntimeError: boom" in md
    assert "## 5. GLU at BERT-base, both objectives — failed" in md and "(no table)" in md
    assert not math.isnan(report.wall_s)


def row(case: StepCase, tokens_per_s: float, batch: int = 8) -> StepRow:
    return StepRow(case, batch, tokens_per_s, [tokens_per_s], 0.0, 1.0, 1.0, 0.5, None, None, 0.0, None)


def test_step_ratios_pair_rows_by_case() -> None:
    """ours / HF at the same precision, gated / GELU at the same compile, compile / eager: each from its pair."""
    c = StepCase("ours", "gelu", "bf16-mixed", False, "tiny", 32)
    rows = [row(c, 100.0), row(replace(c, impl="hf"), 50.0), row(replace(c, ffn="swiglu"), 80.0),
            row(replace(c, compile=True), 150.0), row(replace(c, ffn="geglu", precision="tf32"), 10.0)]
    ratios = {r.what: r.value for r in step_ratios(StepResult(rows=rows))}
    assert ratios == {"ours / HF GPT-2 tokens/s, bf16-mixed": 2.0, "swiglu / gelu step time, bf16-mixed": 1.25,
                      "compile / eager tokens/s, tiny bf16-mixed": 1.5}  # the tf32 geglu row has no tf32 gelu


def test_results_round_trip_through_json() -> None:
    """report.json's typed rows read back as the dataclasses they were written from."""
    r = StepResult(peaks_tflops={"bf16": 1.0}, batch=8, rows=[row(StepCase("hf", "gelu", "tf32", False, "m", 4), 3.0)])
    back = from_json(StepResult, json.loads(json.dumps(asdict(r))))
    assert back == r and isinstance(back.rows[0].case, StepCase)
    with pytest.raises(TypeError, match="no field"):
        from_json(StepRow, {"case": asdict(r.rows[0].case), "typo": 1})


def test_wheels_install_offline_for_the_parts_only(tmp_path) -> None:
    """--wheels: a folder of wheels installed without an index into <work>/site, which the parts' children import
    (here a hand-made one-module wheel); this process's own path is left as it was."""
    import subprocess
    import sys
    import zipfile

    from ffn_zoo.tools.device_check.cli import install_wheels
    from ffn_zoo.tools.device_check.procs import child_env

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "offline_probe-1.0-py3-none-any.whl", "w") as z:
        z.writestr("offline_probe/__init__.py", "WHERE = 'carried'\n")
        z.writestr("offline_probe-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: offline-probe\nVersion: 1.0\n")
        z.writestr("offline_probe-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\n"
                   "Tag: py3-none-any\n")
        z.writestr("offline_probe-1.0.dist-info/RECORD", "")
    site = tmp_path / "work" / "site"
    assert install_wheels(wheels, site) == ["offline_probe-1.0-py3-none-any.whl"]
    out = subprocess.run([sys.executable, "-c", "import offline_probe; print(offline_probe.WHERE)"],
                         env=child_env(site), capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "carried", out.stderr
    assert str(site) not in sys.path
