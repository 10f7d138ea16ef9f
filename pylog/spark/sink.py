"""Batch and streaming writes of the ``pylog`` format: Spark's Kafka sink over the Kafka protocol.

Columns as in Spark's Kafka sink: ``value`` (required, string or binary), ``key``, ``headers``,
``partition`` (optional) and ``topic`` (unless the ``topic`` option is set, which wins). With
``valueFormat`` / ``keyFormat`` = ``registry`` the column (a struct or any typed column) is written
as Avro in the Schema Registry wire format, its schema registered at ``schema.registry.url``. Each Spark
task produces its Arrow batches with one `pylog.sdk.writer.Producer` (acks=all); like Spark's sink
the write is at-least-once: a failed task may leave records that a retry writes again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pylog.sdk.writer import COMPRESSIONS, Producer
from pylog.spark.options import _format, _get, _int, kafka_security


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    compression: str
    batch_size: int
    key_format: str = "binary"
    value_format: str = "binary"
    schema_registry_url: str | None = None
    security: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: StructType) -> WriteOptions:
        servers = _get(options, "kafka.bootstrap.servers")
        if servers is None:
            raise ValueError("writing format('pylog') needs the option kafka.bootstrap.servers "
                             "(writes go through the Kafka protocol, never to a data directory)")
        names = schema.fieldNames()
        if "value" not in names:
            raise ValueError(f"writing format('pylog') needs a 'value' column (string or binary); "
                             f"the data has {names}")
        topic = _get(options, "topic")
        if topic is None and "topic" not in names:
            raise ValueError("writing format('pylog') needs the option topic or a 'topic' column")
        compression = (_get(options, "kafka.compression.type") or "none").lower()
        if compression not in COMPRESSIONS:
            raise ValueError(f"option kafka.compression.type must be one of {', '.join(COMPRESSIONS)}")
        key_format, value_format = _format(options, "keyFormat"), _format(options, "valueFormat")
        url = _get(options, "schema.registry.url")
        if "registry" in (key_format, value_format) and not url:
            raise ValueError("writing a registry keyFormat / valueFormat needs the option "
                             "schema.registry.url")
        return cls(servers, topic, compression, _int(options, "kafka.batch.size") or 1_000_000,
                   key_format, value_format, url, kafka_security(options))


def _framed(options: WriteOptions, batch: pa.RecordBatch, topic: str) -> pa.RecordBatch:
    from pylog.sdk.registry_write import framed

    for column, fmt in (("key", options.key_format), ("value", options.value_format)):
        i = batch.schema.get_field_index(column)
        if fmt == "registry" and i >= 0:
            assert options.schema_registry_url is not None
            values = framed(batch.column(i), url=options.schema_registry_url, subject=f"{topic}-{column}",
                            name=f"{topic}_{column}", security=dict(options.security) or None)
            batch = batch.set_column(i, column, values)
    return batch


@dataclass
class PylogCommitMessage(WriterCommitMessage):
    """What one task wrote: records and {topic: {partition: [first, last]}}."""

    records: int = 0
    offsets: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)


def _write(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> PylogCommitMessage:
    with Producer(options.bootstrap_servers, compression=options.compression,
                  batch_size=options.batch_size, security=dict(options.security) or None) as producer:
        for batch in batches:
            if options.topic is not None:
                producer.send(_framed(options, batch, options.topic), options.topic, value="value")
                continue
            topics = batch.column("topic")
            if topics.null_count:
                raise ValueError("the topic column has nulls and no topic option is set")
            for topic in pc.unique(topics).to_pylist():
                rows = batch.filter(pc.equal(topics, topic))
                producer.send(_framed(options, rows, topic), topic, value="value")
        results = producer.flush()
    return PylogCommitMessage(
        records=sum(r.records for r in results.values()),
        offsets={t: dict(r.offsets) for t, r in results.items() if r.records},
    )


class PylogBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PylogCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class PylogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PylogCommitMessage:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass
