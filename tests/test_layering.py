"""The dependency rules of ARCHITECTURE.md ("Layers and what each may import"), checked on the
source: protocol/ and storage/ import nothing from the rest of pylog but the kernel
(``pylog.model``), which imports nothing from pylog at all; every import goes down the layer order
(``LAYER_ORDER``); and no import circle exists anywhere in the package, counting every import:
those that run while modules load, those in function bodies and those under ``if TYPE_CHECKING``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "pylog.model"
# directory -> the package it is installed as (pyproject.toml's package-dir)
LAYERS = {"protocol": "pylog.protocol", "storage": "pylog.storage"}
PACKAGES = {"pylog": "pylog", **LAYERS, "widgets": "pylog.widgets"}


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


def all_modules() -> dict[str, Path]:
    """Every module of the installed package, by name (an ``__init__`` by its package's name)."""
    out = {}
    for directory, package in PACKAGES.items():
        for path in (ROOT / directory).rglob("*.py"):
            parts = path.relative_to(ROOT / directory).with_suffix("").parts
            if directory == "pylog" and parts[0] in PACKAGES:
                continue  # links of the type-check tree, if any
            out[".".join([package, *parts[: -1 if parts[-1] == "__init__" else None]])] = path
    return out


def import_statements(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import of a module: at load time, in function bodies, under ``if TYPE_CHECKING``."""
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def import_graph() -> dict[str, set[str]]:
    """module -> the pylog modules it imports (``from P import m`` names module P.m when there is
    one; a module's own parent packages, loaded before it anyway, are left out)."""
    modules = all_modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in import_statements(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            if node.level:
                here = package.split(".")
                base = ".".join([*here[: len(here) - node.level + 1], *([base] if base else [])])
            for alias in node.names:
                targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {
            m for t in targets if t.startswith("pylog") and (m := known(t)) is not None
            and m != name and not name.startswith(m + ".")
        }
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


# ARCHITECTURE.md's layers, lowest first: a module may import modules of its own row or of rows
# before it. A module belongs to the row of its longest listed prefix.
LAYER_ORDER: list[tuple[str, ...]] = [
    ("pylog.model",),
    ("pylog.protocol", "pylog.storage"),
    (
        "pylog.replication", "pylog.groups", "pylog.txn", "pylog.share", "pylog.tiered", "pylog.quotas",
        "pylog.telemetry", "pylog.client", "pylog.security", "pylog.schema_registry", "pylog.cluster",
        "pylog.metrics", "pylog.config", "pylog.config_defs", "pylog.kafka_configs", "pylog.properties",
        "pylog.clock", "pylog.tasks", "pylog.cluster_info", "pylog._extras", "pylog._lazy",
        "pylog.onecopy_kafka",
    ),
    ("pylog.sdk",),
    ("pylog.iceberg", "pylog.spark", "pylog.widgets"),
    ("pylog.broker",),
    # services over a node's parts, started by the composition root
    (
        "pylog.metrics.observed", "pylog.metrics.collector", "pylog.metrics.health", "pylog.metrics.node",
        "pylog.flight",
    ),
    ("pylog.broker.broker",),
    (
        "pylog", "pylog.__main__", "pylog.cli", "pylog.local", "pylog.local_cluster", "pylog.local_processes",
        "pylog.admin", "pylog.testing", "pylog.testing_s3",
    ),
]


def layer_of(module: str) -> int:
    rows = {prefix: i for i, row in enumerate(LAYER_ORDER) for prefix in row}
    name = module
    while name not in rows:
        if "." not in name:
            raise AssertionError(f"{module} is in no row of LAYER_ORDER (add it to its row)")
        name = name.rpartition(".")[0]
    return rows[name]


def test_the_import_graph_sees_the_package() -> None:
    graph = import_graph()
    # from pylog.protocol import records (a package)
    assert "pylog.protocol.records" in graph["pylog.broker.coordinators.internal_topics"]
    observed = graph["pylog.metrics.observed"]  # imports under if TYPE_CHECKING count
    assert any(m.startswith("pylog.broker.") for m in observed)
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_every_import_goes_down_the_layer_order() -> None:
    upward = sorted(
        f"{a} -> {b}" for a, deps in import_graph().items() for b in deps if layer_of(b) > layer_of(a)
    )
    assert upward == []
