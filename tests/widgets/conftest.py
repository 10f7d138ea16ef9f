from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import pylog


@pytest.fixture(scope="module")
def broker() -> Iterator[pylog.LocalBroker]:
    """A real pylog broker process for the module (free port, temporary data directory)."""
    b = pylog.LocalBroker(config={"num.partitions": 3})
    try:
        b.start()
    except Exception as exc:
        b.close()
        pytest.fail(f"cannot start a pylog broker with {sys.executable} -m pylog broker: {exc}")
    yield b
    b.close()
