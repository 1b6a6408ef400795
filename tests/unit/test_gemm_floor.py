"""The GEMM floor (ffn_zoo/tools/gemm_floor.py): the profiler's matmul calls of a step, forward and backward, replayed."""

from __future__ import annotations

import torch

from ffn_zoo.tools import gemm_floor
from ffn_zoo.tools.benchmark import benchmark


def test_a_linear_layers_forward_and_backward_gemms_are_found_once_each() -> None:
    layer = torch.nn.Linear(16, 32)
    x = torch.randn(8, 16, requires_grad=True)

    def step() -> None:
        layer(x).sum().backward()

    profiled = gemm_floor.profile_gemms(step)
    shapes = sorted(g.shapes for g in profiled.gemms)
    # forward: bias + x @ W^T; backward: dL/dx = g @ W and dL/dW = g^T @ x; each listed once (no nested double count)
    assert shapes == sorted([((32,), (8, 16), (16, 32)), ((8, 32), (32, 16)), ((32, 8), (8, 16))]), shapes
    assert sum(g.flops() for g in profiled.gemms) == 3 * 2 * 8 * 16 * 32
    assert 0 < profiled.gemm_share <= 1.5  # profiler overhead may count the calls' time generously
    run = gemm_floor.replay(profiled.gemms, torch.float32, "cpu")
    run()  # the same calls, on random inputs of those shapes, without error


def test_the_fused_losss_matmuls_are_found_counted_and_replayed() -> None:
    """nn/losses.py writes each chunk's logits with mm(out=) and accumulates the weight gradient with addmm_: both are
    GEMMs of the step, with the FLOPs of their two factors, and replay as the step calls them."""
    from ffn_zoo.nn.losses import linear_cross_entropy

    x, w = torch.randn(8, 16, requires_grad=True), torch.randn(32, 16, requires_grad=True)
    t = torch.randint(0, 32, (8,))

    def step() -> None:
        linear_cross_entropy(x, w, t, chunk_rows=4).backward()

    profiled = gemm_floor.profile_gemms(step)
    ops = [g.op for g in profiled.gemms]
    assert ops.count("aten::addmm_") == 2 and ops.count("aten::mm") == 4, ops  # per chunk: logits, dL/dx; dL/dW
    assert sum(g.flops() for g in profiled.gemms) == 3 * 2 * 8 * 16 * 32  # the plain layer's three products
    gemm_floor.replay(profiled.gemms, torch.float32, "cpu")()


def test_attention_products_count_the_six_products_and_half_of_each_under_a_causal_mask() -> None:
    q, kv = (2, 3, 16, 8), (2, 3, 16, 8)
    full = gemm_floor.attention_products(q, kv, kv, causal=False)
    assert len(full) == 6 and all(g.op == "aten::bmm" for g in full)
    assert sum(g.flops() for g in full) == 6 * 2 * (2 * 3) * 16 * 16 * 8
    assert sum(g.flops() for g in gemm_floor.attention_products(q, kv, kv, causal=True)) == 3 * 2 * 6 * 16 * 16 * 8
    gemm_floor.replay(full, torch.float32, "cpu")()


def test_a_fused_attention_calls_products_are_found_and_the_math_paths_are_not_counted_twice() -> None:
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(2, 3, 16, 8, requires_grad=True)

    def step(backend: SDPBackend, causal: bool) -> gemm_floor.Profiled:
        def run() -> None:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, q, q, is_causal=causal).sum().backward()
        return gemm_floor.profile_gemms(run)

    fused = step(SDPBackend.FLASH_ATTENTION, causal=True)
    assert fused.gemms == []  # the kernel's products are invisible to the profiler ...
    assert sum(g.flops() for g in fused.attention) == 3 * 2 * 6 * 16 * 16 * 8  # ... and written out, causal = half
    assert sum(g.flops() for g in step(SDPBackend.FLASH_ATTENTION, causal=False).attention) == 6 * 2 * 6 * 16 * 16 * 8
    math = step(SDPBackend.MATH, causal=True)
    assert math.attention == [] and any(g.op == "aten::bmm" for g in math.gemms)  # bmm calls, already in the floor


def test_bench_reports_the_step_against_its_gemm_floor() -> None:
    rows = benchmark(["--model", "tiny", "--seq", "16", "--batch", "2", "--vocab", "256", "--repeats", "2",
                      "--steps", "1", "--warmup", "1", "--threads", "1", "--device", "cpu", "--gemm-floor"])
    (row,) = rows
    assert row["gemm_floor_s"] > 0 and row["step_s"] > 0
    assert row["vs_gemm_floor"] > 0
    # the model's SDPA runs fused on a CPU, so its products are timed too and can only lower the ratio
    assert row["attention_floor_s"] > 0 and 0 < row["vs_gemm_floor_with_attention"] < row["vs_gemm_floor"]
