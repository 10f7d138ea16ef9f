"""Fetch sessions (KIP-227) with real consumers.

kafka-python asks for a session with its first Fetch and then fetches incrementally, naming only
the partitions whose position moved; the broker answers only partitions with something new. It
must keep reading every record, in order, across many partitions when new records arrive in only
some of them. librdkafka (confluent-kafka, kcat) sends sessionless fetches and must read as before.
"""

from __future__ import annotations

import re
import time
from typing import Any

from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce

PARTITIONS = 24


def _records(rounds: range, partitions: list[int]) -> list[Rec]:
    return [
        Rec(f"r{r}-p{p}".encode(), f"k{p}".encode(), partition=p) for r in rounds for p in partitions
    ]


def _poll_until(consumer: Any, count: int, timeout: float = 30.0) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count and time.monotonic() < deadline:
        for msgs in consumer.poll(timeout_ms=200).values():
            out += [(m.partition, m.offset, m.value) for m in msgs]
    return out


def _sessions(consumer: Any) -> list[tuple[int, int]]:
    """kafka-python's fetch sessions, by broker: (session id, next epoch)."""
    handlers = consumer._fetcher._session_handlers  # the client's own session state
    return [(h.next_metadata.session_id, h.next_metadata.epoch) for h in handlers.values()]


def test_kafka_python_consumes_through_a_session(broker: BrokerProcess, topic_name: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    everywhere = list(range(PARTITIONS))
    produce("kafka-python", broker.bootstrap, topic_name, _records(range(2), everywhere))
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=20000,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([TopicPartition(topic_name, p) for p in everywhere])
        consumer.seek_to_beginning()
        got = _poll_until(consumer, 2 * PARTITIONS)
        assert sorted(got) == sorted(
            (p, r, f"r{r}-p{p}".encode()) for r in range(2) for p in everywhere
        )
        sessions = _sessions(consumer)
        assert sessions and all(sid != 0 for sid, _ in sessions), sessions
        # new records in a few partitions at a time: each arrives once, in order
        expected: list[tuple[int, int, bytes]] = []
        next_offset = dict.fromkeys(everywhere, 2)
        for step in range(6):
            some = [p for p in everywhere if p % 6 == step][:3]
            recs = _records(range(step, step + 2), some)
            produce("kafka-python", broker.bootstrap, topic_name, recs)
            for rec in recs:
                assert rec.partition is not None
                expected.append((rec.partition, next_offset[rec.partition], rec.value or b""))
                next_offset[rec.partition] += 1
        got = _poll_until(consumer, len(expected))
        assert sorted(got) == sorted(expected)
        assert _poll_until(consumer, 1, timeout=1.0) == []  # nothing twice
        later = _sessions(consumer)
        # the same sessions, many epochs on: the fetches were incremental
        assert {sid for sid, _ in later} == {sid for sid, _ in sessions}, (sessions, later)
        assert all(epoch > 2 for _, epoch in later), later
    finally:
        consumer.close()


def test_librdkafka_consumers_read_sessionless(broker: BrokerProcess, topic_name: str, kcat: str) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    recs = _records(range(3), list(range(PARTITIONS)))
    produce("confluent-kafka", broker.bootstrap, topic_name, recs)
    want = sorted((r.partition or 0, r.value) for r in recs)
    got = consume("confluent-kafka", broker.bootstrap, topic_name, len(recs), partitions=range(PARTITIONS))
    assert sorted((g.partition or 0, g.value) for g in got) == want
    few = [0, 7, 23]
    got = consume("kcat", broker.bootstrap, topic_name, 3 * len(few), partitions=few)
    assert sorted((g.partition or 0, g.value) for g in got) == [w for w in want if w[0] in few]
    # kafka-python, through a session, reads the same
    got = consume("kafka-python", broker.bootstrap, topic_name, len(recs), partitions=range(PARTITIONS))
    assert sorted((g.partition or 0, g.value) for g in got) == want


def test_followers_replicate_through_fetch_sessions(cluster_factory: Any) -> None:
    """Three nodes, every partition on all three: followers open one session per leader and keep
    fetching incrementally; acks=all produces (which wait for the followers' fetch offsets) are
    acknowledged, every replica stays in sync, and a consumer reads everything."""
    from cluster_support import wait_for
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = cluster_factory(3)
    bootstrap = cluster.bootstrap_servers
    topic, partitions = "sessions", 6
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 3, config={"min.insync.replicas": "3"})
    admin.create_topics([new], request_timeout=30)[topic].result(30)
    recs: list[Rec] = []
    for step in range(4):  # new records in a few partitions at a time
        batch = _records(range(step * 3, step * 3 + 3), [step % partitions, (step + 3) % partitions])
        produce("confluent-kafka", bootstrap, topic, batch, acks="all")
        recs += batch

    def all_in_sync() -> bool:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
        return all(len(p.isrs) == 3 for p in md.topics[topic].partitions.values())

    wait_for(all_in_sync, 30, "every replica in sync")
    got = consume("kafka-python", bootstrap, topic, len(recs), partitions=range(partitions))
    want = sorted((r.partition or 0, r.value) for r in recs)
    assert sorted((g.partition or 0, g.value) for g in got) == want
    # one session per (leader, follower), never reopened: no fetch fell back to a full one
    opened: dict[int, list[int]] = {}
    for node in cluster.nodes.values():
        for line in node.log_tail(2000).splitlines():
            found = re.search(r"replica (\d+) opened fetch session", line)
            if found:
                opened.setdefault(node.node_id, []).append(int(found.group(1)))
    assert opened, "no follower opened a fetch session"
    for leader, followers in opened.items():
        assert len(followers) == len(set(followers)) and leader not in followers, opened
