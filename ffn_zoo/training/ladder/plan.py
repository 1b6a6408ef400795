"""A ladder's plan (``ladder.budgets`` -> rungs): budgets parsed from tokens, each rung's steps, cooldown and branch
point, and the warm-up every rung shares. Pure arithmetic on the config; ``run.py`` trains the plan."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any, Mapping

from omegaconf import DictConfig

from ffn_zoo.errors import ConfigError, UnknownNameError
from ffn_zoo.training.recipe.optim import decay_steps_of, warmup_steps_of

# k, M, G: 10^3, 10^6, 10^9 tokens; Ki, Mi, Gi: 2^10, 2^20, 2^30 (0.25Mi = 64 steps of 32 × 128 tokens)
UNITS = {"": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
_BUDGET = re.compile(r"(?P<num>\d+(?:\.\d*)?|\.\d+)(?P<unit>Ki|Mi|Gi|k|K|M|G)?")


def parse_tokens(value: Any, where: str) -> int:
    """``250k``, ``0.5M``, ``1Mi`` (2^20), ``1000000`` -> the exact token count."""
    number: Fraction | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = Fraction(value)
    elif isinstance(value, float):
        number = Fraction(repr(value))  # 1e6 as written, not its binary approximation
    elif isinstance(value, str) and (m := _BUDGET.fullmatch(value.strip())):
        number = Fraction(m["num"]) * UNITS[m["unit"] or ""]
    if number is None:
        raise ConfigError(f"{where}={value!r} is not a token count; valid: an integer or a number with k, M, G "
                          f"(10^3, 10^6, 10^9) or Ki, Mi, Gi (2^10, 2^20, 2^30), e.g. 250k, 0.5M, 1Mi")
    if number.denominator != 1 or number <= 0:
        raise ConfigError(f"{where}={value!r} must be a positive whole number of tokens")
    return int(number)


@dataclass(frozen=True)
class Rung:
    """One budget: the plain WSD run it stands for and where its cooldown branches off the trunk."""

    label: str  # as written (its folder is budget=<label>)
    tokens: int
    steps: int  # trainer.max_steps of the equivalent plain run
    cooldown: int  # its decay steps

    @property
    def branch_step(self) -> int:
        return self.steps - self.cooldown

    @property
    def folder(self) -> str:
        return f"budget={self.label}"


@dataclass(frozen=True)
class Plan:
    rungs: tuple[Rung, ...]
    warmup: int  # steps, the same for every rung
    tokens_per_step: int

    @property
    def trunk_steps(self) -> int:
        return max(r.branch_step for r in self.rungs)

    @property
    def steps_trained(self) -> int:
        return self.trunk_steps + sum(r.cooldown for r in self.rungs)

    def as_dict(self) -> dict[str, Any]:
        return {"rungs": [asdict(r) | {"branch_step": r.branch_step} for r in self.rungs], "warmup": self.warmup,
                "tokens_per_step": self.tokens_per_step}


def plan_ladder(budgets: Any, optim: Mapping[str, Any], tokens_per_step: int, max_steps: int) -> Plan:
    """``ladder.budgets`` -> rungs in steps; every bad budget is one line naming it."""
    if optim["schedule"] != "wsd":
        raise ConfigError(f"ladder.budgets needs optim.schedule=wsd (got {optim['schedule']}): only a warm-up then "
                          f"constant lr is shared by every budget, so only WSD cooldowns branch from one trunk")
    if isinstance(budgets, (str, int, float)) or not budgets:
        raise ConfigError(f"ladder.budgets={budgets!r} must be a list of token budgets, e.g. [0.25Mi,0.5Mi,1Mi]")
    rungs: list[Rung] = []
    for i, value in enumerate(budgets):
        where = f"ladder.budgets[{i}]"
        tokens = parse_tokens(value, where)
        label = value.strip() if isinstance(value, str) else str(tokens)
        steps, rest = divmod(tokens, tokens_per_step)
        if rest:
            near = " or ".join(f"{s * tokens_per_step:,}" for s in (steps, steps + 1) if s > 0)
            raise ConfigError(f"{where}={label} is {tokens / tokens_per_step:.2f} steps of {tokens_per_step:,} tokens "
                              f"(data.batch_size × data.seq_len); give whole steps, e.g. {near} tokens")
        if rungs and tokens <= rungs[-1].tokens:
            raise ConfigError(f"ladder.budgets must increase: {where}={label} ({tokens:,} tokens) comes after "
                              f"{rungs[-1].label} ({rungs[-1].tokens:,} tokens)")
        if steps > max_steps:
            raise ConfigError(f"{where}={label} is {steps} steps, longer than the run (trainer.max_steps={max_steps}); "
                              f"raise trainer.max_steps to {steps} or drop the budget")
        cooldown = decay_steps_of(optim, steps)
        if cooldown < 1:
            shortest = next(s for s in range(1, 10**9) if decay_steps_of(optim, s) >= 1)
            raise ConfigError(f"{where}={label} is {steps} step(s), shorter than its cooldown of "
                              f"optim.decay_fraction={optim['decay_fraction']} × {steps} < 1 step; give at least "
                              f"{shortest * tokens_per_step:,} tokens ({shortest} steps) or raise optim.decay_fraction")
        rungs.append(Rung(label, tokens, steps, cooldown))
    warmup = warmup_steps_of(optim, rungs[0].steps)  # a fraction means: of the smallest budget, for every rung
    for i, r in enumerate(rungs):
        if r.branch_step < max(warmup, 1):
            raise ConfigError(f"ladder.budgets[{i}]={r.label} is {r.steps} steps: its {r.cooldown}-step cooldown would "
                              f"start at step {r.branch_step}, before the {warmup}-step warm-up ends or at step 0; "
                              f"give a larger budget or a shorter optim.warmup / optim.decay_fraction")
    return Plan(tuple(rungs), warmup, tokens_per_step)


VALIDATE = ("every", "ends")  # ladder.validate: every val_check_interval steps, or only at each piece's end


def check_validate(value: str) -> str:
    if value not in VALIDATE:
        raise UnknownNameError("ladder.validate", value, VALIDATE)
    return value


def plan_of(cfg: DictConfig) -> Plan:
    return plan_ladder(cfg.ladder.budgets, cfg.optim, cfg.data.batch_size * cfg.data.seq_len, cfg.trainer.max_steps)


# ---------------------------------------------------------------------------------------------- callbacks


def describe_plan(plan: Plan, optim: Mapping[str, Any]) -> list[str]:
    separate = sum(r.steps for r in plan.rungs)
    return [
        f"ladder   budgets {', '.join(r.label for r in plan.rungs)} tokens = {', '.join(str(r.steps) for r in plan.rungs)} "
        f"steps; warm-up {plan.warmup} steps for every budget; cooldowns {', '.join(str(r.cooldown) for r in plan.rungs)} "
        f"steps (optim.decay_fraction {optim['decay_fraction']}, {optim['decay_shape']})",
        f"ladder   trunk at constant lr to step {plan.trunk_steps}, then a cooldown per budget: {plan.steps_trained} "
        f"steps in all, against {separate} for separate runs ({plan.steps_trained / separate:.2f}×)",
    ]
