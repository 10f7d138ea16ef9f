"""Thousands of partitions created on one broker, as provisioning scripts create them (CreateTopics
of 50 topics of 10 partitions each): every request succeeds and the broker is never fenced.

The broker's session is made tight (1.5 s, heartbeats every 0.3 s) so that a node whose own
heartbeats wait behind partition creation would be fenced at this scale already, and every later
CreateTopics would fail with INVALID_REPLICATION_FACTOR (no broker registered)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from pylog import LocalBroker

BATCHES = 6
TOPICS_PER_BATCH = 50
PARTITIONS_PER_TOPIC = 10


@pytest.fixture
def tight_broker() -> Iterator[LocalBroker]:
    config = {
        "broker.session.timeout.ms": 1500,
        "broker.heartbeat.interval.ms": 300,
        "schema.registry.listeners": "",
    }
    with LocalBroker(config=config) as broker:
        yield broker


def test_thousands_of_partitions_in_50_topic_batches_never_fence_it(tight_broker: LocalBroker) -> None:
    admin = AdminClient({"bootstrap.servers": tight_broker.bootstrap_servers})
    names = []
    for batch in range(BATCHES):
        topics = [NewTopic(f"scale-{batch}-{i}", PARTITIONS_PER_TOPIC, 1) for i in range(TOPICS_PER_BATCH)]
        futures = admin.create_topics(topics, request_timeout=120, operation_timeout=120)
        errors = {}
        for name, f in futures.items():
            try:
                f.result()
            except Exception as exc:
                errors[name] = str(exc)
        assert errors == {}, f"batch {batch}: {len(errors)} topics failed, e.g. {next(iter(errors.values()))}"
        log = tight_broker.log_path.read_text("utf-8", "replace")
        assert "fenced brokers" not in log, f"the broker was fenced during batch {batch}"
        names += [t.topic for t in topics]

    metadata = admin.list_topics(timeout=60)
    assert list(metadata.brokers) == [1]
    partitions = [p for name in names for p in metadata.topics[name].partitions.values()]
    assert len(partitions) == BATCHES * TOPICS_PER_BATCH * PARTITIONS_PER_TOPIC
    assert {p.leader for p in partitions} == {1}
    log = tight_broker.log_path.read_text("utf-8", "replace")
    assert "fenced brokers" not in log and "is fenced" not in log
