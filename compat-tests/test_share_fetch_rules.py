"""confluent-kafka `ShareConsumer` against a real broker: what a share fetch may hand out.

A read_committed share group (group config ``share.isolation.level``) never receives the records
of an aborted transaction, nor control records; a read_uncommitted one receives them.
``max.poll.records`` caps what a poll returns, ``fetch.max.bytes=1`` hands out one batch per fetch
and ``fetch.max.bytes=0`` none at all, and acknowledgements of a deleted topic's records are
answered UNKNOWN_TOPIC_OR_PARTITION per partition, not success."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from compat_broker import BrokerProcess
from confluent_kafka import KafkaError, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

CONFIG = {
    "share.auto.offset.reset": "earliest",
    # a member's partitions come one heartbeat after it joins (their share state is initialized
    # first, as in Kafka); a short interval keeps that wait, and each test, short
    "group.share.heartbeat.interval.ms": "1000",
    "group.share.min.heartbeat.interval.ms": "1000",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("share-rules")
    b = BrokerProcess(tmp / "data", tmp / "broker.log", config=CONFIG)
    b.start()
    yield b
    b.close()


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def set_isolation(bootstrap: str, group: str, level: str) -> None:
    entry = ConfigEntry("share.isolation.level", level, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def produce_txn(bootstrap: str, topic: str, values: range, *, commit: bool, txn_id: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for v in values:
        p.produce(topic, value=str(v).encode(), partition=0)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
    else:
        p.abort_transaction(30)


def produce_one_per_batch(bootstrap: str, topic: str, n: int) -> None:
    """Each record is its own log batch: flushed before the next is produced."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=0)
        assert p.flush(30) == 0


def drain(c: ShareConsumer, want: int, timeout_s: float = DEADLINE_S) -> list[list[int]]:
    """Poll (implicit acknowledgement) until `want` records came or `timeout_s` passed; the
    records of each non-empty poll."""
    polls: list[list[int]] = []
    end = time.monotonic() + timeout_s
    while sum(map(len, polls)) < want and time.monotonic() < end:
        got = [int(m.value()) for m in c.poll(0.5) if m.error() is None]
        if got:
            polls.append(got)
    return polls


def consumer(bootstrap: str, group: str, **extra: object) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})


@pytest.mark.parametrize("level", ["read_committed", "read_uncommitted"])
def test_aborted_transaction_is_invisible_to_read_committed_groups(
    broker: BrokerProcess, topic_name: str, level: str
) -> None:
    """librdkafka 0177: 100 records of an aborted transaction between two committed ones. A
    read_committed group receives the 20 committed records only; read_uncommitted all 120."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce_txn(bootstrap, topic_name, range(0, 10), commit=True, txn_id=f"{topic_name}-1")
    produce_txn(bootstrap, topic_name, range(100, 200), commit=False, txn_id=f"{topic_name}-2")
    produce_txn(bootstrap, topic_name, range(10, 20), commit=True, txn_id=f"{topic_name}-3")
    group = f"sg-{level}-{topic_name}"
    set_isolation(bootstrap, group, level)
    c = consumer(bootstrap, group)
    c.subscribe([topic_name])
    try:
        want = 20 if level == "read_committed" else 120
        got = sorted(v for poll in drain(c, want) for v in poll)
        got += [v for poll in drain(c, 1, timeout_s=2.0) for v in poll]  # nothing more comes
    finally:
        c.close()
    if level == "read_committed":
        assert got == list(range(20)), f"aborted records delivered: {[v for v in got if v >= 100][:5]}"
    else:
        assert sorted(got) == sorted([*range(20), *range(100, 200)])


def test_read_committed_group_stops_at_the_last_stable_offset(broker: BrokerProcess, topic_name: str) -> None:
    """Records of a transaction still open are not handed out; they come once it commits."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name)
    group = f"sg-lso-{topic_name}"
    set_isolation(bootstrap, group, "read_committed")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic_name}-open"})
    p.init_transactions(30)
    p.begin_transaction()
    for v in range(5):
        p.produce(topic_name, value=str(v).encode(), partition=0)
    p.flush(30)
    c = consumer(bootstrap, group)
    c.subscribe([topic_name])
    try:
        early = drain(c, 1, timeout_s=4.0)
        p.commit_transaction(30)
        late = sorted(v for poll in drain(c, 5) for v in poll)
    finally:
        c.close()
    assert early == [], "records of an open transaction were handed out"
    assert late == [0, 1, 2, 3, 4]


def test_max_poll_records_caps_each_poll(broker: BrokerProcess, topic_name: str) -> None:
    """librdkafka 0180: 10 single-record batches, max.poll.records=5: no poll returns more than 5,
    and all 10 come in two polls or more."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce_one_per_batch(bootstrap, topic_name, 10)
    c = consumer(bootstrap, f"sg-{topic_name}", **{"max.poll.records": 5})
    c.subscribe([topic_name])
    try:
        polls = drain(c, 10)
    finally:
        c.close()
    assert sorted(v for poll in polls for v in poll) == list(range(10))
    assert len(polls) >= 2 and max(map(len, polls)) <= 5, polls


def test_fetch_max_bytes_one_hands_out_one_batch_per_fetch(broker: BrokerProcess, topic_name: str) -> None:
    """librdkafka 0180: fetch.max.bytes is a soft limit; at 1 each fetch carries one batch."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce_one_per_batch(bootstrap, topic_name, 10)
    c = consumer(bootstrap, f"sg-{topic_name}", **{"fetch.max.bytes": 1})
    c.subscribe([topic_name])
    try:
        polls = drain(c, 10)
    finally:
        c.close()
    assert polls == [[i] for i in range(10)]


def test_fetch_max_bytes_zero_hands_out_nothing(broker: BrokerProcess, topic_name: str) -> None:
    """librdkafka 0180: a ShareFetch with MaxBytes=0 returns no records."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce_one_per_batch(bootstrap, topic_name, 10)
    # The consumer polls well past the heartbeat that brings its partition (1 s in), so it has
    # sent zero-byte ShareFetches before it closes. librdkafka's close never returns when a
    # heartbeat bringing a new assignment lands during the close itself: the partition it then
    # adds joins a share session already closed, and the close waits for it forever.
    c = consumer(bootstrap, f"sg-{topic_name}", **{"fetch.max.bytes": 0})
    c.subscribe([topic_name])
    try:
        polls = drain(c, 1, timeout_s=4.0)
    finally:
        c.close()
    assert polls == []
    # the records are still there for a consumer of the same group that asks for bytes
    c = consumer(bootstrap, f"sg-{topic_name}")
    c.subscribe([topic_name])
    try:
        assert sorted(v for poll in drain(c, 10) for v in poll) == list(range(10))
    finally:
        c.close()


def test_acknowledging_records_of_a_deleted_topic_fails_per_partition(
    broker: BrokerProcess, topic_name: str
) -> None:
    """librdkafka 0176/0181: records polled, then the topic is deleted: commit_sync reports
    UNKNOWN_TOPIC_OR_PARTITION for the partition, not success."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce_one_per_batch(bootstrap, topic_name, 3)
    c = consumer(bootstrap, f"sg-{topic_name}", **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([topic_name])
    try:
        msgs: list = []
        end = time.monotonic() + DEADLINE_S
        while not msgs and time.monotonic() < end:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
        assert msgs
        for m in msgs:
            c.acknowledge(m)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(30)
        time.sleep(1.0)  # the deletion reaches the broker's metadata image
        results = c.commit_sync(30)
    finally:
        c.close()
    errors = [e for tp, e in results.items() if tp.topic == topic_name]
    assert errors and all(isinstance(e, KafkaException) for e in errors), results
    codes = {e.args[0].code() for e in errors}
    assert codes <= {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID}, codes
