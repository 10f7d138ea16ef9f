"""format("pylog") with valueFormat=registry: typed value columns from Avro written by confluent-kafka's
AvroSerializer with two schema versions, and the sink writing a struct column as registry Avro."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator

import pytest

import pylog

V1 = {
    "type": "record",
    "name": "Visit",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "page", "type": "string"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
V2 = {**V1, "fields": [*V1["fields"], {"name": "ref", "type": ["null", "string"], "default": None}]}
T0 = datetime.datetime(2024, 1, 2, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def local() -> Iterator[pylog.LocalBroker]:
    with pylog.LocalBroker() as b:
        yield b


@pytest.fixture(scope="module")
def visits(local: pylog.LocalBroker) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    client = SchemaRegistryClient({"url": local.schema_registry_url})
    p = Producer({"bootstrap.servers": local.bootstrap_servers})
    ctx = SerializationContext("visits", MessageField.VALUE)
    for schema, rows in ((V1, range(10)), (V2, range(10, 20))):
        ser = AvroSerializer(client, json.dumps(schema))
        for i in rows:
            row = {"id": i, "page": f"/p{i}", "at": T0 + datetime.timedelta(seconds=i)}
            if schema is V2:
                row["ref"] = f"r{i}"
            p.produce("visits", value=ser(row, ctx))
    assert p.flush(30) == 0
    return "visits"


def test_registry_value_format_reads_typed_columns(spark, local: pylog.LocalBroker, visits: str) -> None:  # type: ignore[no-untyped-def]
    df = (
        spark.read.format("pylog")
        .option("kafka.bootstrap.servers", local.bootstrap_servers)
        .option("subscribe", visits)
        .option("valueFormat", "registry")
        .option("schema.registry.url", local.schema_registry_url)
        .load()
    )
    assert [f.name for f in df.schema["value"].dataType.fields] == ["id", "page", "at", "ref"]
    rows = df.select("value.id", "value.page", "value.ref", "value.at").orderBy("id").collect()
    assert [r.id for r in rows] == list(range(20))
    assert [r.ref for r in rows] == [None] * 10 + [f"r{i}" for i in range(10, 20)]
    assert rows[3].at.replace(tzinfo=datetime.timezone.utc) == T0 + datetime.timedelta(seconds=3)
    from_dir = (
        spark.read.format("pylog")
        .option("dataDir", str(local.data_dir))
        .option("subscribe", visits)
        .option("valueFormat", "registry")
        .load()
    )  # schemas read from _schemas in the data directory
    assert from_dir.selectExpr("sum(value.id)").collect()[0][0] == sum(range(20))


def test_registry_value_format_sink(spark, local: pylog.LocalBroker, visits: str) -> None:  # type: ignore[no-untyped-def]
    src = (
        spark.read.format("pylog")
        .option("kafka.bootstrap.servers", local.bootstrap_servers)
        .option("subscribe", visits)
        .option("valueFormat", "registry")
        .option("schema.registry.url", local.schema_registry_url)
        .load()
    )
    (
        src.selectExpr("named_struct('id', value.id * 2, 'page', upper(value.page)) AS value")
        .write.format("pylog")
        .option("kafka.bootstrap.servers", local.bootstrap_servers)
        .option("topic", "visits-upper")
        .option("valueFormat", "registry")
        .option("schema.registry.url", local.schema_registry_url)
        .mode("append")
        .save()
    )
    out = pylog.read_topic("visits-upper", bootstrap_servers=local.bootstrap_servers, decode="registry")
    values = sorted(out.column("value").to_pylist(), key=lambda v: v["id"])
    assert values[:2] == [{"id": 0, "page": "/P0"}, {"id": 2, "page": "/P1"}] and len(values) == 20
    with pytest.raises(Exception, match=r"schema\.registry\.url"):
        (
            src.select("value")
            .write.format("pylog")
            .option("kafka.bootstrap.servers", local.bootstrap_servers)
            .option("topic", "x")
            .option("valueFormat", "registry")
            .mode("append")
            .save()
        )
