"""optim=adafactor: the update rule against a hand computation, the agreement with torch.optim.Adafactor where
the two should agree, T5's relative-step schedule, and a state that resumes exactly."""

import math

import pytest
import torch
from torch.optim.lr_scheduler import LambdaLR

from ffn_zoo.training.recipe.build import compose
from ffn_zoo.training.recipe.optim import Adafactor, lr_multiplier

T5 = dict(lr=1e-2, decay_exponent=0.8, eps1=1e-30, eps2=1e-3, clip_threshold=1.0, factor_min_dim=128,
          scale_by_param_rms=True, weight_decay=0.0)


def rms(rows: list[list[float]]) -> float:
    values = [v for r in rows for v in r]
    return math.sqrt(sum(v * v for v in values) / len(values))


def steps(theta: list[list[float]], grads: list[list[list[float]]], **kw) -> torch.Tensor:
    p = torch.nn.Parameter(torch.tensor(theta, dtype=torch.float64))
    opt = Adafactor([p], **{**T5, **kw})
    for g in grads:
        p.grad = torch.tensor(g, dtype=torch.float64)
        opt.step()
    return p.detach()


def test_matches_the_config() -> None:
    cfg = compose(["optim=adafactor"]).optim
    assert {k: cfg[k] for k in T5} == T5


THETA = [[0.5, -1.0, 2.0], [0.1, 0.3, -0.4]]
G1 = [[0.2, -0.1, 0.05], [-0.3, 0.01, 0.4]]
G2 = [[4.0, -0.1, 0.05], [0.3, 0.02, -0.4]]  # a large first entry: the second update needs clipping


def test_unfactored_update_by_hand() -> None:
    """A 2×3 matrix (dims < factor_min_dim): full second moment, two steps."""
    # step 1: 1 - β_1 = 1, so V = G² and U = sign(G) (RMS 1, no clipping); ρ_1 = min(0.01, 1/√1) = 0.01
    s1 = 0.01 * rms(THETA)
    theta1 = [[t - s1 * math.copysign(1, g) for t, g in zip(tr, gr)] for tr, gr in zip(THETA, G1)]
    # step 2: 1 - β_2 = 2^-0.8; U = G/√V, clipped to RMS 1; ρ_2 = min(0.01, 1/√2) = 0.01, times RMS(θ_1)
    mix = 2 ** -0.8
    u = [[g2 / math.sqrt((1 - mix) * g1 * g1 + mix * g2 * g2) for g1, g2 in zip(r1, r2)] for r1, r2 in zip(G1, G2)]
    assert rms(u) > 1  # the clipping branch is exercised
    s2 = 0.01 * rms(theta1) / rms(u)
    theta2 = [[t - s2 * x for t, x in zip(tr, ur)] for tr, ur in zip(theta1, u)]
    torch.testing.assert_close(steps(THETA, [G1, G2]), torch.tensor(theta2, dtype=torch.float64))


def test_factored_update_by_hand() -> None:
    """factor_min_dim=2: V_ij ≈ R_i·C_j / mean(R) from the row and column means of G²."""
    theta, g = [[1.0, -2.0], [0.5, 0.25]], [[0.3, -0.1], [0.2, 0.4]]
    sq = [[x * x for x in r] for r in g]
    R = [sum(r) / 2 for r in sq]  # row means
    C = [(sq[0][j] + sq[1][j]) / 2 for j in range(2)]  # column means
    u = [[g[i][j] / math.sqrt(R[i] * C[j] / (sum(R) / 2)) for j in range(2)] for i in range(2)]
    scale = 0.01 * rms(theta) / max(1.0, rms(u))
    expected = [[theta[i][j] - scale * u[i][j] for j in range(2)] for i in range(2)]
    torch.testing.assert_close(steps(theta, [g], factor_min_dim=2), torch.tensor(expected, dtype=torch.float64))
    assert abs(rms(u) - 1) > 1e-3  # factored: U is not simply sign(G)


def test_relative_step_is_capped_at_inverse_sqrt_t_and_floored_at_eps2() -> None:
    # a constant gradient: V_t = G² at every step, so U = sign(G), RMS 1, never clipped
    g = [[1.0, -2.0]]
    for lr, theta0 in ((1.0, [0.5, -0.5]), (1e-2, [0.0, 0.0])):  # lr 1 > 1/√t: ρ_t = 1/√t; θ = 0: scale eps2
        theta = list(theta0)
        for t in range(1, 5):
            scale = min(lr, t ** -0.5) * max(1e-3, rms([theta]))
            theta = [x - scale * math.copysign(1, gx) for x, gx in zip(theta, g[0])]
        got = steps([theta0], [g] * 4, lr=lr)
        torch.testing.assert_close(got, torch.tensor([theta], dtype=torch.float64))
        assert not torch.equal(got, torch.tensor([theta0], dtype=torch.float64))


def test_agrees_with_torch_adafactor_where_both_factor() -> None:
    """Both factor a 128×160 matrix; eps1 (1e-30 added vs torch's clamp) is far below these gradients."""
    torch.manual_seed(0)
    w0, b0 = torch.randn(128, 160), torch.randn(130)
    ours = [torch.nn.Parameter(w0.clone()), torch.nn.Parameter(b0.clone())]
    theirs = [torch.nn.Parameter(w0.clone()), torch.nn.Parameter(b0.clone())]
    a, b = Adafactor(ours, **T5), torch.optim.Adafactor(theirs, lr=1e-2, eps=(None, 1e-3), beta2_decay=-0.8, d=1.0)
    for _ in range(5):
        grads = [torch.randn(128, 160) * torch.rand(128, 1) * 3, torch.randn(130)]
        for p, q, g in zip(ours, theirs, grads):
            p.grad, q.grad = g.clone(), g.clone()
        a.step()
        b.step()
    for p, q, start in zip(ours, theirs, (w0, b0)):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
        assert (p - start).abs().max() > 1e-3  # it moved: the agreement is not two no-ops


def test_small_matrices_keep_the_full_second_moment_unlike_torch() -> None:
    p = torch.nn.Parameter(torch.randn(64, 256))  # model=tiny's FFN: 64 < factor_min_dim
    p.grad = torch.randn(64, 256)
    opt = Adafactor([p], **T5)
    opt.step()
    assert set(opt.state[p]) == {"step", "v"}


def test_t5_schedule_gives_inverse_sqrt_relative_step() -> None:
    """lr 1e-2 with inverse_sqrt over 10⁴ warm-up steps: ρ_t = min(lr_t, 1/√t) = 1/√max(t, 10⁴), T5's schedule."""
    for t in (1, 100, 9999, 10_000, 10_001, 40_000, 1_000_000):
        lr_t = 1e-2 * lr_multiplier(t - 1, schedule="inverse_sqrt", warmup_steps=10_000, total_steps=10**6,
                                     min_lr_ratio=0.1)
        assert min(lr_t, t ** -0.5) == pytest.approx(1 / math.sqrt(max(t, 10_000)), rel=1e-12)


def test_state_resumes_exactly() -> None:
    """Optimizer state through state_dict (a checkpoint) continues as if never stopped, schedule included."""
    torch.manual_seed(1)
    w0 = torch.randn(130, 140)
    grads = [torch.randn(130, 140) for _ in range(6)]

    def make() -> tuple[torch.nn.Parameter, Adafactor, LambdaLR]:
        p = torch.nn.Parameter(w0.clone())
        opt = Adafactor([p], **T5)
        return p, opt, LambdaLR(opt, lambda s: 1.0 / math.sqrt(max(s + 1, 3) / 3))

    p, opt, sched = make()
    for g in grads:
        p.grad = g.clone()
        opt.step()
        sched.step()
    q, opt2, sched2 = make()
    for g in grads[:3]:
        q.grad = g.clone()
        opt2.step()
        sched2.step()
    saved = (opt2.state_dict(), sched2.state_dict(), q.detach().clone())
    r, opt3, sched3 = make()
    with torch.no_grad():
        r.copy_(saved[2])
    opt3.load_state_dict(saved[0])
    sched3.load_state_dict(saved[1])
    for g in grads[3:]:
        r.grad = g.clone()
        opt3.step()
        sched3.step()
    assert torch.equal(p, r)
