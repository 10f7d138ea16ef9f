"""The ``pylog`` Spark data source (PySpark's Python Data Source API): batch and streaming reads and
writes of Kafka topics, with Spark's Kafka-source schema and options.

Reads plan on the driver (offset ranges per topic partition, cut into input partitions) and read on
the workers, each yielding ``pyarrow.RecordBatch`` es straight from the data directory, a Fetch, or
over Arrow Flight a DoGet at the broker the partition's endpoint names (the driver plans from
GetFlightInfo; a task whose broker no longer leads its partition asks again).
A topic's remote tier is planned as input partitions of whole remote segments (small ones packed up
to ``maxBytesPerPartition``), carrying the manifest version the driver planned with: executors
read those objects from the store with pyarrow and never ask a broker for them. When the driver's
batch metadata shows that such a partition holds no batch a committed read skips or restamps (no
transaction, control batch or LogAppendTime), it carries its segments too, and the executor reads
their data objects at once, without the manifest or any side file.
Streaming offsets are ``{"topic": {"partition": next offset}}``, like Spark's Kafka source.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pylog.sdk.dir_source import DirTopicSource, stored_rows
from pylog.sdk.flight_source import FlightTopicSource
from pylog.sdk.offsets import PartitionRange, TopicSource
from pylog.sdk.remote_source import RemoteTier, TieredKafkaSource, remote_cache_bytes
from pylog.spark.options import ReadOptions, source_columns, split_ranges, to_spark_batch
from pylog.storage.remote_cache import RemoteReadCache
from pylog.storage.remote_layout import RemoteLogSegment, partition_prefix
from pylog.storage.remote_segment import RemoteLog
from pylog.storage.remote_store import open_remote_store

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


class OffsetRangePartition(InputPartition):
    """Records [start, end) of one topic partition: one Spark task. ``pin``: (topic id hex, manifest
    version) of the remote tier the driver planned with; ``stored``: the remote segments holding
    the range when the driver found that it reads as stored (see `_input_partitions`)."""

    def __init__(self, topic: str, partition: int, start: int, end: int,
                 pin: tuple[str, int] | None = None,
                 stored: tuple[RemoteLogSegment, ...] | None = None, location: str | None = None) -> None:
        super().__init__((topic, partition, start, end, pin))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end
        self.pin = pin
        self.stored = stored
        self.location = location  # over Flight: the endpoint's broker, which the task reads from

    def pins(self) -> dict[tuple[str, int], tuple[uuid.UUID, int]] | None:
        if self.pin is None:
            return None
        return {(self.topic, self.partition): (uuid.UUID(hex=self.pin[0]), self.pin[1])}

    def range(self) -> PartitionRange:
        return PartitionRange(self.topic, self.partition, self.start, self.end)


class PylogDataSource(DataSource):
    """``spark.read.format("pylog")`` / ``readStream`` / ``write`` / ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "pylog"

    def schema(self) -> StructType:
        from pylog.spark.options import _bool, _format

        schema = kafka_schema(_bool(self.options, "includeHeaders", False))
        if "registry" not in (_format(self.options, "keyFormat"), _format(self.options, "valueFormat")):
            return schema
        options = ReadOptions.parse(self.options, streaming=False)
        for column in options.registry_columns():
            from pyspark.sql.pandas.types import from_arrow_type

            from pylog.spark.registry import registry_arrow_type

            spark_type = from_arrow_type(registry_arrow_type(options, column))
            schema = StructType([StructField(f.name, spark_type) if f.name == column else f for f in schema])
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return PylogBatchReader(ReadOptions.parse(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return PylogStreamReader(ReadOptions.parse(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pylog.spark.sink import PylogBatchWriter, WriteOptions

        return PylogBatchWriter(WriteOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pylog.spark.sink import PylogStreamWriter, WriteOptions

        return PylogStreamWriter(WriteOptions.parse(self.options, schema))


def _arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def _read(options: ReadOptions, schema: StructType, part: OffsetRangePartition) -> Iterator[pa.RecordBatch]:
    target = _arrow_schema(schema)
    r = part.range()
    decoders = {}
    if options.registry_columns():
        from pylog.spark.registry import decoders_for

        decoders = decoders_for(options, r.topic)
    columns = source_columns(target)
    for got, batch in _stored(options, part, columns) if part.stored else _committed(options, part, columns):
        for column, decode in decoders.items():
            i = batch.schema.get_field_index(column)
            if i >= 0:
                batch = batch.set_column(i, column, decode(batch.column(i), got, batch))
        yield to_spark_batch(got, batch, target)


def _committed(options: ReadOptions, part: OffsetRangePartition, columns: list[str]
               ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
    """The committed rows of the partition's range, through the source its options name."""
    source = options.open(part.pins())
    if part.location is not None and isinstance(source, FlightTopicSource):
        source.place(part.topic, part.partition, part.location)
    try:
        yield from source.read([part.range()], columns)
    finally:
        source.close()


def _stored(options: ReadOptions, part: OffsetRangePartition, columns: list[str]
            ) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
    """The rows of a range the driver found to read as stored, straight from its remote segments'
    data objects: no manifest and no side file is read (whole segments need neither)."""
    assert part.stored and part.pin is not None
    spec = options.remote()
    assert spec is not None
    r = part.range()
    prefix = partition_prefix(r.topic, uuid.UUID(hex=part.pin[0]), r.partition)
    cache = RemoteReadCache(remote_cache_bytes())  # used only by a range starting inside a segment
    try:
        log = RemoteLog(open_remote_store(spec.uri, spec.options), prefix, part.stored, cache,
                        log_start_offset=r.start)
        for batch in stored_rows(log, r, columns):
            yield r, batch
    finally:
        cache.close()


def _input_partitions(options: ReadOptions, ranges: list[PartitionRange],
                      source: TopicSource | None = None) -> list[OffsetRangePartition]:
    """Remote parts: input partitions of whole remote segments (one each, or several small ones
    packed up to ``maxBytesPerPartition``), pinned to the planning manifest; the rest cut by
    size as usual."""
    tier = remote_tier(source)
    out: list[OffsetRangePartition] = []
    rest: list[PartitionRange] = []
    for r in ranges:
        log = tier.remote_log(r.topic, r.partition) if tier is not None and r.count > 0 else None
        if log is None or r.start >= log.log_end_offset:
            rest.append(r)
            continue
        manifest = tier.manifest(r.topic, r.partition)  # type: ignore[union-attr]
        assert manifest is not None
        pin = (manifest.topic_id.hex, manifest.version)
        segments = log.segments_in(r.start, min(r.end, log.log_end_offset))
        for group in pack_segments(segments, options.max_bytes_per_partition):
            task = PartitionRange(r.topic, r.partition, max(r.start, group[0].base_offset),
                                  min(r.end, group[-1].end_offset + 1))
            stored = tuple(group) if store_reader(source).reads_as_stored(task) else None  # type: ignore[union-attr]
            out.append(OffsetRangePartition(task.topic, task.partition, task.start, task.end, pin, stored))
        if r.end > log.log_end_offset:
            rest.append(PartitionRange(r.topic, r.partition, log.log_end_offset, r.end))
    pieces = split_ranges(rest, max_records=options.max_records_per_partition,
                          min_partitions=options.min_partitions)
    where: dict[str, dict[int, str]] = {}
    if isinstance(source, FlightTopicSource):  # each task at its partition's Flight endpoint
        where = {t: source.locations(t) for t in {r.topic for r in pieces}}
    return out + [OffsetRangePartition(r.topic, r.partition, r.start, r.end,
                                       location=where.get(r.topic, {}).get(r.partition)) for r in pieces]


def pack_segments(segments: Sequence[RemoteLogSegment],
                  max_bytes: int) -> list[list[RemoteLogSegment]]:
    """Consecutive remote segments grouped into tasks of at most ``max_bytes`` (a segment is never
    split; one larger than that is a task of its own): few large tasks cost Spark less than many
    small ones, as its file sources pack files up to ``spark.sql.files.maxPartitionBytes``. A last
    group under a quarter of ``max_bytes`` joins the one before it: a task that small costs more
    to schedule and start than to read."""
    groups: list[list[RemoteLogSegment]] = []
    size = 0
    for seg in segments:
        if groups and size + seg.size_bytes <= max_bytes:
            groups[-1].append(seg)
            size += seg.size_bytes
        else:
            groups.append([seg])
            size = seg.size_bytes
    if len(groups) > 1 and size < max_bytes // 4:
        groups[-2].extend(groups.pop())
    return groups


def remote_tier(source: TopicSource | None) -> RemoteTier | None:
    if isinstance(source, DirTopicSource):
        return source.remote if isinstance(source.remote, RemoteTier) else None
    if isinstance(source, TieredKafkaSource):
        return source.tier
    return None


def store_reader(source: TopicSource | None) -> DirTopicSource | None:
    """What reads the source's remote tier (and its data directory, if any)."""
    if isinstance(source, DirTopicSource):
        return source
    if isinstance(source, TieredKafkaSource) and isinstance(source.store_reader, DirTopicSource):
        return source.store_reader
    return None


class PylogBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options.with_store()
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        source = self.options.open()
        try:
            ranges = self.options.ranges(source)
            parts = _input_partitions(self.options, ranges, source)
        finally:
            source.close()
        # an empty read still needs one (empty) task
        return parts or [OffsetRangePartition(self.options.topics[0], 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRangePartition)
        if partition.start >= partition.end:
            return iter(())
        return _read(self.options, self.schema, partition)


Offsets = dict[str, dict[str, int]]


class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the committed end of each partition, optionally capped per trigger."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options.with_store()
        self.schema = schema
        self._target: Offsets | None = None  # Trigger.AvailableNow's end

    def _latest(self) -> tuple[Offsets, Offsets]:
        """(earliest, latest) offsets of every partition now."""
        source = self.options.open()
        try:
            ranges = self.options.ranges(source, starting="earliest", ending="latest", with_timestamps=False)
        finally:
            source.close()
        lo: Offsets = {}
        hi: Offsets = {}
        for r in ranges:
            lo.setdefault(r.topic, {})[str(r.partition)] = r.start
            hi.setdefault(r.topic, {})[str(r.partition)] = r.end
        return lo, hi

    def initialOffset(self) -> dict:
        source = self.options.open()
        try:
            ranges = self.options.ranges(source, ending="latest")
        finally:
            source.close()
        out: Offsets = {}
        for r in ranges:
            out.setdefault(r.topic, {})[str(r.partition)] = r.start
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()[1]

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        lo, hi = self._latest()
        if self._target is not None:
            cap = self._target
            hi = {t: {p: min(e, cap.get(t, {}).get(p, e)) for p, e in ps.items()} for t, ps in hi.items()}
        begin = {t: {p: start.get(t, {}).get(p, lo[t][p]) for p in ps} for t, ps in hi.items()}
        if isinstance(limit, ReadMaxRows):
            return _rate_limit(begin, hi, limit.max_rows)
        return {t: {p: max(e, begin[t][p]) for p, e in ps.items()} for t, ps in hi.items()}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        missing = any(p not in start.get(t, {}) for t, ps in end.items() for p in ps)
        lo = self._latest()[0] if missing else {}
        ranges = []
        for t, ps in end.items():
            for p, e in ps.items():
                s = start.get(t, {}).get(p, lo.get(t, {}).get(p, e))
                if e > s:
                    ranges.append(PartitionRange(t, int(p), s, e))
        source = self.options.open()
        try:
            return _input_partitions(self.options, ranges, source)
        finally:
            source.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRangePartition)
        return _read(self.options, self.schema, partition)

    def commit(self, end: dict) -> None:
        pass


def _rate_limit(begin: Offsets, end: Offsets, limit: int) -> Offsets:
    """At most `limit` offsets over all partitions, shared in proportion to each one's backlog
    (Spark's Kafka source rule: a share below one offset rounds up, others round down)."""
    lag = {(t, p): max(0, e - begin[t][p]) for t, ps in end.items() for p, e in ps.items()}
    total = sum(lag.values())
    out: Offsets = {t: dict(ps) for t, ps in begin.items()}
    if total <= limit:
        for t, ps in end.items():
            for p, e in ps.items():
                out[t][p] = max(e, begin[t][p])
        return out
    for (t, p), size in lag.items():
        share = limit * size / total
        take = -(-share // 1) if share < 1 else share // 1
        out[t][p] = begin[t][p] + min(size, int(take))
    return out
