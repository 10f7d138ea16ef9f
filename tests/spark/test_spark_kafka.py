"""format("pylog") against a real ``pylog broker`` through the Kafka protocol: records produced by
kafka-python read in batch and streaming queries, and Spark's sink writing records a client reads."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sdk_helpers import Broker, create_topic


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    root = tmp_path_factory.mktemp("spark-broker")
    b = Broker(root / "data", root / "broker.log")
    yield b
    b.stop()


def _topic(broker: Broker, partitions: int) -> str:
    name = f"s-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, name, partitions)
    return name


def _produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    """Half the records through kafka-python, half through confluent-kafka."""
    from confluent_kafka import Producer
    from kafka import KafkaProducer

    half = start + n // 2
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(start, half):
        p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("i", str(i).encode())])
    p.flush()
    p.close()
    cp = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd"})
    for i in range(half, start + n):
        cp.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("i", str(i).encode())])
    assert cp.flush(30) == 0


def test_batch_and_streaming_reads(spark, broker: Broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = _topic(broker, 2)
    _produce(broker.bootstrap, topic, 0, 200)
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("subscribe", topic).option("includeHeaders", "true").load())
    rows = df.collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(f"v{i}".encode() for i in range(200))
    assert all(r.key == b"k" + r.value[1:] and [(h.key, bytes(h.value)) for h in r.headers] ==
               [("i", bytes(r.value[1:]))] for r in rows)
    assert {r.topic for r in rows} == {topic} and {r.partition for r in rows} <= {0, 1}

    stream = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest").load())
    query = (stream.selectExpr("CAST(value AS STRING) AS v", "partition", "offset").writeStream
             .format("memory").queryName("kafka_stream")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        assert spark.sql("select count(*) from kafka_stream").collect()[0][0] == 200
        _produce(broker.bootstrap, topic, 200, 50)
        query.processAllAvailable()
        got = sorted(r.v for r in spark.sql("select v from kafka_stream").collect())
        assert got == sorted(f"v{i}" for i in range(250))
    finally:
        query.stop()


def _consume(bootstrap: str, topic: str, n: int) -> list[tuple[bytes, bytes]]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)
    got = []
    for m in consumer:
        got.append((m.key, m.value))
        if len(got) == n:
            break
    consumer.close()
    return sorted(got)


def test_sinks_write_records_a_client_reads(spark, broker: Broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = _topic(broker, 3)
    data = spark.createDataFrame([(f"key-{i}", f"value-{i}") for i in range(300)], "key string, value string")
    (data.write.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
     .mode("append").save())
    expected = sorted((f"key-{i}".encode(), f"value-{i}".encode()) for i in range(300))
    assert _consume(broker.bootstrap, topic, 300) == expected

    # a streaming copy: topic -> per-row topic column -> the copy, through the streaming sink
    copy = _topic(broker, 2)
    query = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .selectExpr("key", "value", f"'{copy}' AS topic").writeStream.format("pylog")
             .option("kafka.bootstrap.servers", broker.bootstrap)
             .option("checkpointLocation", str(tmp_path / "copy-ckpt")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert _consume(broker.bootstrap, copy, 300) == expected

    with pytest.raises(Exception, match="needs a 'value' column"):
        (spark.createDataFrame([("a",)], "key string").write.format("pylog")
         .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).mode("append").save())
