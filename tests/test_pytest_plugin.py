"""pylog's pytest plugin (`pylog.testing`) as a project using pylog meets it: pytest, run in a directory
of its own, finds the fixtures through the installed package's ``pytest11`` entry point. The example
suite examples/pytest (a consumer application tested with kafka-python, confluent-kafka and aiokafka;
the fixtures' own behaviour) passes, and a session asking for no fixture starts and imports nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "pytest"
README = Path(__file__).resolve().parents[1] / "README.md"


def pytest_in(directory: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYLOG_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=directory, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def outcome(out: subprocess.CompletedProcess[str]) -> dict[str, int]:
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|errors?|skipped)", out.stdout)}


def readme_example() -> str:
    from test_readme import BLOCK, PYTEST_FIXTURES, section

    text = README.read_text()
    start, end = section(text, PYTEST_FIXTURES)
    (code,) = [m.group(2) for m in BLOCK.finditer(text, start, end) if m.group(1) == "python"]
    return code


@pytest.mark.timeout(600)
def test_the_example_suite_and_the_readme_example_pass(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "example")
    (tmp_path / "example" / "test_readme_example.py").write_text(readme_example())
    out = pytest_in(tmp_path / "example")
    assert out.returncode == 0, f"{out.stdout[-6000:]}\n{out.stderr[-3000:]}"
    assert outcome(out) == {"passed": 14}, out.stdout[-2000:]


def test_the_plugin_starts_nothing_unasked_and_gives_way_to_a_conftest(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text('''
import sys


def test_plain(request):
    assert request.config.pluginmanager.get_plugin("pylog") is sys.modules["pylog.testing"]
    # neither a broker nor pyarrow: the plugin costs a session that does not use it nothing
    assert "pylog.local" not in sys.modules and "pyarrow" not in sys.modules
''')
    # a project that already has a `kafka_broker` fixture (say, a Docker one) keeps it
    (tmp_path / "conftest.py").write_text('''
import pytest


@pytest.fixture
def kafka_broker():
    return "theirs"
''')
    (tmp_path / "test_own.py").write_text('''
def test_own(kafka_broker):
    assert kafka_broker == "theirs"
''')
    out = pytest_in(tmp_path)
    assert out.returncode == 0 and outcome(out) == {"passed": 2}, out.stdout[-3000:]
