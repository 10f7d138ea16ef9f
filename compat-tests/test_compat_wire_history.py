"""History served from sealed segments' `.wire` files: after a restart (the recent-batches cache
is empty) real clients read every record back from batches the broker sends as stored bytes, the
same records they produced, and still when a `.wire` file is missing or damaged (the broker
encodes those batches from Arrow instead)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce

BASE = 1_600_000_000_000
N = 400
pytestmark = pytest.mark.timeout(240)


def workload(n: int = N) -> list[Rec]:
    return [
        Rec(b"history %d " % i * 8, b"k%d" % (i % 50), (("n", b"%d" % i),), BASE + i, 0) for i in range(n)
    ]


def wire_files(data_dir: Path, topic: str) -> list[Path]:
    return sorted((data_dir / f"{topic}-0").glob("*.wire"))


def wait_sealed(data_dir: Path, topic: str, timeout: float = 60) -> list[Path]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        part = data_dir / f"{topic}-0"
        wires = wire_files(data_dir, topic)
        if wires and len(list(part.glob("*.arrows"))) == 1:
            return wires
        time.sleep(0.2)
    raise AssertionError(f"no sealed segments with .wire files in {timeout}s")


def check(broker: BrokerProcess, topic: str, sent: list[Rec], client: str) -> None:
    got = consume(client, broker.bootstrap, topic, len(sent))
    assert [r.offset for r in got] == list(range(len(sent)))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (r.key, r.value, r.headers, r.timestamp) for r in sent
    ]


def test_history_from_wire_files_after_restart(own_broker: BrokerProcess, topic_name: str) -> None:
    # format 1 writes the `.wire` files this test serves history from
    configs = {"segment.bytes": "6000", "pylog.segment.format": "1"}
    create_topic(own_broker.bootstrap, topic_name, configs=configs)
    sent = workload()
    for i in range(0, N, 40):  # several batches, so several segments
        client, codec = ("confluent-kafka", "none") if i < N // 2 else ("kafka-python", "lz4")
        produce(client, own_broker.bootstrap, topic_name, sent[i : i + 40], compression=codec)
    wires = wait_sealed(own_broker.data_dir, topic_name)
    assert len(wires) >= 3
    own_broker.restart()
    for client in ("confluent-kafka", "kcat", "kafka-python"):
        check(own_broker, topic_name, sent, client)

    # a missing and a damaged file: those segments are encoded from Arrow, the rest still sliced
    port = own_broker.port
    assert own_broker.stop() == 0
    wires[0].unlink()
    damaged = bytearray(wires[1].read_bytes())
    damaged[-1] ^= 0xFF  # inside the last batch's records: its CRC no longer holds
    damaged = damaged[:-1]  # and torn: the file no longer matches .batches
    wires[1].write_bytes(bytes(damaged))
    own_broker.start(port)
    for client in ("confluent-kafka", "kcat"):
        check(own_broker, topic_name, sent, client)
