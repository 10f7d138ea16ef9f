"""Compressed produce over a real socket lands compressed in the Arrow segments (Arrow IPC buffer
compression), and clients and Arrow readers still see exactly what was sent."""

from __future__ import annotations

import pyarrow.ipc as ipc
from compat_broker import BrokerProcess
from compat_clients import consume, create_topic

N = 3000
LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"


def _produce_lz4(bootstrap: str, topic: str) -> list[bytes]:
    from confluent_kafka import Producer

    values = [(b"segment compression %06d " % i) * 40 for i in range(N)]
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 50})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0
    return values


def _segment_bytes(broker: BrokerProcess, topic: str) -> bytes:
    part = broker.data_dir / f"{topic}-0"
    return b"".join(f.read_bytes() for f in sorted(part.glob("*.arrows")))


def test_lz4_batches_are_stored_lz4_compressed(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1)
    values = _produce_lz4(broker.bootstrap, topic_name)
    stored = _segment_bytes(broker, topic_name)
    raw = sum(len(v) for v in values)
    assert LZ4_FRAME_MAGIC in stored and len(stored) < raw // 5, f"{len(stored)} bytes stored for {raw}"
    with ipc.open_stream(stored) as reader:
        assert reader.read_all().column("value").to_pylist() == values
    for client in ("kafka-python", "confluent-kafka"):
        got = consume(client, broker.bootstrap, topic_name, N)
        assert [r.value for r in got] == values, f"{client} read back something else"


def test_topic_config_none_stores_plain_bodies(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=1, configs={"pylog.segment.compression": "none"})
    values = _produce_lz4(broker.bootstrap, topic_name)
    stored = _segment_bytes(broker, topic_name)
    assert LZ4_FRAME_MAGIC not in stored and len(stored) > sum(len(v) for v in values)
    got = consume("confluent-kafka", broker.bootstrap, topic_name, N)
    assert [r.value for r in got] == values
