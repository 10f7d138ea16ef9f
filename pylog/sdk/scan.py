"""A lazy read of one topic: bounds and columns are fixed up front, nothing is read until asked.

The scan resolves its offset / timestamp bounds into ``[start, end)`` per partition (`plan`), asks the
source for only the columns it needs, adds ``topic`` / ``partition`` and applies decoders. Polars,
pandas and DuckDB are imported only by their adapters.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from pylog._extras import require
from pylog.schema_registry.records import TOPIC as SCHEMAS_TOPIC
from pylog.sdk.constant import ConstantPool
from pylog.sdk.decoders import apply_decoders, resolve_decoders
from pylog.sdk.offsets import PartitionRange, TopicSource, resolve_ranges
from pylog.sdk.options import ReadOptions, check_isolation, check_source
from pylog.sdk.options import with_security as with_security  # where pylog.widgets finds it
from pylog.sdk.progress import progress_bar
from pylog.sdk.registry import registry_decoder
from pylog.sdk.schema import OUTPUT_FIELDS, as_instants, output_columns, output_schema, source_schema

if TYPE_CHECKING:
    import duckdb
    import pandas
    import polars

    from pylog.sdk.remote_source import RemoteStorageSpec

SOURCE_COLUMNS = ("offset", "timestamp", "key", "value", "headers", "timestampType")
T = TypeVar("T", pa.Table, pa.RecordBatch)


def decode_context(options: ReadOptions, topic: str) -> dict[str, Any]:
    """What decoding `topic` needs: the options' decode settings, a reader of the source's own
    ``_schemas`` topic, and the ``"registry"`` decoder built from both."""
    context = options.decode_context(topic)
    context["read_schemas"] = functools.partial(read_schemas_topic, options)
    context["registry_decoder"] = functools.partial(registry_decoder, **context)
    return context


def read_schemas_topic(options: ReadOptions) -> pa.Table:
    """The ``_schemas`` topic of the source `options` name (keys and values only)."""
    schemas = ReadOptions(data_dir=options.data_dir, bootstrap_servers=options.bootstrap_servers,
                          fetch_options=options.fetch, columns=["key", "value"])
    return TopicScan(SCHEMAS_TOPIC, schemas).to_arrow()


def open_source(data_dir: Any, bootstrap_servers: Any, fetch_options: Any = None,
                remote: RemoteStorageSpec | None = None, pins: Any = None,
                read_committed: bool = True) -> TopicSource:
    """A data directory (read the segments), bootstrap servers (Kafka protocol), or a remote store
    alone; with a store beside either of the first two, remote segments come from the store."""
    check_source(data_dir, bootstrap_servers, remote)
    check_isolation(read_committed, data_dir, remote)
    tier = None
    if remote is not None:
        from pylog.sdk.remote_source import RemoteTier
        tier = RemoteTier(remote, pins=pins)
    if bootstrap_servers is None:
        from pylog.sdk.dir_source import DirTopicSource
        return DirTopicSource(data_dir, remote=tier, read_committed=read_committed)
    from pylog.sdk.kafka_source import KafkaTopicSource
    kafka = KafkaTopicSource(bootstrap_servers, fetch_options)
    if tier is None:
        return kafka
    from pylog.sdk.dir_source import DirTopicSource
    from pylog.sdk.remote_source import TieredKafkaSource
    return TieredKafkaSource(kafka, tier, DirTopicSource(None, remote=tier))


def open_read_source(options: ReadOptions, remote: RemoteStorageSpec | None = None,
                     pins: Any = None) -> TopicSource:
    """The source `options` name: over Arrow Flight when their transport picks it
    (`pylog.sdk.flight_source`; with ``auto``, not when the read takes a remote tier straight from a
    store this client reaches), else as `open_source` opens it (`remote`: the store of the remote
    tier, when known, else the one the options name)."""
    remote = options.remote if remote is None else remote
    if options.bootstrap_servers is not None and options.transport != "kafka":
        from pylog.sdk.flight_source import flight_source

        flight = flight_source(options, remote is not None)
        if flight is not None:
            return flight
    return open_source(options.data_dir, options.bootstrap_servers, options.fetch, remote, pins,
                       options.read_committed)


class TopicScan:
    """What `pylog.scan_topic` returns. Reusable: every ``to_*`` call reads afresh up to the bounds
    resolved at that moment (``"latest"`` is re-evaluated)."""

    def __init__(self, topic: str, options: ReadOptions | None = None, /, **changes: Any) -> None:
        """`options` (or `ReadOptions` built from `changes`), with `changes` applied."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if options is None:
            options = ReadOptions(**changes)
        elif changes:
            options = options.replace(**changes)
        self.options = options
        self.topic = topic
        self.remote = options.remote
        # the store the brokers name for a tiered topic is asked once, on the first read through
        # bootstrap_servers (remote_storage=False: never)
        self._discover = options.bootstrap_servers is not None and options.remote_storage is None
        self.columns = options.output_columns
        self._schema: pa.Schema | None = None
        self.decode_context = decode_context(options, topic)
        resolve_decoders(options.decode, self.decode_context)  # unknown names fail here, not at read time

    def __repr__(self) -> str:
        o = self.options
        where = f"data_dir={o.data_dir!r}" if o.data_dir is not None else \
            f"bootstrap_servers={o.bootstrap_servers!r}"
        return f"TopicScan({self.topic!r}, {where}, columns={self.columns})"

    def select(self, *columns: str) -> TopicScan:
        """The same scan returning only `columns`."""
        clone = object.__new__(TopicScan)
        clone.__dict__.update(self.__dict__)
        clone.columns = output_columns(list(columns), False)
        return clone

    def _source(self) -> TopicSource:
        if self._discover:
            self._discover = False  # asked once per scan object
            self.remote = _discovered_store(self.options.bootstrap_servers, self.topic,
                                            self.options.security)
        return open_read_source(self.options, self.remote)

    def transport(self) -> str:
        """How this scan reads: ``"flight"`` (Arrow Flight), ``"kafka"`` (the Kafka protocol, with the
        remote tier's store when it reads one), ``"data_dir"`` or ``"remote_storage"`` (no broker)."""
        from pylog.sdk.flight_source import FlightTopicSource

        source = self._source()
        try:
            if isinstance(source, FlightTopicSource):
                return "flight"
        finally:
            source.close()
        if self.options.bootstrap_servers is not None:
            return "kafka"
        return "data_dir" if self.options.data_dir is not None else "remote_storage"

    def plan(self) -> list[PartitionRange]:
        """The ``[start, end)`` offsets each partition would be read over, resolved now."""
        source = self._source()
        try:
            return self._plan(source)
        finally:
            source.close()

    def _plan(self, source: TopicSource) -> list[PartitionRange]:
        chosen = self.options.partitions
        return resolve_ranges(source, self.topic, partitions=None if chosen is None else list(chosen),
                              **self.options.bounds())

    @property
    def schema(self) -> pa.Schema:
        """The output schema before decoding (decoded columns get their type from the data)."""
        if self._schema is None or self._schema.names != self.columns:
            schema = output_schema(self.columns)
            self._schema = as_views(schema.empty_table()).schema if self.options.binary_view else schema
        return self._schema

    def _source_batches(self) -> Iterator[tuple[PartitionRange, pa.RecordBatch]]:
        """(range, batch of the source columns this scan needs), in the order the source reads them;
        reads through the Kafka protocol report their progress (`pylog.sdk.progress`)."""
        source = self._source()
        try:
            ranges = self._plan(source)
            columns = [c for c in SOURCE_COLUMNS if c in self.columns]
            if self._views_out() and _reads_views(source):
                batches = source.read(ranges, columns, views=True)  # type: ignore[call-arg]
            else:
                batches = source.read(ranges, columns)
            if self.options.bootstrap_servers is None:
                yield from batches
                return
            total = sum(max(r.count, 0) for r in ranges)
            with progress_bar(self.options.progress, total=total, desc=f"reading {self.topic}") as bar:
                for r, batch in batches:
                    bar.update(batch.num_rows, batch.nbytes)
                    yield r, batch
        finally:
            source.close()

    def _raw_batches(self) -> Iterator[pa.RecordBatch]:
        pool = ConstantPool()
        for r, batch in self._source_batches():
            yield self._finish(r, batch, pool)

    def _views_out(self) -> bool:
        """Whether the source's batches go out with view columns (``binary_view``, no decoder:
        decoders take the binary types)."""
        return self.options.binary_view and not resolve_decoders(self.options.decode, self.decode_context)

    def _output_batches(self) -> Iterator[pa.RecordBatch]:
        """The decoders' input: `_raw_batches`, as views when they go out so."""
        if self._views_out():
            return (as_views(b) for b in self._raw_batches())
        return self._raw_batches()

    def _finish(self, r: PartitionRange, batch: pa.RecordBatch, pool: ConstantPool) -> pa.RecordBatch:
        batch = as_instants(batch)
        if "topic" not in self.columns and "partition" not in self.columns:
            return batch.select(self.columns)
        n = batch.num_rows
        for i, field in enumerate(self.schema):
            if field.name in ("topic", "partition"):
                # add_column, not RecordBatch.from_arrays: validation would fault in a page of the
                # mapped message's offsets
                batch = batch.add_column(i, field, pool.take(getattr(r, field.name), n))
        return batch if batch.schema.names == self.columns else batch.select(self.columns)

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        """A stream of record batches, read as it is consumed."""
        batches = self._output_batches()
        decoders = resolve_decoders(self.options.decode, self.decode_context)
        if not decoders:
            return pa.RecordBatchReader.from_batches(self.schema, batches)
        views = as_views if self.options.binary_view else _same
        decoded = (views(apply_decoders(b, decoders)) for b in batches)
        first = next(decoded, None)
        if first is None:
            empty = views(apply_decoders(_empty_batch(output_schema(self.columns)), decoders))
            return pa.RecordBatchReader.from_batches(empty.schema, iter(()))
        return pa.RecordBatchReader.from_batches(first.schema, _chain(first, decoded))

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Record batches as they are read (the iterator form of `to_arrow_batch_reader`)."""
        return iter(self.to_arrow_batch_reader())

    def to_arrow(self, *, binary_view: bool | None = None) -> pa.Table:
        """All records as one ``pyarrow.Table`` (decoders see the whole column, so a JSON schema is
        inferred from every record). ``binary_view`` (default: the scan's option): ``key`` and
        ``value`` as ``binary_view`` and headers as ``list<struct<key: string_view, value:
        binary_view>>``, which format 2 segments are read as without copying their values (other
        sources' are converted)."""
        if binary_view is None:
            binary_view = self.options.binary_view
        decoders = resolve_decoders(self.options.decode, self.decode_context)
        table = self._to_arrow(views=binary_view and not decoders)
        if decoders:
            table = apply_decoders(table, decoders)
        return as_views(table) if binary_view else table

    def _to_arrow(self, views: bool) -> pa.Table:
        """`to_arrow` before decoding; with `views`, format 2 segments' view columns as they are
        (only where every range read has them: else all as the output schema)."""
        schema = self.schema
        source_columns = [c for c in SOURCE_COLUMNS if c in self.columns]
        stored = source_schema(source_columns)
        runs: list[tuple[PartitionRange, int]] = []  # consecutive rows of one range share constants
        if self.options.bootstrap_servers is None:  # a data directory: whole tables per range, zero-copy
            from pylog.sdk.dir_source import record_types

            source = self._source()
            try:
                plan = self._plan(source)
                tables = list(source.read_tables(plan, source_columns, views=views))  # type: ignore[attr-defined]
            finally:
                source.close()
            if any(not t.schema.equals(tables[0][1].schema) for _, t in tables):  # format 1 and 2
                tables = [(r, record_types(t)) for r, t in tables]
            runs = [(r, t.num_rows) for r, t in tables]
            table = as_instants(pa.concat_tables([t for _, t in tables]) if tables else stored.empty_table())
        else:
            batches: list[pa.RecordBatch] = []
            for r, batch in self._source_batches():
                batches.append(batch)
                if runs and runs[-1][0] is r:
                    runs[-1] = (r, runs[-1][1] + batch.num_rows)
                else:
                    runs.append((r, batch.num_rows))
            table = as_instants(pa.Table.from_batches(batches, schema=stored))
        pool = ConstantPool()
        for i, field in enumerate(schema):
            if field.name in ("topic", "partition"):
                chunks = [c for r, n in runs for c in pool.chunks(getattr(r, field.name), n)]
                # add_column, not Table.from_arrays: validating every chunk would fault in a page
                # of each mapped message's offsets
                table = table.add_column(i, field, pa.chunked_array(chunks, field.type))
        return table if table.schema.names == schema.names else table.select(schema.names)

    def to_pandas(self, **kwargs: Any) -> pandas.DataFrame:
        """``to_arrow().to_pandas(**kwargs)``."""
        require("pandas", "to_pandas()")
        return self.to_arrow().to_pandas(**kwargs)

    def to_polars(self) -> polars.DataFrame:
        """The records as a Polars DataFrame; Polars keeps binary as views, so format 2 segments'
        values go to it without a copy."""
        pl = require("polars", "to_polars()")
        return pl.from_arrow(self._to_arrow_for_views())

    def _to_arrow_for_views(self) -> pa.Table:
        """`to_arrow` for a consumer that reads view columns: format 2 values are not copied."""
        decoders = resolve_decoders(self.options.decode, self.decode_context)
        if decoders:
            return apply_decoders(self._to_arrow(views=False), decoders)
        return self._to_arrow(views=True)

    def to_duckdb(self, table_name: str, connection: duckdb.DuckDBPyConnection | None = None
                  ) -> duckdb.DuckDBPyConnection:
        """Register the records as `table_name` (an Arrow-backed view) on `connection` (a new in-memory
        database by default) and return the connection: ``scan.to_duckdb("t").sql("select ...")``."""
        duckdb = require("duckdb", "to_duckdb()")
        con = connection if connection is not None else duckdb.connect()
        views = _duckdb_reads_views(duckdb.__version__)
        con.register(table_name, self._to_arrow_for_views() if views else self.to_arrow(binary_view=False))
        return con

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.to_arrow_batch_reader().__arrow_c_stream__(requested_schema)


def _duckdb_reads_views(version: str) -> bool:
    """Whether this DuckDB scans Arrow binary_view / string_view columns (1.4 on)."""
    major, minor = (int(p) if p.isdigit() else 0 for p in [*version.split("."), "0"][:2])
    return (major, minor) >= (1, 4)


def as_views(table: T) -> T:
    """`table` (or batch) with binary ``key`` / ``value`` and ``headers`` columns as their view
    types (values not copied: a view per value over the same data)."""
    from pylog.storage.onecopy import HEADERS_V2_TYPE

    views = {"key": pa.binary_view(), "value": pa.binary_view(), "headers": HEADERS_V2_TYPE}
    for i, field in enumerate(table.schema):
        view = views.get(field.name)
        if view is not None and field.type == OUTPUT_FIELDS[field.name]:
            table = table.set_column(i, field.with_type(view), table.column(i).cast(view))
    return table


def _discovered_store(bootstrap_servers: Any, topic: str, security: Any) -> RemoteStorageSpec | None:
    """The store a tiered topic's brokers name, if this client can reach it; else None (the scan
    then reads everything through Kafka, as any client would)."""
    return _discovered_tier(bootstrap_servers, topic, security)[1]


def _discovered_tier(bootstrap_servers: Any, topic: str, security: Any
                     ) -> tuple[bool, RemoteStorageSpec | None]:
    """(whether the topic has a remote tier, its store if this client can reach it); (False, None)
    when the brokers do not say."""
    from pylog.sdk.client import KafkaError
    from pylog.sdk.remote_source import reachable, remote_tier_of
    from pylog.storage.remote_store import RemoteStorageError

    try:
        tiered, spec = remote_tier_of(bootstrap_servers, topic, security)
        return tiered, spec if spec is not None and reachable(spec) else None
    except (KafkaError, RemoteStorageError, OSError, ValueError):
        return False, None


def _reads_views(source: TopicSource) -> bool:
    """Whether `source` hands format 2 view columns over as they are when asked (`views=True`)."""
    from pylog.sdk.dir_source import DirTopicSource

    return isinstance(source, DirTopicSource)


def _same(batch: T) -> T:
    return batch


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    schema = first.schema
    for b in rest:
        yield b if b.schema.equals(schema) else b.cast(schema)
