"""Fixtures for the compatibility suite: a real broker process and the real clients.

One broker serves each test module (``broker`` fixture); tests that restart or kill the broker
use ``own_broker``. When a test fails, the log of every broker it used is attached to the report.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# The helper modules beside this file (compat_broker, compat_clients, ...) import by plain name under
# any pytest import mode, including importlib (which leaves sys.path alone).
sys.path.insert(0, str(Path(__file__).parent))

from compat_broker import BrokerProcess, used_brokers

JS_DIR = Path(__file__).parent / "js"
_CLUSTERS_KEY = pytest.StashKey[list[Any]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every compatibility test gets a hard time limit unless it sets its own."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(90))




@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for b in used_brokers(item):
            report.sections.append((f"pylog broker log ({b.log_path.name})", b.log_text()))
        for c in item.stash.get(_CLUSTERS_KEY, []):
            for n in c.nodes.values():
                report.sections.append((f"pylog node {n.node_id} log", n.log_tail(200)))


def _start(tmp: Path, name: str, config: dict[str, str] | None = None) -> BrokerProcess:
    b = BrokerProcess(tmp / f"{name}-data", tmp / f"{name}.log", config=config)
    try:
        b.start()
    except Exception as exc:
        log = b.log_text()
        b.close()
        raise RuntimeError(f"could not start the broker: {exc}\n--- broker log ---\n{log}") from exc
    return b


@pytest.fixture(scope="module")
def _module_broker(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("broker")
    b = _start(tmp, request.module.__name__)
    yield b
    b.close()


@pytest.fixture
def broker(_module_broker: BrokerProcess, request: pytest.FixtureRequest) -> BrokerProcess:
    """The module's shared broker; it must still be alive when a test starts."""
    used_brokers(request.node).append(_module_broker)
    if not _module_broker.alive():
        pytest.fail(
            f"the module's broker died (exit code {_module_broker.proc and _module_broker.proc.poll()})"
        )
    return _module_broker


@pytest.fixture
def own_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A broker of this test's own, for restarts and crashes."""
    b = _start(tmp_path, "own")
    used_brokers(request.node).append(b)
    yield b
    b.close()


@pytest.fixture
def bootstrap(broker: BrokerProcess) -> str:
    return broker.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def kcat() -> str:
    path = shutil.which("kcat")
    if path is None:
        pytest.fail("kcat is not installed (Debian package 'kcat'; `make test` installs it)")
    return path


@pytest.fixture(scope="session")
def kafkajs() -> Path:
    """The kafkajs command-line helper; fails (never skips) when node or kafkajs is missing."""
    if shutil.which("node") is None:
        pytest.fail("node is not installed; the kafkajs tests need Node 20")
    if not (JS_DIR / "node_modules" / "kafkajs" / "package.json").exists():
        pytest.fail(f"kafkajs is not installed in {JS_DIR}; run `npm ci` there (`make test` does)")
    out = subprocess.run(
        ["node", "-e", "console.log(require('kafkajs/package.json').version)"],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.stdout.strip() != "2.2.4":
        pytest.fail(f"expected kafkajs 2.2.4 in {JS_DIR}, found {out.stdout.strip() or out.stderr}")
    return JS_DIR / "kafkajs_cli.js"



@pytest.fixture
def cluster_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Start `LocalCluster`s (short timeouts, data under tmp_path); each is stopped after the test,
    and every node's log is attached to the report of a failed test."""
    from cluster_support import FAST

    from pylog.local_cluster import LocalCluster

    started: list[LocalCluster] = []

    def start(nodes: int = 3, config: dict[str, str] | None = None, **kwargs: Any) -> LocalCluster:
        home = tmp_path / f"cluster-{len(started) + 1}"
        c = kwargs.pop("cluster", None) or LocalCluster(
            nodes, data_dir=home, config={**FAST, **(config or {})}, keep_data=True, **kwargs
        )
        started.append(c)
        request.node.stash[_CLUSTERS_KEY] = started
        c.start()
        return c

    yield start
    for c in started:
        c.close()
