"""pyproject lists every package of the tree (the list is explicit because configs/ is mapped into ffn_zoo)."""

import tomllib

from tests.helpers import REPO


def test_every_package_is_listed() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    tree = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "ffn_zoo").rglob("__init__.py")}
    listed = set(setuptools["packages"]) - set(setuptools["package-dir"])
    assert listed == tree, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(tree - listed)}"
