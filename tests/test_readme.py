"""README.md's examples run as written, in order, against a real ``pylog broker``.

The broker is started the way the README starts it (``pylog broker``, data in ``./pylog-data`` of
the working directory), on a free port instead of 9092; the examples' ``127.0.0.1:9092`` is
replaced by that address and the ``pylog`` commands find it through ``PYLOG_BOOTSTRAP_SERVERS``.
Every Python block runs in its own interpreter; of the shell blocks, the lines that use the
cluster run (``pylog`` commands other than ``pylog broker``, ``printf`` pipes, ``kcat``), not the
set-up lines (virtualenv, pip, make). The secured set-up (its own broker, certificates, users) is
run by ``test_readme_security.py``, the cluster section by ``test_readme_cluster.py``, the pytest
fixtures' example by ``test_pytest_plugin.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "sdk"))
from sdk_helpers import Broker

README = Path(__file__).resolve().parents[1] / "README.md"
README_ADDRESS = "127.0.0.1:9092"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
USES_CLUSTER = re.compile(r"^(pylog (?!broker\b)|printf |kcat )")


SECURED = "## Security: TLS, SASL and ACLs"
CLUSTER = "## Running a cluster"  # its own test: test_readme_cluster.py
QUORUM = "## Changing the controller quorum"  # its own test: compat-tests/test_quorum_changes.py
PYTEST_FIXTURES = "## Testing your code against a real broker"  # a pytest file: test_pytest_plugin.py


def section(text: str, title: str) -> tuple[int, int]:
    """Where a ``## `` section starts and ends in ``text``."""
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return start, len(text) if end < 0 else end


def blocks() -> list[tuple[str, str]]:
    text = README.read_text()
    skipped = [section(text, t) for t in (SECURED, CLUSTER, QUORUM, PYTEST_FIXTURES)]
    return [
        (m.group(1), m.group(2))
        for m in BLOCK.finditer(text)
        if not any(start <= m.start() < end for start, end in skipped)
    ]


def test_readme_has_the_examples_this_test_runs() -> None:
    kinds = [kind for kind, _ in blocks()]
    assert kinds.count("python") == 7 and kinds.count("sh") >= 6
    commands = [line for kind, code in blocks() if kind == "sh" for line in code.splitlines()
                if USES_CLUSTER.match(line)]
    assert any(c.startswith("pylog group reset-offsets") for c in commands)
    assert any(c.startswith("kcat ") for c in commands)


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[tuple[Path, str, dict[str, str]]]:
    if shutil.which("kcat") is None:
        pytest.fail("kcat is not installed (Debian package 'kcat'; `make test` installs it)")
    broker = Broker(tmp_path / "pylog-data", tmp_path / "broker.log")
    env = dict(os.environ, PYLOG_BOOTSTRAP_SERVERS=broker.bootstrap,
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env = {k: v for k, v in env.items() if not k.startswith("PYSPARK_")}  # the README exports nothing
    try:
        yield tmp_path, broker.bootstrap, env
    finally:
        broker.stop()


@pytest.mark.timeout(900)
def test_readme_examples_run_in_order(workdir: tuple[Path, str, dict[str, str]]) -> None:
    cwd, address, env = workdir
    outputs = []
    for kind, code in blocks():
        code = code.replace(README_ADDRESS, address)
        if kind == "python":
            out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                                 text=True, timeout=600, check=False)
            assert out.returncode == 0, f"README example failed:\n{code}\n{out.stderr[-4000:]}"
            outputs.append(out.stdout)
        elif kind == "sh":
            for line in code.splitlines():
                if not USES_CLUSTER.match(line):
                    continue
                out = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                                     timeout=120, check=False)
                assert out.returncode == 0, f"README command failed: {line}\n{out.stderr[-4000:]}"
                outputs.append(out.stdout)
    text = "\n".join(outputs)
    assert "0 k1 hello source=readme" in text  # pylog topic consume --format
    assert "k3 from kcat source=kcat" in text  # kcat -C
    assert "b'k4' b'from python' [('source', b'py')]" in text  # kafka-python
    assert re.search(r"GROUP\s+TOPIC\s+PARTITION\s+CURRENT-OFFSET\s+LOG-END-OFFSET\s+LAG", text)
    assert re.search(r"\|\s*1\|\s*k2\|\s*world\|", text), "Spark's show() of demo from offset 1"
    upper = subprocess.run(["pylog", "topic", "consume", "demo-upper", "-e"], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    assert upper == ["WORLD", "FROM KCAT", "FROM PYTHON"]  # written back by Spark
