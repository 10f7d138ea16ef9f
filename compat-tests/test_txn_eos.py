"""Exactly-once with real clients: consume-transform-produce with offsets committed in the
transaction, zombie fencing, the transaction timeout, and broker restarts mid-transaction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from compat_clients import create_topic, unique
from compat_txn import confluent_txn_producer, read_to_end, write_end
from confluent_kafka import Consumer, KafkaException, TopicPartition

N_IN = 60


def fill_input(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(N_IN):
        p.produce(topic, value=f"in-{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0


def eos_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 10000,
        }
    )
    c.subscribe([topic])
    return c


def transform_round(c: Consumer, p: object, out_topic: str, *, max_msgs: int, commit: bool) -> int:
    """Poll up to `max_msgs`, produce them transformed and send the offsets, in one transaction."""
    msgs = []
    deadline = time.monotonic() + 30
    while len(msgs) < max_msgs and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            if msgs:
                break
            continue
        if m.error():
            if m.error().fatal():
                raise KafkaException(m.error())
            continue
        msgs.append(m)
    if not msgs:
        return 0
    p.begin_transaction()  # type: ignore[attr-defined]
    for m in msgs:
        p.produce(out_topic, value=b"out:" + m.value(), partition=m.partition())  # type: ignore[attr-defined]
    positions = c.position(c.assignment())
    p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)  # type: ignore[attr-defined]
    if commit:
        p.commit_transaction(30)  # type: ignore[attr-defined]
    else:
        assert p.flush(30) == 0  # type: ignore[attr-defined]
        p.abort_transaction(30)  # type: ignore[attr-defined]
    return len(msgs)


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=20)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def test_consume_transform_produce_exactly_once(broker: BrokerProcess) -> None:
    src, dst, group = unique("eos-in"), unique("eos-out"), unique("eos-group")
    create_topic(broker.bootstrap, src, partitions=3)
    create_topic(broker.bootstrap, dst, partitions=3)
    fill_input(broker.bootstrap, src)
    txn_id = unique("eos")
    p = confluent_txn_producer(broker.bootstrap, txn_id)
    c = eos_consumer(broker.bootstrap, group, src)
    try:
        assert transform_round(c, p, dst, max_msgs=20, commit=True) > 0
        assert transform_round(c, p, dst, max_msgs=20, commit=False) > 0  # rolled back: redone below
    finally:
        c.close()
    # A new consumer in the group resumes from the offsets committed in the transactions.
    c = eos_consumer(broker.bootstrap, group, src)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if sum(committed_offsets(broker.bootstrap, group, src).values()) >= N_IN:
                break
            transform_round(c, p, dst, max_msgs=25, commit=True)
    finally:
        c.close()
    assert committed_offsets(broker.bootstrap, group, src) == {0: N_IN // 3, 1: N_IN // 3, 2: N_IN // 3}
    write_end(broker.bootstrap, dst, (0, 1, 2))
    out = read_to_end(broker.bootstrap, dst, (0, 1, 2), committed=True)
    for part in range(3):
        assert out[part] == [f"out:in-{i}".encode() for i in range(N_IN) if i % 3 == part]
    everything = read_to_end(broker.bootstrap, dst, (0, 1, 2), committed=False)
    assert sum(len(v) for v in everything.values()) > N_IN  # the aborted round is in the log


def test_new_instance_fences_the_zombie(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name)
    txn_id = unique("zombie")
    fatal: list[str] = []
    old = confluent_txn_producer(
        broker.bootstrap, txn_id, error_cb=lambda e: fatal.append(str(e)) if e.fatal() else None
    )
    old.begin_transaction()
    old.produce(topic_name, value=b"zombie", partition=0)
    assert old.flush(30) == 0
    new = confluent_txn_producer(broker.bootstrap, txn_id)  # aborts the zombie's transaction
    new.begin_transaction()
    new.produce(topic_name, value=b"fresh", partition=0)
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        old.commit_transaction(30)
    assert info.value.args[0].fatal() or fatal, "the zombie must be fenced for good"
    write_end(broker.bootstrap, topic_name, (0,))
    assert read_to_end(broker.bootstrap, topic_name, (0,), committed=True)[0] == [b"fresh"]
    assert read_to_end(broker.bootstrap, topic_name, (0,), committed=False)[0] == [b"zombie", b"fresh"]


@pytest.fixture
def fast_abort_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker checking for timed-out transactions every 200 ms."""
    b = BrokerProcess(
        tmp_path / "data",
        tmp_path / "broker.log",
        config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"},
    )
    b.start()
    yield b
    b.close()


def test_transaction_timeout_aborts(fast_abort_broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = fast_abort_broker.bootstrap
    create_topic(bootstrap, topic_name)
    txn_id = unique("slow")
    p = confluent_txn_producer(
        bootstrap, txn_id, **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000}
    )
    p.begin_transaction()
    p.produce(topic_name, value=b"never", partition=0)
    assert p.flush(30) == 0
    # The coordinator aborts the transaction on its own: the last stable offset moves past it and
    # a read_committed reader gets to the end sentinel without seeing the record.
    write_end(bootstrap, topic_name, (0,))
    assert read_to_end(bootstrap, topic_name, (0,), committed=True, timeout=60)[0] == []
    with pytest.raises(KafkaException):
        p.commit_transaction(30)
    assert read_to_end(bootstrap, topic_name, (0,), committed=False)[0] == [b"never"]
    # A new instance with the same transactional id carries on.
    q = confluent_txn_producer(bootstrap, txn_id)
    q.begin_transaction()
    q.produce(topic_name, value=b"ok", partition=0)
    q.commit_transaction(30)
    write_end(bootstrap, topic_name, (0,))
    assert read_to_end(bootstrap, topic_name, (0,), committed=True, ends=2)[0] == [b"ok"]


def test_restart_in_the_middle_of_a_transaction(own_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(own_broker.bootstrap, topic_name, partitions=2)
    p = confluent_txn_producer(own_broker.bootstrap, unique("restart"))
    p.begin_transaction()
    for i in range(10):
        p.produce(topic_name, value=f"before-{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    own_broker.restart()  # SIGTERM; same port and data directory
    for i in range(10):
        p.produce(topic_name, value=f"after-{i}".encode(), partition=i % 2)
    p.commit_transaction(60)
    write_end(own_broker.bootstrap, topic_name, (0, 1))
    got = read_to_end(own_broker.bootstrap, topic_name, (0, 1), committed=True)
    for part in (0, 1):
        want = [f"{tag}-{i}".encode() for tag in ("before", "after") for i in range(10) if i % 2 == part]
        assert got[part] == want


def test_crash_mid_transaction_then_new_instance_aborts_it(
    own_broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(own_broker.bootstrap, topic_name)
    txn_id = unique("crash")
    p = confluent_txn_producer(own_broker.bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic_name, value=b"lost", partition=0)
    assert p.flush(30) == 0
    own_broker.restart(hard=True)  # kill -9 with the transaction open
    q = confluent_txn_producer(own_broker.bootstrap, txn_id)
    q.begin_transaction()
    q.produce(topic_name, value=b"kept", partition=0)
    q.commit_transaction(30)
    write_end(own_broker.bootstrap, topic_name, (0,))
    assert read_to_end(own_broker.bootstrap, topic_name, (0,), committed=True)[0] == [b"kept"]
    assert read_to_end(own_broker.bootstrap, topic_name, (0,), committed=False)[0] == [b"lost", b"kept"]
