"""impl.precision: the CPU's bf16 support read from its flags, what ``auto`` picks on each machine, the one-line
error for a bad name, the banner's words, and ffn-zoo-compare's warning when runs of two precisions pool."""

from __future__ import annotations

from pathlib import Path

import pytest

from ffn_zoo.analysis.compare.runs import group_runs, load_run
from ffn_zoo.errors import ConfigError
from ffn_zoo.training.recipe import precision as prec
from ffn_zoo.training.recipe.build import compose, validate_config
from tests.helpers import make_run


@pytest.mark.parametrize("flags,support", [
    ({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, "amx"),  # Sapphire Rapids: both, AMX first
    ({"avx2", "avx512f", "avx512_bf16"}, "avx512_bf16"),  # Zen 4 EPYC
    ({"avx2", "fma"}, "none"),  # AVX2 only: bf16 emulated
    (None, "unknown"),  # no /proc/cpuinfo (macOS, Windows)
])
def test_bf16_support_from_the_cpu_flags(flags: set[str] | None, support: str) -> None:
    assert prec.bf16_support(flags) == support
    words = prec.BF16_ON_CPU[support]  # what the banner and ffn-zoo-bench print: native, or emulated and slower
    assert ("native" in words and "faster" in words) if support in prec.NATIVE_BF16 else "slower" in words


def test_cpu_flags_read_the_first_flags_line(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\n"
                    "flags\t\t: fpu\n")
    assert prec.cpu_flags(info) == {"fpu", "avx2", "avx512_bf16"}
    assert prec.cpu_flags(tmp_path / "absent") is None


@pytest.mark.parametrize("on_gpu,support,chosen", [
    (True, "none", "bf16-mixed"), (True, "unknown", "bf16-mixed"),  # every GPU user runs bf16
    (False, "amx", "bf16-mixed"), (False, "avx512_bf16", "bf16-mixed"),
    (False, "none", "32-true"), (False, "unknown", "32-true"),  # emulated bf16 is slower than fp32
])
def test_auto_picks_bf16_only_where_the_hardware_has_it(on_gpu: bool, support: str, chosen: str) -> None:
    assert prec.resolve_precision("auto", on_gpu, support) == chosen
    for explicit in ("32-true", "bf16-mixed", "16-mixed"):  # a named precision is used as named
        assert prec.resolve_precision(explicit, on_gpu, support) == explicit


def test_a_bad_precision_is_one_line_listing_the_valid_ones() -> None:
    cfg = compose(["model=tiny", "impl.precision=bf16"])
    with pytest.raises(ConfigError) as e:
        validate_config(cfg)
    msg = str(e.value)
    assert "impl.precision='bf16'" in msg and all(p in msg for p in prec.PRECISIONS) and "\n" not in msg


def test_run_precision_follows_the_accelerator_and_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prec, "cpu_flags", lambda: {"avx2"})
    assert prec.run_precision("auto", "cpu") == "32-true"
    monkeypatch.setattr(prec, "cpu_flags", lambda: {"avx512_bf16"})
    assert prec.run_precision("auto", "cpu") == "bf16-mixed"
    assert prec.run_precision("auto", "gpu") == "bf16-mixed"
    assert prec.precision_used("auto", "bf16-mixed") == "auto -> bf16-mixed"
    assert prec.precision_used("32-true", "32-true") == "32-true"


def test_compare_warns_when_runs_of_two_precisions_pool(tmp_path: Path) -> None:
    same = [load_run(make_run(tmp_path / "a", f, s, 5.0 + s / 100)) for f in ("gelu", "swiglu") for s in (0, 1)]
    assert not [w for w in group_runs(same)[2] if "precision" in w]
    mixed = [load_run(make_run(tmp_path / "b", f, s, 5.0, impl__precision="bf16-mixed" if s else "32-true"))
             for f in ("gelu", "swiglu") for s in (0, 1)]
    groups, settings, warnings = group_runs(mixed)
    assert len(settings) == 1  # impl.* never splits a setting...
    (line,) = [w for w in warnings if "precision" in w]  # ...so the pooling is said, once
    assert "32-true (2)" in line and "bf16-mixed (2)" in line
