from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from harness import BrokerThread, Client


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = BrokerThread(tmp_path / "data").start()
    yield b
    b.stop()


@pytest.fixture
def client(broker: BrokerThread) -> Iterator[Client]:
    c = Client(broker.address)
    yield c
    c.close()
