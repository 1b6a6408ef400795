"""What one benchmark run measured: the cases it times, each case's timings (``Result``), the row each becomes and
the printed table (ffn_zoo/tools/benchmark.py runs them)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from ffn_zoo.training.recipe.precision import bf16_support, cpu_flags


@dataclass(frozen=True)
class Case:
    model: str
    ffn: str
    seq: int
    batch: int
    precision: str
    objective: str = "clm"

    def overrides(self, vocab: int) -> list[str]:
        return [f"model={self.model}", f"ffn={self.ffn}", f"model.seq_len={self.seq}", f"data.seq_len={self.seq}",
                f"data.batch_size={self.batch}", f"data.vocab_size={vocab}", f"impl.precision={self.precision}",
                f"objective={self.objective}"]


@dataclass
class Result:
    case: Case
    impl: str  # ours | hf | trainer
    flops_per_token: int
    tokens_per_s: list[float] = field(default_factory=list)
    data_s: list[float] = field(default_factory=list)  # per-step batch fetch time (ours)
    step_s: list[float] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    peak_rss_mib: float | None = None  # peak RSS above the process's RSS before this model was built
    peak_dev_mib: float | None = None
    floor_s: list[float] = field(default_factory=list)  # --gemm-floor: the step's GEMMs replayed, s per step
    attn_floor_s: list[float] = field(default_factory=list)  # --gemm-floor: fused attention's products, s per step
    steps: int = 1  # timed steps per repeat


def summarize(r: Result, peak: dict[str, list[float]], peer: Result | None) -> dict[str, Any]:
    tps = r.tokens_per_s
    med = statistics.median(tps)
    # the best probe of the run: a neighbour process only ever lowers it, so MFU is not flattered by a bad probe
    peak_best = max(peak[r.case.precision])
    out: dict[str, Any] = {
        **r.case.__dict__, "impl": r.impl, "tokens_per_s": med,
        "spread": (max(tps) - min(tps)) / med if med else None, "repeats": tps,
        "flops_per_token": r.flops_per_token, "gemm_peak_flops": peak_best,
        "gemm_peak_repeats": peak[r.case.precision], "mfu": med * r.flops_per_token / peak_best, "load_1min": r.load,
        "peak_rss_mib": r.peak_rss_mib, "peak_device_mib": r.peak_dev_mib, "cpu_bf16": bf16_support(cpu_flags()),
    }
    if r.step_s:
        out["data_share"] = sum(r.data_s) / (sum(r.data_s) + sum(r.step_s))
    if r.floor_s:  # per repeat: (step time per step) / (one replay of the step's GEMMs), then the median
        out["gemm_floor_s"] = statistics.median(r.floor_s)
        out["step_s"] = statistics.median(s / r.steps for s in r.step_s)
        out["vs_gemm_floor"] = statistics.median(s / r.steps / f for s, f in zip(r.step_s, r.floor_s))
    if r.attn_floor_s:  # the same, with the products a fused attention kernel hides added to the floor
        out["attention_floor_s"] = statistics.median(r.attn_floor_s)
        out["vs_gemm_floor_with_attention"] = statistics.median(
            s / r.steps / (f + a) for s, f, a in zip(r.step_s, r.floor_s, r.attn_floor_s))
    if peer is not None and peer.tokens_per_s:
        # ratio per repeat (interleaved pairs), then the median: robust to a repeat both were slowed in
        ratios = [a / b for a, b in zip(tps, peer.tokens_per_s)]
        out[f"vs_{peer.impl}"] = statistics.median(ratios)
    return out


def format_table(rows: list[dict[str, Any]]) -> str:
    w = max([7] + [len(r["impl"]) for r in rows])
    head = f"{'model':9} {'ffn':7} {'obj':3} {'seq':>4} {'B':>3} {'precision':10} {'impl':{w}} " \
           f"{'tok/s':>8} {'spread':>6} {'MFU':>5} {'peak MiB':>8} {'data':>5} {'vs hf':>6} {'vs ours':>7} " \
           f"{'×floor':>6} {'+attn':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        f = lambda k, fmt: format(r[k], fmt) if r.get(k) is not None else "-"  # noqa: E731
        mem = r.get("peak_device_mib") or r.get("peak_rss_mib")
        lines.append(
            f"{r['model']:9} {r['ffn']:7} {r['objective']:3} {r['seq']:>4} {r['batch']:>3} "
            f"{r['precision']:10} {r['impl']:{w}} {r['tokens_per_s']:>8.0f} {r['spread']:>6.1%} {r['mfu']:>5.2f} "
            f"{(format(mem, '.0f') if mem else '-'):>8} {f('data_share', '.1%'):>5} "
            f"{f('vs_hf', '.2f'):>6} {f('vs_ours', '.2f'):>7} {f('vs_gemm_floor', '.2f'):>6} "
            f"{f('vs_gemm_floor_with_attention', '.2f'):>6}"
        )
    return "\n".join(lines)
