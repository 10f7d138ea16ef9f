"""format("pylog") over Arrow Flight against a real broker serving ``pylog.flight.listeners``: the
driver plans tasks from the Flight endpoints (each at its partition's broker) and a batch read over
Flight returns what the same read over the Kafka protocol does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import pylog
from pylog.spark.options import ReadOptions
from pylog.spark.source import PylogBatchReader, kafka_schema

TOPIC = "spark-flight"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pylog.LocalBroker]:
    b = pylog.LocalBroker(tmp_path_factory.mktemp("spark-flight") / "data",
                          config={"pylog.flight.listeners": "grpc://127.0.0.1:0"})
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
    admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": b.bootstrap_servers})
    for i in range(300):
        p.produce(TOPIC, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 3,
                  headers=[("i", str(i).encode())])
    assert p.flush(30) == 0
    yield b
    b.stop()


def _reader(broker: pylog.LocalBroker, transport: str) -> PylogBatchReader:
    options = ReadOptions.parse(_options(broker, transport), streaming=False)
    return PylogBatchReader(options, kafka_schema(True))


def _options(broker: pylog.LocalBroker, transport: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap_servers, "subscribe": TOPIC,
            "includeHeaders": "true", "transport": transport}


def test_tasks_are_planned_at_the_flight_endpoints(broker: pylog.LocalBroker) -> None:
    reader = _reader(broker, "auto")
    assert reader.options.transport == "flight" and reader.options.flight == broker.flight_url
    parts = reader.partitions()
    assert sorted(p.partition for p in parts) == [0, 1, 2]  # type: ignore[attr-defined]
    assert {p.location for p in parts} == {broker.flight_url}  # type: ignore[attr-defined]
    assert {p.location for p in _reader(broker, "kafka").partitions()} == {None}  # type: ignore[attr-defined]


def test_a_batch_read_over_flight_equals_the_read_over_kafka(spark, broker: pylog.LocalBroker) -> None:  # type: ignore[no-untyped-def]
    def read(transport: str) -> list[tuple]:
        df = spark.read.format("pylog").options(**_options(broker, transport)).load()
        return sorted((r.partition, r.offset, bytes(r.key), bytes(r.value), r.timestamp, r.timestampType,
                       [(h.key, bytes(h.value)) for h in r.headers]) for r in df.collect())

    over_flight = read("flight")
    assert len(over_flight) == 300
    assert over_flight == read("kafka")
