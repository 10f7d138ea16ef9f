"""Driving a real broker from the widget tests with an unmodified Kafka client (kafka-python)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, counts: Sequence[int], *, start: int = 0) -> None:
    """counts[p] JSON records {"i": n} to partition p, keys "k<n>"."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    n = start
    try:
        for partition, count in enumerate(counts):
            for _ in range(count):
                producer.send(topic, json.dumps({"i": n}).encode(), key=f"k{n}".encode(), partition=partition)
                n += 1
        producer.flush()
    finally:
        producer.close()


def to_commit(offsets: Mapping[tuple[str, int], int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """{(topic, partition): offset} in the form kafka-python's `commit` takes."""
    return {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}


def commit(bootstrap: str, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group` as a client outside the group's membership (generation -1)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.commit(to_commit(offsets))
    finally:
        consumer.close()


def member(bootstrap: str, group: str, topic: str, client_id: str) -> KafkaConsumer:
    """A consumer that has joined `group` and owns partitions of `topic` (it consumes nothing)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                             enable_auto_commit=False, auto_offset_reset="latest")
    deadline = time.monotonic() + 60
    while not consumer.assignment():
        consumer.poll(timeout_ms=500)
        if time.monotonic() > deadline:
            consumer.close()
            raise AssertionError(f"{client_id} got no partitions of {topic} in group {group}")
    return consumer
