"""confluent-kafka `ShareConsumer` (KIP-932) against a real broker: queue semantics on one partition.

No record is delivered to two members at once, RELEASE and lock expiry deliver again, REJECT and
the delivery-count limit archive, implicit acknowledgement accepts, and a broker restart keeps
accepted records accepted."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

LOCK_MS = 3000
CONFIG = {
    "share.auto.offset.reset": "earliest",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": "3",
    "group.share.partition.max.record.locks": "200",
    "group.share.heartbeat.interval.ms": "1000",
}
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("share")
    b = BrokerProcess(tmp / "data", tmp / "broker.log", config=CONFIG)
    b.start()
    yield b
    b.close()


def setup_topic(bootstrap: str, topic: str, n: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0


def share_consumer(bootstrap: str, group: str, mode: str = "explicit") -> ShareConsumer:
    return ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": mode}
    )


def values(batch: list) -> list[int]:
    return [int(m.value()) for m in batch if m.error() is None]


def test_two_explicit_members_share_one_partition_and_release_redelivers(
    share_broker: BrokerProcess, topic_name: str
) -> None:
    """Acceptance: two explicit-mode ShareConsumers on a 1-partition topic of 5,000 records both
    receive records, no record is delivered to both, and a released record is delivered again."""
    bootstrap = share_broker.bootstrap
    setup_topic(bootstrap, topic_name, 5000)
    group = f"sg-{topic_name}"
    consumers = [share_consumer(bootstrap, group), share_consumer(bootstrap, group)]
    accepted: list[Counter] = [Counter(), Counter()]
    released: int | None = None
    redelivered = False
    try:
        for c in consumers:
            c.subscribe([topic_name])
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and (sum(len(a) for a in accepted) < 5000 or not redelivered):
            for i, c in enumerate(consumers):
                batch = c.poll(0.2)
                for m in batch:
                    if m.error() is not None:
                        continue
                    v = int(m.value())
                    if released is None:
                        released = v
                        c.acknowledge(m, AcknowledgeType.RELEASE)
                        continue
                    if v == released:
                        redelivered = True
                    # held by the other member right now? then it was delivered to both
                    assert v not in accepted[1 - i], f"record {v} accepted by both members"
                    accepted[i][v] += 1
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if batch:
                    c.commit_sync()
        total = accepted[0] + accepted[1]
        assert len(total) == 5000 and max(total.values()) == 1
        assert accepted[0] and accepted[1], "both members received records"
        assert redelivered, f"released record {released} was not delivered again"
    finally:
        for c in consumers:
            c.close()


def test_lock_expiry_redelivers_and_delivery_limit_archives(
    share_broker: BrokerProcess, topic_name: str
) -> None:
    """Members that take the record and never acknowledge it: each lock expires and the next
    member gets it, until the delivery-count limit (3) archives it."""
    bootstrap = share_broker.bootstrap
    setup_topic(bootstrap, topic_name, 1)
    group = f"sg-{topic_name}"
    holders: list[ShareConsumer] = []
    try:
        for _ in range(3):
            c = share_consumer(bootstrap, group)
            c.subscribe([topic_name])
            holders.append(c)  # stays in the group, never acknowledges, never polls again
            got: list[int] = []
            started = time.monotonic()
            end = started + LOCK_MS / 1000 + 20
            while not got and time.monotonic() < end:
                got = values(c.poll(0.2))
            assert got == [0], f"delivery {len(holders)}: {got}"
            if len(holders) > 1:
                assert time.monotonic() - started >= LOCK_MS / 1000 * 0.5, (
                    "redelivered before the lock expired"
                )
        late = share_consumer(bootstrap, group)
        holders.append(late)
        late.subscribe([topic_name])
        extra: list[int] = []
        end = time.monotonic() + LOCK_MS / 1000 + 3
        while time.monotonic() < end:
            extra += values(late.poll(0.2))
        assert extra == [], "a record past the delivery-count limit was delivered"
    finally:
        for c in holders:
            c.close()


def test_reject_archives_and_implicit_mode_accepts(share_broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = share_broker.bootstrap
    setup_topic(bootstrap, topic_name, 20)
    group = f"sg-{topic_name}"
    c = share_consumer(bootstrap, group)
    c.subscribe([topic_name])
    seen: list[int] = []
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end and len(seen) < 20:
        batch = c.poll(0.5)
        for m in batch:
            if m.error() is None:
                seen.append(int(m.value()))
                c.acknowledge(m, AcknowledgeType.REJECT if int(m.value()) < 10 else AcknowledgeType.ACCEPT)
        if batch:
            c.commit_sync()
    c.close()
    assert sorted(seen) == list(range(20))
    # implicit mode in the same group: nothing left (rejected ones are archived, accepted done)
    produce_more = Producer({"bootstrap.servers": bootstrap})
    for i in range(20, 25):
        produce_more.produce(topic_name, value=str(i).encode(), partition=0)
    produce_more.flush(30)
    c = share_consumer(bootstrap, group, mode="implicit")
    c.subscribe([topic_name])
    got: list[int] = []
    end = time.monotonic() + 15
    while time.monotonic() < end and len(got) < 5:
        got += values(c.poll(0.5))
    c.commit_sync()  # implicit mode: accepts everything the last poll returned
    c.close()
    assert sorted(got) == [20, 21, 22, 23, 24]
    c = share_consumer(bootstrap, group, mode="implicit")
    c.subscribe([topic_name])
    again: list[int] = []
    end = time.monotonic() + LOCK_MS / 1000 + 2
    while time.monotonic() < end:
        again += values(c.poll(0.5))
    c.close()
    assert again == [], "implicitly accepted records came again"


def test_restart_keeps_accepted_records_accepted(tmp_path: Path, topic_name: str) -> None:
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config=CONFIG)
    b.start()
    try:
        setup_topic(b.bootstrap, topic_name, 100)
        group = f"sg-{topic_name}"
        c = share_consumer(b.bootstrap, group)
        c.subscribe([topic_name])
        accepted: set[int] = set()
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and len(accepted) < 50:
            batch = c.poll(0.5)
            for m in batch:
                if m.error() is None:
                    v = int(m.value())
                    if v < 50:
                        accepted.add(v)
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    else:
                        c.acknowledge(m, AcknowledgeType.RELEASE)
            if batch:
                c.commit_sync()
        c.close()
        assert accepted == set(range(50))
        b.restart()
        c = share_consumer(b.bootstrap, group)
        c.subscribe([topic_name])
        after: list[int] = []
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and len(after) < 50:
            batch = c.poll(0.5)
            for m in batch:
                if m.error() is None:
                    after.append(int(m.value()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if batch:
                c.commit_sync()
        c.close()
        assert not set(after) & accepted, "records accepted before the restart were delivered again"
        assert sorted(after) == list(range(50, 100))
    finally:
        b.close()


def test_two_members_beside_idle_partitions(share_broker: BrokerProcess, topic_name: str) -> None:
    """The idle partitions of the topic get an empty record set in every ShareFetch answer (never
    a null one, which librdkafka rejects as a corrupt response, dropping the records acquired in
    it until their locks expire): each record is accepted once on its first delivery, and a
    released record comes back. (The two members split the four partitions, as Kafka's simple
    assignor does, so the busy partition belongs to one of them once both have joined.)"""
    bootstrap = share_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, 4, 1)])[topic_name].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    n = 2000
    for i in range(n):
        p.produce(topic_name, value=str(i).encode(), partition=0)
    assert p.flush(30) == 0
    group = f"sg-{topic_name}"
    consumers = [share_consumer(bootstrap, group), share_consumer(bootstrap, group)]
    accepted: list[Counter] = [Counter(), Counter()]
    errors: list[str] = []
    late: list[tuple[int, int]] = []  # (record, delivery count) delivered before but never seen
    released: int | None = None
    redelivered = False
    try:
        for c in consumers:
            c.subscribe([topic_name])
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and (sum(len(a) for a in accepted) < n or not redelivered):
            for i, c in enumerate(consumers):
                batch = c.poll(0.2)
                for m in batch:
                    if m.error() is not None:
                        errors.append(str(m.error()))
                        continue
                    v = int(m.value())
                    if released is None:
                        released = v
                        c.acknowledge(m, AcknowledgeType.RELEASE)
                        continue
                    if v == released:
                        redelivered = True
                    else:
                        late.extend([] if m.delivery_count() == 1 else [(v, m.delivery_count())])
                    accepted[i][v] += 1
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if batch:
                    c.commit_sync()
        total = accepted[0] + accepted[1]
        assert errors == [], errors[:5]
        assert late == [], f"records first delivered in answers the client dropped: {late[:5]}"
        assert sorted(total) == list(range(n)), f"{n - len(total)} records never delivered"
        assert max(total.values()) == 1, "a record was accepted twice"
        assert redelivered, f"released record {released} was not delivered again"
    finally:
        for c in consumers:
            c.close()
