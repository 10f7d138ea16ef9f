"""confluent-kafka `Consumer` with ``group.protocol=consumer`` (KIP-848) against a real broker:
many subscription changes in a row, some undone at once by an unsubscribe (librdkafka 0045
subscribe_many_updates). After each burst the assignment settles on the last subscription.

The broker computes a new target at most once per ``group.consumer.assignment.interval.ms``, as
Kafka does, so a burst of changes is assigned together; answering each change at once asked the
consumer to revoke the partitions of a subscription it had already left, and librdkafka, leaving
the group in the middle of that revocation, never joined again."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from compat_broker import BrokerProcess
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

TOPICS, PARTITIONS, WINDOW = 50, 4, 5
WAIT_S = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    tmp = tmp_path_factory.mktemp("subscription-updates")
    b = BrokerProcess(tmp / "data", tmp / "broker.log")
    b.start()
    yield b
    b.close()


def test_many_subscription_updates_settle_on_the_last_one(broker: BrokerProcess, topic_name: str) -> None:
    bootstrap = broker.bootstrap
    topics = [f"{topic_name}-{i}" for i in range(TOPICS)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        f.result(60)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name, "group.protocol": "consumer"})
    stuck: list[tuple[int, int, int]] = []  # (step, partitions wanted, partitions assigned)
    try:
        for i in range(TOPICS):
            subscription = topics[i : i + WINDOW]
            c.subscribe(subscription)
            leave = i % 7 == 0
            if leave:
                c.unsubscribe()
            if i % 5 and i != TOPICS - 1:
                continue
            want = set() if leave else {(t, p) for t in subscription for p in range(PARTITIONS)}
            end = time.monotonic() + WAIT_S
            got: set = set()
            while time.monotonic() < end:
                c.poll(0.1)  # serves the rebalance callbacks
                got = {(tp.topic, tp.partition) for tp in c.assignment()}
                if got == want:
                    break
            if got != want:
                stuck.append((i, len(want), len(got)))
                break
    finally:
        c.close()
    assert stuck == [], f"assignment never matched the subscription at step {stuck}"
