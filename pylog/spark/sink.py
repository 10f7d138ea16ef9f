"""Batch and streaming writes of the ``pylog`` format: Spark's Kafka sink over the Kafka protocol.

Columns as in Spark's Kafka sink: ``value`` (required, string or binary), ``key``, ``headers``,
``partition`` (optional) and ``topic`` (unless the ``topic`` option is set, which wins). Each Spark
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
from pylog.spark.options import _get, _int


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    compression: str
    batch_size: int

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
        return cls(servers, topic, compression, _int(options, "kafka.batch.size") or 1_000_000)


@dataclass
class PylogCommitMessage(WriterCommitMessage):
    """What one task wrote: records and {topic: {partition: [first, last]}}."""

    records: int = 0
    offsets: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)


def _write(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> PylogCommitMessage:
    with Producer(options.bootstrap_servers, compression=options.compression,
                  batch_size=options.batch_size) as producer:
        for batch in batches:
            if options.topic is not None:
                producer.send(batch, options.topic, value="value")
                continue
            topics = batch.column("topic")
            if topics.null_count:
                raise ValueError("the topic column has nulls and no topic option is set")
            for topic in pc.unique(topics).to_pylist():
                rows = batch.filter(pc.equal(topics, topic))
                producer.send(rows, topic, value="value")
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
