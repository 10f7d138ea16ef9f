"""The dependency rule of DESIGN.md, checked on the source: protocol/ and storage/ import nothing
from the rest of pylog but the kernel (``pylog.model``), which imports nothing from pylog at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "pylog.model"
# directory -> the package it is installed as (pyproject.toml's package-dir)
LAYERS = {"protocol": "pylog.protocol", "storage": "pylog.storage"}


def imported_modules(path: Path, package: str) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved in ``package``)."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    here = package.split(".")
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                out.add(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                out.add(node.module)
    return out


def module_package(path: Path, directory: str, package: str) -> str:
    """The package a module's relative imports start from (its own, for an ``__init__``)."""
    rel = path.relative_to(ROOT / directory).parent
    return ".".join([*package.split("."), *rel.parts])


@pytest.mark.parametrize("directory", sorted(LAYERS))
def test_protocol_and_storage_import_only_themselves_and_the_kernel(directory: str) -> None:
    package = LAYERS[directory]
    files = sorted((ROOT / directory).rglob("*.py"))
    assert files, f"no sources under {directory}/"
    wrong = {}
    for path in files:
        for name in imported_modules(path, module_package(path, directory, package)):
            if name.startswith("pylog") and not (name == KERNEL or name.startswith(package)):
                wrong.setdefault(str(path.relative_to(ROOT)), []).append(name)
    assert wrong == {}, f"{directory}/ may import only {package} and {KERNEL} from pylog"


def test_the_kernel_is_a_leaf() -> None:
    names = imported_modules(ROOT / "pylog" / "model.py", "pylog")
    assert {n for n in names if n.startswith("pylog")} == set()
    assert names <= {"__future__", "pyarrow"}
