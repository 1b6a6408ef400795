"""Regenerate README.md's generated blocks from the tables in ffn_zoo: the zoo table and the variant count
(``FFN_VARIANTS``), the dead-unit rules (``ACTIVATIONS[...].dead``) and the parameter/FLOP counts at BERT-base.

    python scripts/readme_tables.py          # rewrites README.md in place; tests/unit/test_docs.py checks it

A block is ``<!-- gen:NAME -->...<!-- /gen:NAME -->``; everything between the markers is rewritten.
"""

from pathlib import Path
from typing import Callable

from ffn_zoo.analysis.report import GENERATED, report, to_markdown, zoo_markdown
from ffn_zoo.nn.activations import ACTIVATIONS
from ffn_zoo.nn.ffn import FFN_VARIANTS

README = Path(__file__).resolve().parent.parent / "README.md"


def dead_markdown() -> str:
    """When a unit counts as dead, per activation, with the variants that use it."""
    lines = ["| activation | in `ffn=` | dead when (for every token of the batch) |", "|---|---|---|"]
    for name, act in ACTIVATIONS.items():
        users = ", ".join(f"`{v}`" for v, spec in FFN_VARIANTS.items() if spec.activation == name) or "—"
        lines.append(f"| `{name}` | {users} | {act.dead.replace('|', chr(92) + '|')} |")  # \| keeps |x| in its cell
    return "\n".join(lines)


def flop_markdown() -> str:
    """``ffn-zoo-report model=bert_base --no-time`` (toy vocabulary, 512 tokens): counts, the same on every machine."""
    return to_markdown(report(["model=bert_base"], 512, timing=False), 512)


BLOCKS = {
    "zoo-table": lambda: "\n" + zoo_markdown() + "\n",
    "zoo-count": lambda: str(len(FFN_VARIANTS)),
    "dead-table": lambda: "\n" + dead_markdown() + "\n",
    "flop-table": lambda: "\n" + flop_markdown() + "\n",
}


def render_readme(text: str, blocks: dict[str, Callable[[], str]] | None = None) -> str:
    """``text`` with every generated block rewritten (each built once, however often it appears); ``blocks``:
    another document's generators (scripts/glu_tables.py), README.md's by default."""
    blocks = BLOCKS if blocks is None else blocks
    built: dict[str, str] = {}

    def block(name: str) -> str:
        if name not in built:
            built[name] = blocks[name]()
        return built[name]

    return GENERATED.sub(lambda m: m[1] + block(m["name"]) + m[4], text)


if __name__ == "__main__":
    README.write_text(render_readme(README.read_text()))
    print(f"wrote {README}")
