"""confluent-kafka `ShareConsumer` against a real broker: how a share group splits partitions, and
a lock that runs out under the member that holds it.

Share groups assign as Kafka's simple assignor does: two members of a group on a 4-partition topic
get two partitions each, so both receive records even when one of them polls first and takes as
many as it may (librdkafka 0172, a group mixing implicit and explicit acknowledgement). A record
whose acquisition lock expires comes back to the same consumer with delivery count 2, and the
late implicit acknowledgement of it is refused with INVALID_RECORD_STATE (librdkafka 0173, with
the broker's ``group.share.min.record.lock.duration.ms`` lowered as librdkafka's CI does)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from compat_broker import BrokerProcess
from confluent_kafka import AcknowledgeType, KafkaError, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

CONFIG = {"share.auto.offset.reset": "earliest", "group.share.min.record.lock.duration.ms": "1000"}
LOCK_MS = 3000
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("share-assign")
    b = BrokerProcess(tmp / "data", tmp / "broker.log", config=CONFIG)
    b.start()
    yield b
    b.close()


def test_implicit_and_explicit_members_split_a_four_partition_topic(
    broker: BrokerProcess, topic_name: str
) -> None:
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(30)
    n = 400
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic_name, value=str(i).encode(), partition=i % 4)
    assert p.flush(30) == 0
    group = f"sg-{topic_name}"
    implicit = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    explicit = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    got: list[Counter] = [Counter(), Counter()]
    try:
        implicit.subscribe([topic_name])
        explicit.subscribe([topic_name])
        end = time.monotonic() + DEADLINE_S
        while sum(map(len, got)) < n and time.monotonic() < end:
            for m in implicit.poll(1.0):
                if m.error() is None:
                    got[0][int(m.value())] += 1
            batch = [m for m in explicit.poll(1.0) if m.error() is None]
            for m in batch:
                got[1][int(m.value())] += 1
                explicit.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                results = explicit.commit_sync(30)
                assert all(e is None for e in results.values()), results
        implicit.poll(1.0)  # the last implicit acknowledgements
    finally:
        implicit.close()
        explicit.close()
    total = got[0] + got[1]
    assert sorted(total) == list(range(n)) and max(total.values()) == 1
    assert got[0] and got[1], f"implicit {len(got[0])}, explicit {len(got[1])}: one member got nothing"


def test_an_expired_lock_redelivers_to_the_same_consumer(broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    group = f"sg-{topic_name}"
    entry = ConfigEntry(
        "share.record.lock.duration.ms", str(LOCK_MS), incremental_operation=AlterConfigOpType.SET
    )
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic_name, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    results: list[object] = []
    c.set_acknowledgement_commit_callback(lambda offsets, error: results.append(error))
    c.subscribe([topic_name])
    try:
        first: list[tuple[int, int]] = []
        end = time.monotonic() + DEADLINE_S
        while not first and time.monotonic() < end:
            first = [(m.offset(), m.delivery_count()) for m in c.poll(1.0) if m.error() is None]
        time.sleep(LOCK_MS / 1000 + 1)  # the locks run out; nothing acknowledged them
        again: list[tuple[int, int]] = []
        end = time.monotonic() + DEADLINE_S
        while not again and time.monotonic() < end:
            again = [(m.offset(), m.delivery_count()) for m in c.poll(1.0) if m.error() is None]
        c.poll(1.0)  # serves the acknowledgement callbacks
    finally:
        c.close()
    assert first and all(count == 1 for _, count in first), first
    assert again and all(count == 2 for _, count in again), again
    assert {o for o, _ in again} <= {o for o, _ in first}
    codes = [e.args[0].code() for e in results if e is not None]  # type: ignore[attr-defined]
    assert KafkaError.INVALID_RECORD_STATE in codes, results
