"""The layout's rules, read from the source: imports only point down the layers, no import cycles, and the
pure-torch and analysis packages really load without the training stack (checked in a fresh interpreter)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGE = REPO / "ffn_zoo"
# the layers, bottom up: a module may import its own layer or one below, never one above
LAYERS = [("ffn_zoo.errors", "ffn_zoo.atomic"), "ffn_zoo.nn", "ffn_zoo.data", "ffn_zoo.training", "ffn_zoo.analysis",
          ("ffn_zoo.tools", "ffn_zoo.train")]
HEAVY = ("hydra", "lightning", "omegaconf")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path) -> set[str]:
    """Every module an ``import`` anywhere in the file names: function-level ones and those under
    ``if TYPE_CHECKING:`` too (never run, but a type that names a module above is still an arrow up)."""
    tree = ast.parse(path.read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                    for a in node.names}
    return out


def layer(module: str) -> int | None:
    for i, names in enumerate(LAYERS):
        for name in (names if isinstance(names, tuple) else (names,)):
            if module == name or module.startswith(name + "."):
                return i
    return None  # ffn_zoo/__init__.py: the public re-exports, above every layer


@functools.cache  # every module's test reads the whole graph: parse the package once, not once per test
def internal_graph() -> dict[str, set[str]]:
    related = lambda a, b: a.startswith(b + ".") or b.startswith(a + ".")  # noqa: E731 (a package and its modules)
    return {m: {i for i in imports(p) if i in MODULES and i != m and not related(i, m)} for m, p in MODULES.items()}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    mine = layer(module)
    if mine is None:
        return
    for target in internal_graph()[module]:
        theirs = layer(target)
        assert theirs is not None and theirs <= mine, (
            f"{module} imports {target}, a layer above it ({LAYERS}); move the shared piece down")


def test_no_import_cycles() -> None:
    graph, state, cycles = internal_graph(), {}, []

    def visit(m: str, path: list[str]) -> None:
        state[m] = "open"
        for n in sorted(graph[m]):
            if state.get(n) == "open":
                cycles.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, "import cycle: " + " -> ".join(cycles[0])


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("ffn_zoo.nn")))
def test_nn_source_imports_no_training_stack(module: str) -> None:
    heavy = sorted(i for i in imports(MODULES[module]) if i.split(".")[0] in HEAVY)
    assert not heavy, f"{module} (pure torch) imports {heavy}"


def loaded_after(statement: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``heavy`` top-level packages a fresh interpreter holds after ``statement``."""
    code = f"import sys; {statement}; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return ast.literal_eval(proc.stdout.strip().splitlines()[-1])


def test_nn_loads_without_the_training_stack() -> None:
    assert loaded_after("import ffn_zoo.nn.model, ffn_zoo.nn.flops; from ffn_zoo import build_ffn") == []


def test_the_package_and_its_bottom_layer_load_without_torch() -> None:
    """The public names resolve on first use, so the error and file helpers (and compare) start fast."""
    assert loaded_after("import ffn_zoo, ffn_zoo.errors, ffn_zoo.atomic", ("torch", *HEAVY)) == []
    assert loaded_after("import ffn_zoo; ffn_zoo.GatedFFN", ("torch", *HEAVY)) == ["torch"]


def test_analysis_loads_without_lightning() -> None:
    assert loaded_after("import ffn_zoo.analysis.compare") == []  # not even OmegaConf until a run is read
    assert loaded_after("import ffn_zoo.analysis.compare.ladder, ffn_zoo.analysis.compare.tuned") == []
    assert "lightning" not in loaded_after("import ffn_zoo.analysis.report")


def test_resume_lookup_loads_without_the_training_stack() -> None:
    """runs.py (run-folder names, what ``ckpt_path`` resumes) and the JSON writes are read by tools too."""
    assert loaded_after("import ffn_zoo.training.lifecycle.runs, ffn_zoo.atomic", ("torch", *HEAVY)) == []


def test_fault_injection_is_wired_only_where_the_debug_keys_are_read() -> None:
    """``training/lifecycle/injection.py`` (test-only faults, ``debug.*``) is imported by the guards alone."""
    users = sorted(m for m, targets in internal_graph().items() if "ffn_zoo.training.lifecycle.injection" in targets)
    assert users == ["ffn_zoo.training.lifecycle.guards"]
