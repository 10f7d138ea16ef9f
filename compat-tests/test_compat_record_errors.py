"""Per-record produce errors (KIP-467) as real producers report them.

A batch with records that break a per-record rule (a keyless record on a compacted topic, a
timestamp outside message.timestamp.before.max.ms / after.max.ms) is refused whole; the answer
names the offending records, so the producer fails exactly those with the broker's error and the
others with "an invalid record in the same batch", which may be sent again.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce

INVALID_RECORD = 87
INVALID_TIMESTAMP = 32
BATCH = 100
# One batch per produce call: everything waits for the linger, and a batch holds all 100 records.
ONE_BATCH = {"linger.ms": 1000, "batch.num.messages": 10_000, "enable.idempotence": False}


def _send_confluent(bootstrap: str, topic: str, recs: list[Rec]) -> list[Any]:
    """Produce ``recs`` in one batch; per record, None (delivered) or the delivery report's error."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 30000, **ONE_BATCH})
    results: dict[int, Any] = {}

    def report(i: int):
        def cb(err: Any, _msg: Any) -> None:
            results[i] = err

        return cb

    for i, r in enumerate(recs):
        kw: dict[str, Any] = {"key": r.key, "value": r.value, "partition": 0, "on_delivery": report(i)}
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        producer.produce(topic, **kw)
    assert producer.flush(40) == 0, "delivery reports missing"
    assert sorted(results) == list(range(len(recs)))
    return [results[i] for i in range(len(recs))]


def test_confluent_keyless_records_on_a_compacted_topic(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import KafkaError

    create_topic(broker.bootstrap, topic_name, configs={"cleanup.policy": "compact"})
    keyless = set(range(3, BATCH, 10))
    recs = [Rec(b"v%d" % i, None if i in keyless else b"k%d" % i) for i in range(BATCH)]
    results = _send_confluent(broker.bootstrap, topic_name, recs)
    codes = [e.code() if e is not None else None for e in results]
    assert {i for i, c in enumerate(codes) if c == KafkaError.INVALID_RECORD} == keyless
    assert {i for i, c in enumerate(codes) if c == KafkaError._INVALID_DIFFERENT_RECORD} == (
        set(range(BATCH)) - keyless
    )
    # The others were refused for their neighbours only: sent again, they are stored.
    valid = [r for i, r in enumerate(recs) if i not in keyless]
    assert all(e is None for e in _send_confluent(broker.bootstrap, topic_name, valid))
    got = consume("confluent-kafka", broker.bootstrap, topic_name, len(valid))
    assert [(g.key, g.value) for g in got] == [(r.key, r.value) for r in valid]


def test_confluent_timestamps_out_of_range(broker: BrokerProcess, topic_name: str) -> None:
    from confluent_kafka import KafkaError

    create_topic(
        broker.bootstrap,
        topic_name,
        configs={"message.timestamp.before.max.ms": "600000", "message.timestamp.after.max.ms": "600000"},
    )
    now = int(time.time() * 1000)
    old, future = {5, 6}, {50}
    stamp = {**dict.fromkeys(old, now - 3_600_000), **dict.fromkeys(future, now + 3_600_000)}
    recs = [Rec(b"v%d" % i, b"k%d" % i, timestamp=stamp.get(i, now)) for i in range(BATCH)]
    results = _send_confluent(broker.bootstrap, topic_name, recs)
    codes = [e.code() if e is not None else None for e in results]
    # The broker answers INVALID_TIMESTAMP with three record errors; librdkafka reports several
    # offenders as INVALID_RECORD (a single one would carry the batch's code).
    assert {i for i, c in enumerate(codes) if c == KafkaError.INVALID_RECORD} == old | future
    assert {i for i, c in enumerate(codes) if c == KafkaError._INVALID_DIFFERENT_RECORD} == (
        set(range(BATCH)) - old - future
    )


def test_kafka_python_keyless_records_on_a_compacted_topic(broker: BrokerProcess, topic_name: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError, KafkaError

    create_topic(broker.bootstrap, topic_name, configs={"cleanup.policy": "compact"})
    keyless = {0, 42, 99}
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        linger_ms=1000,
        batch_size=1 << 20,
        enable_idempotence=False,
        retries=0,
        request_timeout_ms=20000,
    )
    try:
        futures = [
            producer.send(topic_name, key=None if i in keyless else b"k%d" % i, value=b"v%d" % i, partition=0)
            for i in range(BATCH)
        ]
        producer.flush(30)
    finally:
        producer.close(10)
    errors = {}
    for i, f in enumerate(futures):
        assert f.is_done
        errors[i] = f.exception
    assert {i for i, e in errors.items() if isinstance(e, InvalidRecordError)} == keyless
    others = {i for i, e in errors.items() if i not in keyless}
    assert all(type(errors[i]) is KafkaError and "invalid records" in str(errors[i]) for i in others)
    assert "without key" in str(errors[0])


def test_kafka_python_one_timestamp_out_of_range(broker: BrokerProcess, topic_name: str) -> None:
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError, KafkaError

    create_topic(broker.bootstrap, topic_name, configs={"message.timestamp.before.max.ms": "600000"})
    now = int(time.time() * 1000)
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        linger_ms=1000,
        batch_size=1 << 20,
        enable_idempotence=False,
        retries=0,
        request_timeout_ms=20000,
    )
    try:
        stamps = [now - 7_200_000 if i == 9 else now for i in range(20)]
        futures = [
            producer.send(topic_name, key=b"k", value=b"v%d" % i, partition=0, timestamp_ms=ts)
            for i, ts in enumerate(stamps)
        ]
        producer.flush(30)
    finally:
        producer.close(10)
    errors = [f.exception for f in futures]
    assert isinstance(errors[9], InvalidTimestampError) and "out of range" in str(errors[9])
    assert all(type(e) is KafkaError for i, e in enumerate(errors) if i != 9)


def test_valid_batches_still_append(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, configs={"cleanup.policy": "compact"})
    recs = [Rec(b"v%d" % i, b"k%d" % i, partition=0) for i in range(10)]
    produce("confluent-kafka", broker.bootstrap, topic_name, recs)
    assert len(consume("kafka-python", broker.bootstrap, topic_name, 10)) == 10


@pytest.mark.parametrize("client", ["confluent-kafka"])
def test_the_batch_is_refused_whole(broker: BrokerProcess, topic_name: str, client: str) -> None:
    """Nothing of a refused batch is stored: the log end offset stays where it was."""
    from compat_clients import end_offsets

    create_topic(broker.bootstrap, topic_name, configs={"cleanup.policy": "compact"})
    recs = [Rec(b"v%d" % i, None if i == 7 else b"k%d" % i) for i in range(20)]
    results = _send_confluent(broker.bootstrap, topic_name, recs)
    assert all(e is not None for e in results)
    assert end_offsets(broker.bootstrap, topic_name, [0]) == {0: 0}
