"""The device check's report.json -> Markdown: one section per part, its status first, then its numbers."""

from __future__ import annotations

from typing import Any


def _f(v: Any, spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def _table(head: list[str], rows: list[list[Any]], right_from: int = 1) -> list[str]:
    """A Markdown table; columns from ``right_from`` on are right-aligned (numbers)."""
    align = ["---" if i < right_from else "---:" for i in range(len(head))]
    return [f"| {' | '.join(head)} |", f"|{'|'.join(align)}|"] + [f"| {' | '.join(map(str, r))} |" for r in rows]


def _env(r: dict[str, Any]) -> list[str]:
    keys = ("gpu", "gpu_memory_gib", "sms", "capability", "driver", "cuda", "cudnn", "torch", "lightning",
            "transformers", "hydra", "omegaconf", "python", "bf16", "cpus")
    rows = [[k, _f(r[k], ".1f") if k == "gpu_memory_gib" else r[k]] for k in keys if k in r]
    if r.get("sdpa"):
        rows.append(["SDPA backends", ", ".join(f"{k}: {v}" for k, v in r["sdpa"].items())])
    return _table(["", ""], rows, right_from=2)


def _gemm(r: dict[str, Any]) -> list[str]:
    nominal = r.get("nominal_tflops") or {}
    rows = [[k, _f(r[k]["tflops"], ".4g"), _f(nominal.get(k), ".0f"), _f(r[k]["of_nominal"], ".0%")]
            for k in ("bf16", "tf32", "fp32") if isinstance(r.get(k), dict)]
    return [f"{r.get('n')}×{r.get('n')}×{r.get('n')} matmuls on random data, best of 2 probes of "
            f"{r.get('seconds')} s. Nominal: {r.get('nominal_source')}.", ""] + \
        _table(["precision", "measured TFLOP/s", "nominal TFLOP/s", "measured / nominal"], rows)


def _step(r: dict[str, Any]) -> list[str]:
    peaks = ", ".join(f"{k} {v:.4g}" for k, v in (r.get("peaks_tflops") or {}).items())
    lines = [f"Largest batch: {r.get('batch')} ({r.get('batch_rule')}; {_f(r.get('batch_search_s'), '.0f')} s). "
             f"MFU = tokens/s × (6·N + 12·L·d·T) / the measured peak of that precision ({peaks} TFLOP/s).", ""]
    head = ["impl", "model", "ffn", "precision", "compile", "batch", "tokens/s", "spread", "step ms", "MFU",
            "MFU vs nominal", "peak GiB", "warm-up s", "host syncs/step"]
    rows = [[x["impl"], x["model"], x["ffn"], x["precision"], "yes" if x["compile"] else "no", x["batch"],
             f"{x['tokens_per_s']:,.0f}", f"{x['spread']:.1%}", f"{x['step_ms']:.1f}", f"{x['mfu']:.3f}",
             _f(x["mfu_nominal"], ".3f"), _f(x["peak_mem_gib"], ".1f"), f"{x['warmup_s']:.1f}",
             _f(x["host_syncs_per_step"], "d")] for x in r.get("rows", [])]
    lines += _table(head, rows, right_from=5)
    if r.get("ratios"):
        lines += [""] + _table(["ratio", "value", "batches"],
                               [[x["what"], f"{x['value']:.3f}", x["batches"]] for x in r["ratios"]])
    for k in ("skipped", "errors"):
        if r.get(k):
            lines += ["", f"{k}: " + "; ".join(r[k])]
    return lines


def _yes(v: Any) -> str:
    return "yes" if v else "NO"


def _train(r: dict[str, Any]) -> list[str]:
    m, bare = r.get("metrics") or {}, r.get("bare_step") or {}
    rows = [
        [f"killed after its checkpoint (SIGKILL, rc {r.get('killed_rc')})",
         f"{_yes(r.get('killed_as_planned'))}: checkpoint at step {r.get('checkpoint_step')}"],
        ["resumed to the end", f"{_yes(r.get('resumed_ok'))} (status {m.get('status')}, steps {m.get('steps')})"],
        ["trained (final val/loss below ln vocab)", f"{_yes(r.get('learned'))}: val/loss "
         f"{_f(m.get('val_loss'), '.4f')}, val/ppl {_f(m.get('val_ppl'), '.2f')}"],
        ["best.ckpt written", _yes(r.get("best_ckpt"))],
        ["train.py tokens/s (resumed run, its first step, the compile, excluded)",
         _f(m.get("train_tokens_per_s"), ",.0f")],
        [f"bare step tokens/s (part step, same shape{', compiled' if bare.get('compile') else ', EAGER'})",
         _f(bare.get("tokens_per_s"), ",.0f")],
        ["train.py / bare step", _f(r.get("vs_bare_step"), ".3f")],
        ["wall s (killed run, resumed run)",
         f"{_f(r.get('killed_wall_s'), '.0f')}, {_f(r.get('resumed_wall_s'), '.0f')}"],
    ]
    return [f"`{r.get('command')}` — first with `debug.kill_at_step={(r.get('steps') or 0) // 2}`, then "
            f"`ckpt_path=last`.", ""] + _table(["check", "result"], rows, right_from=2)


def _glu(r: dict[str, Any]) -> list[str]:
    floor = "" if r.get("meets_floor", True) else " (BELOW the issue's 10x: the window allowed no more)"
    return [f"Corpus: {r.get('corpus')} (prep {_f(r.get('prep_s'), '.0f')} s).",
            f"Budget: {r.get('steps')} steps, {_f((r.get('tokens_per_run') or 0) / 1e6, '.2f')} M tokens per run = "
            f"{_f(r.get('x_cpu_table'), '.1f')}× the CPU table's 0.98 M{floor} ({_f(r.get('corpus_epochs'), '.2f')} "
            f"epochs of the corpus); sized from {r.get('sized_from')} ({_f(r.get('step_tokens_per_s'), ',.0f')} "
            f"tokens/s, assumed aggregate {_f(r.get('assumed_aggregate_tokens_per_s'), ',.0f')}, measured "
            f"{_f(r.get('measured_aggregate_tokens_per_s'), ',.0f')}); {len(r.get('groups') or [])} processes "
            f"at once, {_f(r.get('train_wall_s'), '.0f')} s; return codes {r.get('return_codes')}.", "",
            r.get("table_md") or "(no table)"]


SECTIONS = {"env": ("1. Environment", _env), "gemm": ("2. GEMM peak", _gemm),
            "step": ("3. Training step", _step), "train": ("4. train.py end to end", _train),
            "glu": ("5. GLU variants, small scale", _glu)}


def markdown(report: dict[str, Any]) -> str:
    kind = "DRY RUN (CPU, tiny sizes: the numbers mean nothing)" if report.get("dry_run") else "GPU"
    lines = [f"# ffn-zoo device check — {kind}", "",
             f"Started {report.get('started')}; {report.get('wall_s', 0):.0f} s in all.", "",
             "| part | status | wall s | budget s |", "|---|---|---:|---:|"]
    for name, part in report["parts"].items():
        lines.append(f"| {name} | {part['status']} | {part['wall_s']:.0f} | {part['budget_s']:.0f} |")
    for name, part in report["parts"].items():
        title, fn = SECTIONS[name]
        lines += ["", f"## {title} — {part['status']}", ""]
        if part.get("error"):
            lines += [f"error: `{part['error'][:500]}`", ""]
        try:
            lines += fn(part["result"])
        except (KeyError, TypeError) as e:  # a part killed half-way: show what it has
            lines.append(f"(incomplete: {type(e).__name__} {e})")
    return "\n".join(lines) + "\n"
