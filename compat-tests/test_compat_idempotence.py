"""Idempotent producers: each client's idempotent mode works, and the broker deduplicates a
retried batch by producer id and sequence exactly as Kafka does."""

from __future__ import annotations

import pytest
from compat_broker import BrokerProcess
from compat_clients import Rec, consume, create_topic, produce
from compat_raw import RawConn, init_producer_id, list_offset, record_batch
from compat_raw import produce as raw_produce

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
N = 90


def spread(tag: str) -> list[Rec]:
    return [Rec(f"{tag}-{i}".encode(), f"k{i}".encode(), partition=i % 3) for i in range(N)]


def check_exactly_once(bootstrap: str, topic: str, sent: list[Rec]) -> None:
    got = consume("confluent-kafka", bootstrap, topic, N, partitions=(0, 1, 2))
    assert len(got) == N, "duplicates or losses"
    for p in range(3):
        assert [r.value for r in got if r.partition == p] == [r.value for r in sent if r.partition == p]
        assert [r.offset for r in got if r.partition == p] == list(range(N // 3))


def test_kafka_python_defaults_are_idempotent(broker: BrokerProcess, topic_name: str) -> None:
    """kafka-python 3 turns idempotence on by default (acks=all): InitProducerId must work."""
    from kafka import KafkaProducer

    create_topic(broker.bootstrap, topic_name, partitions=3)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=20000)
    try:
        assert producer.config["enable_idempotence"] and producer.config["acks"] in (-1, "all")
        sent = spread("kp")
        futures = [producer.send(topic_name, value=r.value, key=r.key, partition=r.partition) for r in sent]
        producer.flush(30)
        metas = [f.get(timeout=30) for f in futures]
        assert [(m.partition, m.offset) for m in metas] == [(i % 3, i // 3) for i in range(N)]
        tm = getattr(producer, "_transaction_manager", None)
        pid = getattr(getattr(tm, "producer_id_and_epoch", None), "producer_id", None)
        if pid is not None:
            assert pid >= 0, "no producer id from InitProducerId"
    finally:
        producer.close(timeout=10)
    check_exactly_once(broker.bootstrap, topic_name, sent)


@pytest.mark.parametrize("client", ["confluent-kafka", "aiokafka", "kafkajs"])
def test_idempotent_producer(
    broker: BrokerProcess, topic_name: str, client: str, request: pytest.FixtureRequest
) -> None:
    if client == "kafkajs":
        request.getfixturevalue("kafkajs")
    create_topic(broker.bootstrap, topic_name, partitions=3)
    sent = spread(client)
    produced = produce(client, broker.bootstrap, topic_name, sent, acks="all", idempotent=True)
    assert produced.positions == [(i % 3, i // 3) for i in range(N)]
    check_exactly_once(broker.bootstrap, topic_name, sent)


def test_confluent_idempotent_with_compression_and_many_batches(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, partitions=3)
    sent = spread("zstd")
    produce(
        "confluent-kafka",
        broker.bootstrap,
        topic_name,
        sent,
        compression="zstd",
        idempotent=True,
        config={"batch.num.messages": 7, "max.in.flight.requests.per.connection": 5},
    )
    check_exactly_once(broker.bootstrap, topic_name, sent)


def test_broker_deduplicates_retried_batch(broker: BrokerProcess, topic_name: str) -> None:
    """A batch sent twice with the same producer id / epoch / sequence is stored once; a gap in
    sequence numbers is OUT_OF_ORDER_SEQUENCE_NUMBER; the next in-order batch is accepted."""
    create_topic(broker.bootstrap, topic_name)
    with RawConn("127.0.0.1", broker.port) as conn:
        err, pid, epoch = init_producer_id(conn)
        assert err == 0 and pid >= 0 and epoch >= 0
        first = record_batch([b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        res = raw_produce(conn, topic_name, 0, first)
        assert (res.error_code, res.base_offset) == (0, 0)

        again = raw_produce(conn, topic_name, 0, first)
        assert again.error_code in (0, DUPLICATE_SEQUENCE_NUMBER)
        if again.error_code == 0:
            assert again.base_offset == 0, "a duplicate must report the original offsets"
        assert list_offset(conn, topic_name, 0) == (0, 3), "the retried batch was appended again"

        gap = record_batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=7)
        assert raw_produce(conn, topic_name, 0, gap).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER

        nxt = record_batch([b"d", b"e"], producer_id=pid, producer_epoch=epoch, base_sequence=3)
        res = raw_produce(conn, topic_name, 0, nxt)
        assert (res.error_code, res.base_offset) == (0, 3)
        assert list_offset(conn, topic_name, 0) == (0, 5)
    got = consume("kafka-python", broker.bootstrap, topic_name, 5)
    assert [r.value for r in got] == [b"a", b"b", b"c", b"d", b"e"]
