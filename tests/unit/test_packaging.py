"""pyproject lists every package of the tree (the list is explicit because configs/ is mapped into ffn_zoo)."""

import tomllib

from tests.helpers import REPO


def test_every_package_is_listed() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    tree = {".".join(p.parent.relative_to(REPO).parts) for top in ("ffn_zoo", "hydra_plugins")  # hydra_plugins: a
            for p in (REPO / top).rglob("__init__.py")}  # namespace package (no __init__.py), only its plugin is ours
    listed = set(setuptools["packages"]) - set(setuptools["package-dir"])
    assert listed == tree, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(tree - listed)}"
