"""Regenerate README.md's generated blocks (the zoo table, the variant count) from the tables in ffn_zoo.

    python scripts/readme_tables.py          # rewrites README.md in place; tests/unit/test_docs.py checks it
"""

from pathlib import Path

from ffn_zoo.analysis.report import render_readme

README = Path(__file__).resolve().parent.parent / "README.md"

if __name__ == "__main__":
    README.write_text(render_readme(README.read_text()))
    print(f"wrote {README}")
