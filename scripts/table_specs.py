"""What every generated table of the GLU write-up is made of (scripts/glu_section_tables.py and
scripts/width_tables.py): the committed files a table reads (each read recorded in READS, the test's check), a table's spec (:class:`Table`:
its rows and columns), the cells with the one rounding rule of scripts/glu_tables.py (nats to 3 decimals; token
counts, parameters and multipliers to 3 significant figures; exact counts as integers), and a compare report's rows
(:class:`Report`).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Callable, Iterable

from ffn_zoo.analysis.compare.trend import tokens_label

GLU = Path(__file__).resolve().parent.parent / "experiments" / "glu_variants"
BUDGETS = (262_144, 524_288, 1_048_576, 2_097_152, 4_194_304)  # the ladders' 0.25 ... 4 Mi tokens

def paired(r: dict[str, Any]) -> tuple[float, float | None, float | None, int]:
    """(mean, lo, hi, pairs) of the paired Δ. Reports from before compare wrote ``paired_delta`` had equal seed
    sets, where the difference of the means is the paired mean."""
    mean = r["paired_delta"] if r.get("paired_delta") is not None else r["delta"]
    return mean, r.get("paired_lo"), r.get("paired_hi"), r.get("n_pairs") or r["n"]

def nats(x: float) -> str:
    return f"{x:+.3f}".replace("-", "−")

def tokens(t: float) -> str:
    return tokens_label(t).replace("M", " M").replace("k", " k").replace("G", " G")

def mi(t: int) -> str:
    """A budget by its exact name: ``0.25 Mi`` (1 Mi = 2**20 tokens), never rounded."""
    return f"{t / 2**20:g} Mi"

def times(x: float) -> str:
    return f"{x:.3g}×"

def excludes_zero(lo: float | None, hi: float | None) -> bool:
    return lo is not None and hi is not None and (lo > 0 or hi < 0)

def delta_cell(r: dict[str, Any] | None, seeds: int | None = None) -> str:
    """``**+0.093 [+0.060, +0.127]**`` (bold: the paired interval excludes 0); ``+0.055 (1 seed)`` without one."""
    if r is None:
        return "—"
    mean, lo, hi, n = paired(r)
    if lo is None or hi is None:
        return f"{nats(mean)} ({n} seed{'s' * (n != 1)})"
    text = f"{nats(mean)} [{nats(lo)}, {nats(hi)}]"
    text = f"**{text}**" if excludes_zero(lo, hi) else text
    return text + ("" if seeds is None or n == seeds else f" ({n} seeds)")

def crossing_cell(t: dict[str, Any]) -> str:
    """Where the fitted line crosses 0, with its interval, and which way (SwiGLU pulling ahead or falling behind)."""
    span = f"{t['tokens_lo'] / 2**20:g}–{t['tokens_hi'] / 2**20:g} Mi"
    cross = t["crossing_tokens"]
    within = str(t.get("within", cross is not None and t["tokens_lo"] <= cross <= t["tokens_hi"])) == "True"
    if not within:
        why = {"+": "Δ > 0 throughout", "-": "Δ < 0 throughout"}.get(t.get("sign"), "sign unresolved")
        return f"none in {span} ({why})"
    way = "" if t["slope_per_decade"] < 0 else " (SwiGLU falls behind)"
    if len(t["seeds_used"]) < 2:
        return f"{tokens(t['crossing_tokens'])}{way}, 1 seed: no interval"
    if t["crossing_lo"] is None or t["crossing_hi"] is None:
        return f"{tokens(t['crossing_tokens'])}{way}, interval unbounded"
    return f"{tokens(t['crossing_tokens'])} [{tokens(t['crossing_lo'])}, {tokens(t['crossing_hi'])}]{way}"

def multiplier_cell(m: dict[str, Any]) -> str:
    """``0.84× [0.80, 0.87]``; beyond the ladder a bound (``> 1×``) and the nearest segment's line as a guess."""
    if m["multiplier"] is not None:
        if m["multiplier_lo"] is None:
            return f"{times(m['multiplier'])} (1 seed)"
        return f"{times(m['multiplier'])} [{m['multiplier_lo']:.3g}, {m['multiplier_hi']:.3g}]"
    bound = re.search(r"\(([<>] [\d.]+×)", m["multiplier_note"] or "")
    guess = f" (line: {times(m['multiplier_guess'])})" if m.get("multiplier_guess") else ""
    return f"{bound[1] if bound else '—'}{guess}"


READS: set[str] = set()  # every committed file read, relative to experiments/glu_variants (the test's check)


@cache
def _text(rel: str) -> str:
    return (GLU / rel).read_text()


@cache
def _parsed(rel: str) -> Any:
    raw = _text(rel)
    return [json.loads(line) for line in raw.splitlines() if line] if rel.endswith(".jsonl") else json.loads(raw)


def read(rel: str) -> str:
    """A committed file's text, recorded in :data:`READS`."""
    READS.add(rel)
    return _text(rel)


def load(rel: str) -> Any:
    """A committed JSON file (``.jsonl``: a list, one object a line), parsed once; read-only."""
    READS.add(rel)
    return _parsed(rel)


@dataclass(frozen=True)
class Col:
    head: str
    cell: Callable[[Any], str]
    align: str = "---:"  # "---" for text


@dataclass(frozen=True)
class Table:
    """One generated table: the committed files it reads (under experiments/glu_variants), its rows, its columns."""
    sources: tuple[str, ...]
    rows: Callable[[], Iterable[Any]]
    cols: tuple[Col, ...] | Callable[[], tuple[Col, ...]]  # a callable where the header comes from the data

    def __call__(self) -> str:
        cols = self.cols() if callable(self.cols) else self.cols
        lines = ["| " + " | ".join(c.head for c in cols) + " |", "|" + "|".join(c.align for c in cols) + "|"]
        lines += ["| " + " | ".join(c.cell(r) for c in cols) + " |" for r in self.rows()]
        return "\n" + "\n".join(lines) + "\n"


def text(head: str, cell: Callable[[Any], str]) -> Col:
    return Col(head, cell, "---")

# ----------------------------------------------------------------------------- cells, one rounding rule


def loss(x: float) -> str:
    return f"{x:.3f}"


def interval(lo: float | None, hi: float | None) -> str:
    return f"[{nats(lo)}, {nats(hi)}]" if lo is not None and hi is not None else "(no interval)"


def starred(mean: float, lo: float | None, hi: float | None) -> str:
    """``+0.093 [+0.060, +0.127] *`` (``*``: the interval excludes 0)."""
    return f"{nats(mean)} {interval(lo, hi)}" + (" *" if excludes_zero(lo, hi) else "")


def paired_starred(r: dict[str, Any]) -> str:
    mean, lo, hi, _ = paired(r)
    return starred(mean, lo, hi)


def paired_plain(r: dict[str, Any]) -> str:
    """``−0.032 [−0.057, −0.007]``: the paired Δ, unmarked (for a sentence or a cell that says it in words)."""
    mean, lo, hi, _ = paired(r)
    return f"{nats(mean)} {interval(lo, hi)}"


def count(n: float) -> str:
    """An exact count: ``2,097,152``."""
    return f"{n:,.0f}"


def sig3(x: float) -> str:
    """3 significant figures, trailing zeros kept: ``33.0``, ``104``, ``1.85``."""
    return f"{x:.{max(2 - math.floor(math.log10(abs(x))), 0)}f}"


def millions(n: float) -> str:
    return f"{sig3(n / 1e6)} M"


def lr_label(lr: float) -> str:
    """``2e-3``."""
    mantissa, exponent = f"{lr:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def seeds_of(r: dict[str, Any]) -> dict[int, float]:
    return dict(zip(r["seeds"], r["val_losses"]))


# ----------------------------------------------------------------------------- a ladder report's rows


@dataclass(frozen=True)
class Report:
    """One committed ladder report (``<folder>/ladder.json``), on Wikipedia (``held=""``) or C4 (``"c4"``)."""
    folder: str
    held: str = ""

    @property
    def source(self) -> str:
        return f"{self.folder}/ladder.json"

    def part(self) -> dict[str, Any]:
        r = load(self.source)
        return r["extra_val"][self.held] if self.held else r

    def row(self, variant: str, budget: int, setting: int = 1) -> dict[str, Any]:
        """One variant's losses at one budget (``budget_rows``)."""
        (r,) = [r for r in self.part()["budget_rows"]
                if r["variant"] == variant and r["budget_tokens"] == budget and r["ladder_setting"] == setting]
        return r

    def delta(self, budget: int, variant: str = "swiglu", baseline: str = "gelu", setting: int = 1) -> dict[str, Any]:
        (r,) = [r for r in self.part()["delta_rows"] if r["variant"] == variant and r["baseline"] == baseline
                and r["budget_tokens"] == budget and r["ladder_setting"] == setting]
        return r

    def trend(self, setting: int = 1, variant: str = "swiglu") -> dict[str, Any]:
        (t,) = [t for t in self.part()["trends"] if t["variant"] == variant and t["ladder_setting"] == setting]
        return t

    def c4(self) -> Report:
        return Report(self.folder, "c4")


HELD = (("", "Wikipedia"), ("c4", "C4"))
Q, H, M1, M2, M4 = BUDGETS  # 0.25, 0.5, 1, 2, 4 Mi
