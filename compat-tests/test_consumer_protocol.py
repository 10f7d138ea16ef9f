"""confluent-kafka (librdkafka 2.16) with `group.protocol=consumer` (KIP-848) against a real broker:
members split a topic, partitions move without duplicates or gaps, static members come back,
commits survive a restart, and a member that stops heartbeating is removed after its session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from compat_broker import BrokerProcess
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ck = pytest.importorskip("confluent_kafka")

DEADLINE_S = 60.0


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=str(i).encode(), partition=i % partitions)
    assert p.flush(30) == 0


def consumer(bootstrap: str, group: str, **extra: str) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    conf.update(extra)
    return Consumer(conf)


def drain(
    consumers: list[Consumer],
    want: int,
    seen: Counter,
    by_consumer: list[set[int]],
    *,
    commit: bool = True,
    deadline_s: float = DEADLINE_S,
) -> None:
    """Poll every consumer in turn until `want` distinct values were seen (bounded in time)."""
    end = time.monotonic() + deadline_s
    while len(seen) < want and time.monotonic() < end:
        for i, c in enumerate(consumers):
            msg = c.poll(0.05)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            if msg.error() is None:
                v = int(msg.value())
                seen[v] += 1
                by_consumer[i].add(msg.partition())
                if commit:
                    c.commit(msg, asynchronous=False)


def test_two_consumers_split_four_partitions_first_record_fast(bootstrap: str, topic_name: str) -> None:
    """Acceptance: two consumers split a 4-partition topic, read every record once, and the first
    record arrives within 2 s."""
    create_topic(bootstrap, topic_name, 4)
    produce(bootstrap, topic_name, 2000, 4)
    group = f"g-{topic_name}"
    a, b = consumer(bootstrap, group), consumer(bootstrap, group)
    try:
        started = time.monotonic()
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        first = None
        seen: Counter = Counter()
        parts: list[set[int]] = [set(), set()]
        end = time.monotonic() + DEADLINE_S
        while first is None and time.monotonic() < end:
            for c in (a, b):
                msg = c.poll(0.05)
                if msg is not None and msg.error() is None:
                    first = time.monotonic() - started
                    seen[int(msg.value())] += 1
                    c.commit(msg, asynchronous=False)
                    parts[(a, b).index(c)].add(msg.partition())
                    break
        assert first is not None and first < 2.0, f"first record after {first}s"
        drain([a, b], 2000, seen, parts)
        assert len(seen) == 2000 and max(seen.values()) == 1, "every record exactly once"
        # the member that joined first may hold every partition for a moment and read some of
        # them before the second member's share moves over (exactly once, as checked above);
        # once settled, the two hold disjoint halves
        def settled() -> list[set[int]] | None:
            now = [{tp.partition for tp in c.assignment()} for c in (a, b)]
            return now if now[0] and now[1] and not now[0] & now[1] else None

        final = settled()
        settle_end = time.monotonic() + 10.0
        while final is None and time.monotonic() < settle_end:
            for c in (a, b):
                msg = c.poll(0.1)
                assert msg is None or msg.error() is not None, "a record after all 2000 were read"
            final = settled()
        assert final is not None, ([c.assignment() for c in (a, b)], parts)
        assert final[0] | final[1] == {0, 1, 2, 3}, final
    finally:
        a.close()
        b.close()


def test_member_joins_mid_stream_without_duplicates(bootstrap: str, topic_name: str) -> None:
    """A second member joins while the first consumes and commits each record: partitions are
    revoked from the first before the second gets them, so nothing is read twice or skipped."""
    create_topic(bootstrap, topic_name, 4)
    produce(bootstrap, topic_name, 2000, 4)
    group = f"g-{topic_name}"
    a, b = consumer(bootstrap, group), consumer(bootstrap, group)
    seen: Counter = Counter()
    parts: list[set[int]] = [set(), set()]
    try:
        a.subscribe([topic_name])
        drain([a], 300, seen, parts)
        b.subscribe([topic_name])
        drain([a, b], 2000, seen, parts)
        assert len(seen) == 2000 and max(seen.values()) == 1, [v for v, n in seen.items() if n > 1][:10]
        assert parts[1], "the second member got partitions"
    finally:
        a.close()
        b.close()


def test_member_leaves_and_partitions_move_without_gaps(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, 4)
    produce(bootstrap, topic_name, 400, 4)
    group = f"g-{topic_name}"
    a, b = consumer(bootstrap, group), consumer(bootstrap, group)
    seen: Counter = Counter()
    parts: list[set[int]] = [set(), set()]
    try:
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        drain([a, b], 400, seen, parts)
        assert len(seen) == 400
        b.close()  # leaves: its partitions go to a
        produce(bootstrap, topic_name, 400, 4)
        more: Counter = Counter()
        for k in range(400):
            more[k] = 0
        seen_after: Counter = Counter()
        drain([a], 400, seen_after, [set()])
        assert sorted(seen_after) == list(range(400)) and max(seen_after.values()) == 1
        assert a.assignment() and len(a.assignment()) == 4
    finally:
        a.close()


def test_static_member_returns_to_its_partitions(bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, 2)
    group = f"g-{topic_name}"
    a = consumer(bootstrap, group, **{"group.instance.id": "static-a"})
    b = consumer(bootstrap, group, **{"group.instance.id": "static-b"})
    try:
        a.subscribe([topic_name])
        b.subscribe([topic_name])
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and not (len(a.assignment()) == 1 and len(b.assignment()) == 1):
            a.poll(0.05)
            b.poll(0.05)
        before = {tp.partition for tp in a.assignment()}
        assert len(before) == 1
        a.close()
        a = consumer(bootstrap, group, **{"group.instance.id": "static-a"})
        a.subscribe([topic_name])
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and not a.assignment():
            a.poll(0.05)
            b.poll(0.05)
        assert {tp.partition for tp in a.assignment()} == before
    finally:
        a.close()
        b.close()


def test_commits_survive_restart(own_broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = own_broker.bootstrap
    create_topic(bootstrap, topic_name, 2)
    produce(bootstrap, topic_name, 100, 2)
    group = f"g-{topic_name}"
    c = consumer(bootstrap, group)
    seen: Counter = Counter()
    try:
        c.subscribe([topic_name])
        drain([c], 60, seen, [set()])
        assert len(seen) >= 60
    finally:
        c.close()
    committed_before = len(seen)
    own_broker.restart()
    bootstrap = own_broker.bootstrap
    c = consumer(bootstrap, group)
    rest: Counter = Counter()
    try:
        c.subscribe([topic_name])
        drain([c], 100 - committed_before, rest, [set()])
        assert not set(rest) & set(seen), "records committed before the restart came again"
        assert set(rest) | set(seen) == set(range(100))
        got = c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)], timeout=10)
        assert sum(tp.offset for tp in got) == 100
    finally:
        c.close()


MEMBER_SCRIPT = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
end = time.monotonic() + 60
while not c.assignment() and time.monotonic() < end:
    c.poll(0.05)
print("assigned", len(c.assignment()), flush=True)
while True:
    c.poll(0.1)
"""


def test_member_that_stops_heartbeating_is_removed(tmp_path: Path, topic_name: str) -> None:
    """A member process frozen with SIGSTOP sends no more heartbeats: after the session timeout the
    coordinator removes it and the other member gets all partitions."""
    config = {"group.consumer.session.timeout.ms": "3000", "group.consumer.heartbeat.interval.ms": "500"}
    b = BrokerProcess(tmp_path / "data", tmp_path / "broker.log", config=config)
    b.start()
    member = None
    try:
        create_topic(b.bootstrap, topic_name, 2)
        group = f"g-{topic_name}"
        member = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, b.bootstrap, group, topic_name],
                                  stdout=subprocess.PIPE, text=True)
        assert member.stdout is not None
        assert member.stdout.readline().startswith("assigned 2")
        c = consumer(b.bootstrap, group)
        c.subscribe([topic_name])
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and len(c.assignment()) != 1:
            c.poll(0.05)
        assert len(c.assignment()) == 1, "the two members split the topic"
        os.kill(member.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        members = None
        end = time.monotonic() + 30
        while time.monotonic() < end:
            c.poll(0.1)
            members = admin.describe_consumer_groups([group])[group].result(10).members
            if len(members) == 1 and len(c.assignment()) == 2:
                break
        assert members is not None and len(members) == 1 and len(c.assignment()) == 2
        assert time.monotonic() - frozen_at >= 2.5, "removed before its session timed out"
        c.close()
    finally:
        if member is not None:
            member.kill()
            member.wait(10)
        b.close()


def test_empty_classic_group_becomes_a_consumer_group(bootstrap: str, topic_name: str) -> None:
    """Offsets committed by a classic group whose members left are where a KIP-848 member of the
    same group id starts (the group converts)."""
    create_topic(bootstrap, topic_name, 1)
    produce(bootstrap, topic_name, 10, 1)
    group = f"g-{topic_name}"
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic",
                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    seen: Counter = Counter()
    try:
        classic.subscribe([topic_name])
        drain([classic], 4, seen, [set()])
    finally:
        classic.close()
    c = consumer(bootstrap, group)
    rest: Counter = Counter()
    try:
        c.subscribe([topic_name])
        drain([c], 10 - len(seen), rest, [set()])
        assert sorted(rest) == list(range(len(seen), 10))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        listed = admin.list_consumer_groups().result(10).valid
        kinds = {g.group_id: g.type for g in listed}
        assert str(kinds[group]).endswith("CONSUMER")
    finally:
        c.close()
