"""Durability across broker restarts: a clean SIGTERM and a kill -9. Every acknowledged record is
there afterwards, at its offset, with its key, headers and timestamp; topics and their configs
persist; clients reconnect; new records continue the offsets."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, end_offsets, produce

BASE = 1_600_000_000_000
pytestmark = pytest.mark.timeout(180)


def workload(tag: str, n: int = 300) -> list[Rec]:
    return [
        Rec(f"{tag}-{i}".encode() * 3, f"k{i}".encode(), (("n", str(i).encode()),), BASE + i, i % 3)
        for i in range(n)
    ]


def by_partition(recs: list[Rec]) -> dict[int, list[tuple[Any, ...]]]:
    out: dict[int, list[tuple[Any, ...]]] = {}
    for r in recs:
        out.setdefault(r.partition or 0, []).append((r.key, r.value, r.headers, r.timestamp))
    return out


def fill(broker: BrokerProcess, topic: str) -> list[Rec]:
    create_topic(broker.bootstrap, topic, partitions=3, configs={"retention.ms": "86400000"})
    sent = workload("plain")
    produce("confluent-kafka", broker.bootstrap, topic, sent[:150], compression="none")
    produce("kafka-python", broker.bootstrap, topic, sent[150:], compression="lz4")
    return sent


def check_all_there(broker: BrokerProcess, topic: str, sent: list[Rec]) -> None:
    assert end_offsets(broker.bootstrap, topic, (0, 1, 2)) == {0: 100, 1: 100, 2: 100}
    got = consume("kafka-python", broker.bootstrap, topic, len(sent), partitions=(0, 1, 2))
    assert by_partition(got) == by_partition(sent)
    for p in range(3):
        assert [r.offset for r in got if r.partition == p] == list(range(100))


def check_metadata_and_config(broker: BrokerProcess, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert len(admin.list_topics(topic=topic, timeout=20).topics[topic].partitions) == 3
    res = ConfigResource(ResourceType.TOPIC, topic)
    assert admin.describe_configs([res])[res].result(30)["retention.ms"].value == "86400000"


def check_offsets_continue(broker: BrokerProcess, topic: str) -> None:
    more = [Rec(b"after restart", partition=p) for p in range(3)]
    produced = produce("confluent-kafka", broker.bootstrap, topic, more)
    assert produced.positions == [(0, 100), (1, 100), (2, 100)]


def test_clean_restart(own_broker: BrokerProcess, topic_name: str) -> None:
    sent = fill(own_broker, topic_name)
    port = own_broker.port
    assert own_broker.stop() == 0, "SIGTERM should be a clean shutdown with exit code 0"
    own_broker.start(port)
    check_all_there(own_broker, topic_name, sent)
    check_metadata_and_config(own_broker, topic_name)
    check_offsets_continue(own_broker, topic_name)


def test_kill_9(own_broker: BrokerProcess, topic_name: str) -> None:
    sent = fill(own_broker, topic_name)
    own_broker.restart(hard=True)
    check_all_there(own_broker, topic_name, sent)
    check_metadata_and_config(own_broker, topic_name)
    check_offsets_continue(own_broker, topic_name)


def test_restart_twice_and_topic_deleted_before_restart_stays_deleted(
    own_broker: BrokerProcess, topic_name: str
) -> None:
    from kafka.admin import KafkaAdminClient

    sent = fill(own_broker, topic_name)
    gone = topic_name + "-gone"
    create_topic(own_broker.bootstrap, gone)
    produce("kafka-python", own_broker.bootstrap, gone, [Rec(b"x", partition=0)])
    admin = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap)
    admin.delete_topics([gone])
    admin.close()
    own_broker.restart()
    own_broker.restart(hard=True)
    check_all_there(own_broker, topic_name, sent)
    admin = KafkaAdminClient(bootstrap_servers=own_broker.bootstrap)
    try:
        assert gone not in admin.list_topics()
    finally:
        admin.close()


def test_kill_9_while_producing(own_broker: BrokerProcess, topic_name: str) -> None:
    """Records acknowledged before the crash survive it; the log has no gaps or torn batches."""
    from confluent_kafka import Producer

    create_topic(own_broker.bootstrap, topic_name, partitions=3)
    acked: list[tuple[int, int, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            with lock:
                acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer(
        {
            "bootstrap.servers": own_broker.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 5000,
            "compression.type": "lz4",
        }
    )

    def run() -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(
                    topic_name, f"rec-{i}".encode() * 10, partition=i % 3, on_delivery=on_delivery
                )
                i += 1
            except BufferError:
                pass
            producer.poll(0.001)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if len(acked) >= 3000:
                break
        time.sleep(0.05)
    own_broker.kill()
    stop.set()
    t.join(10)
    producer.flush(8)  # the rest fail: the broker is gone
    with lock:
        survivors = list(acked)
    assert len(survivors) >= 3000, "the producer did not get going before the crash"

    own_broker.start(own_broker.port)
    ends = end_offsets(own_broker.bootstrap, topic_name, (0, 1, 2))
    for p in range(3):
        mine = [(o, v) for q, o, v in survivors if q == p]
        assert ends[p] >= max(o for o, _ in mine) + 1, f"acknowledged records of partition {p} lost"
    total = sum(ends.values())
    got = consume(
        "confluent-kafka", own_broker.bootstrap, topic_name, total, partitions=(0, 1, 2), timeout=60
    )
    stored = {(r.partition, r.offset): r.value for r in got}
    for p in range(3):
        assert sorted(o for (q, o) in stored if q == p) == list(range(ends[p])), "gap in offsets"
    missing = [(p, o) for p, o, v in survivors if stored.get((p, o)) != v]
    assert not missing, f"{len(missing)} acknowledged records differ after the crash, e.g. {missing[:5]}"


def test_idempotent_producer_survives_restart(own_broker: BrokerProcess, topic_name: str) -> None:
    """kafka-python's default (idempotent) producer keeps its producer id across a broker restart:
    the broker restores producer state, so the next sequence numbers are accepted."""
    from kafka import KafkaProducer

    create_topic(own_broker.bootstrap, topic_name)
    producer = KafkaProducer(
        bootstrap_servers=own_broker.bootstrap, max_block_ms=30000, request_timeout_ms=15000
    )
    try:
        for i in range(5):
            producer.send(topic_name, f"before-{i}".encode(), partition=0).get(timeout=30)
        own_broker.restart()
        metas = [producer.send(topic_name, f"after-{i}".encode(), partition=0) for i in range(5)]
        producer.flush(60)
        assert [m.get(timeout=30).offset for m in metas] == [5, 6, 7, 8, 9]
    finally:
        producer.close(timeout=10)
    got = consume("confluent-kafka", own_broker.bootstrap, topic_name, 10)
    assert [r.value for r in got] == [f"before-{i}".encode() for i in range(5)] + [
        f"after-{i}".encode() for i in range(5)
    ]
