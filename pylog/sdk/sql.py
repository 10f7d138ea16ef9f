"""`sql`: DuckDB SQL over topics, reading only the part of each topic a query can use.

    pylog.sql("select key, count(*) from orders where timestamp > now() - interval 1 hour group by 1",
              bootstrap_servers="localhost:9092").pl()

Every table name of the query that is a topic of the source becomes a relation over `scan_topic`
(columns ``key, value, topic, partition, offset, timestamp, timestampType, headers``; ``timestamp``
is ``TIMESTAMP WITH TIME ZONE``, UTC). Such a relation is a ``pyarrow.dataset.Dataset`` to DuckDB,
so DuckDB's optimizer folds constants (``now() - interval 1 hour``), pushes predicates through
joins and subqueries, and hands each topic scan the projection and filter it may apply. The filter
is turned into read bounds by asking pyarrow's own guarantee simplification which bounds make it
unsatisfiable (the way pyarrow prunes partitions of a dataset): the largest ``T`` such that no row
with ``timestamp < T`` passes becomes a starting timestamp (ListOffsets / the time index: segments
older than ``T`` are never opened), likewise offset bounds and the partitions that can match.
An upper bound on ``timestamp`` is not pushed down: Kafka timestamps need not grow with offsets,
so it cannot end a read early. The filter itself is then applied to what was read.

``decode`` makes ``key`` / ``value`` typed (``"registry"``, ``"json"``, ...) for every topic, or per
topic with ``{"payments": "registry"}``; registry records become structs whose fields are queried
as ``value.amount``. A relation's type is fixed before the query runs: Avro registry columns take
the subject's latest schema; other decoders the type of the newest records (`SAMPLE_RECORDS`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from pylog._extras import require
from pylog.sdk.decoders import DecodeSpec, apply_decoders, resolve_decoders
from pylog.sdk.offsets import UnknownTopicError
from pylog.sdk.options import ReadOptions
from pylog.sdk.scan import TopicScan, decode_context, open_source
from pylog.sdk.schema import DEFAULT_COLUMNS, TIMESTAMP_TYPE, output_schema
from pylog.sdk.table import read_retrying

if TYPE_CHECKING:
    import duckdb

TIMESTAMP = TIMESTAMP_TYPE  # UTC instants, as every SDK read returns them
COLUMNS = (*DEFAULT_COLUMNS, "headers")
SAMPLE_RECORDS = 1000
_LONG_MAX = 2**63 - 1
_TS_RANGE = (-(2**62), 2**62)


# --- filter -> read bounds ------------------------------------------------------------------------


class Bounds:
    """What a scan filter allows: partitions, ``[offset_start, offset_end)`` and a first timestamp."""

    def __init__(self, filter_: pa.compute.Expression | None, schema: pa.Schema,
                 partitions: Sequence[int]) -> None:
        self.filter, self.schema = filter_, schema
        self.partitions = [p for p in partitions if self._possible(pa.compute.field("partition") == p)]
        self.offset_start = self._lower("offset", 0, _LONG_MAX, pa.int64())
        self.offset_end = self._upper("offset", 0, _LONG_MAX, pa.int64())
        self.timestamp_start = self._lower("timestamp", *_TS_RANGE, schema.field("timestamp").type)

    def _possible(self, guarantee: pa.compute.Expression) -> bool:
        """Whether a row satisfying `guarantee` may pass the filter (pyarrow's fragment pruning)."""
        if self.filter is None:
            return True
        probe = ds.FileSystemDataset.from_paths(["/pylog-bounds-probe"], schema=self.schema,
                                                format=ds.IpcFileFormat(), filesystem=pafs.LocalFileSystem(),
                                                partitions=[guarantee])
        return bool(list(probe.get_fragments(filter=self.filter)))

    def _lower(self, column: str, lo: int, hi: int, type_: pa.DataType) -> int | None:
        """The largest v in (lo, hi] such that no row with ``column < v`` passes; None when there is none."""
        def never_below(v: int) -> bool:
            return not self._possible(pa.compute.field(column) < _scalar(v, type_))

        a, b = lo + 1, hi
        if not never_below(a):
            return None
        if never_below(b):
            return b
        while b - a > 1:  # never_below(a) holds, never_below(b) does not
            mid = (a + b) // 2
            a, b = (mid, b) if never_below(mid) else (a, mid)
        return a

    def _upper(self, column: str, lo: int, hi: int, type_: pa.DataType) -> int | None:
        """The smallest v in [lo, hi] such that no row with ``column >= v`` passes; None when there is
        none."""
        def never_from(v: int) -> bool:
            return not self._possible(pa.compute.field(column) >= _scalar(v, type_))

        a, b = lo, hi
        if not never_from(b):
            return None
        if never_from(a):
            return a
        while b - a > 1:  # never_from(b) holds, never_from(a) does not
            mid = (a + b) // 2
            a, b = (a, mid) if never_from(mid) else (mid, b)
        return b


def _scalar(value: int, type_: pa.DataType) -> pa.Scalar:
    return pa.scalar(value, pa.int64()).cast(type_)


# --- a topic as a DuckDB relation -----------------------------------------------------------------


class TopicDataset(ds.Dataset):
    """A topic as DuckDB's Arrow scan sees a dataset: a schema, and ``scanner(columns, filter)``, which
    reads only what the filter's bounds allow (see the module doc). Not a general pyarrow dataset:
    only `schema` and `scanner` work."""

    def __init__(self, topic: str, options: ReadOptions) -> None:  # no super().__init__: see class doc
        self.topic = topic
        self.options = options.replace(decode=None)  # the scans read raw bytes, decoded here
        self.decode = options.decode
        self.decode_context = decode_context(options, topic)
        self.reads: list[tuple[dict[int, int], dict[int, int]]] = []  # (starts, ends) of each scan
        self._schema = self._decoded_schema()

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def __repr__(self) -> str:
        return f"TopicDataset({self.topic!r})"

    def _decoders(self) -> dict[str, Any]:
        return resolve_decoders(self.decode, self.decode_context)

    def _decoded_schema(self) -> pa.Schema:
        schema = output_schema(COLUMNS)
        schema = schema.set(schema.get_field_index("timestamp"), pa.field("timestamp", TIMESTAMP))
        decoders = self._decoders()
        for column, decoder in decoders.items():
            type_ = _pinned_registry_type(decoder, self.topic, column)
            if type_ is None:
                type_ = self._sampled_type(column, decoder)
            schema = schema.set(schema.get_field_index(column), pa.field(column, type_))
        return schema

    def _sampled_type(self, column: str, decoder: Any) -> pa.DataType:
        plan = TopicScan(self.topic, self.options).plan()
        per_partition = max(1, SAMPLE_RECORDS // max(len(plan), 1))
        starts = {str(r.partition): max(r.start, r.end - per_partition) for r in plan}
        ends = {str(r.partition): r.end for r in plan}
        sample = TopicScan(self.topic, self.options, starting_offsets={self.topic: starts},
                           ending_offsets={self.topic: ends}, columns=[column]).to_arrow()
        return apply_decoders(sample.combine_chunks(), {column: decoder}).schema.field(column).type

    def scanner(self, columns: Sequence[str] | None = None, filter: Any = None,
                **kwargs: Any) -> ds.Scanner:
        table = self._read(filter)
        return ds.dataset(table).scanner(columns=list(columns) if columns is not None else None,
                                         filter=filter, **kwargs)

    def _read(self, filter_: Any) -> pa.Table:
        plan = TopicScan(self.topic, self.options).plan()
        bounds = Bounds(filter_, self._schema, [r.partition for r in plan])
        kept = [r for r in plan if r.partition in bounds.partitions]
        starts = {r.partition: r.start for r in kept}
        if bounds.timestamp_start is not None and kept:
            by_time = TopicScan(self.topic, self.options, partitions=[r.partition for r in kept],
                                starting_timestamp=bounds.timestamp_start).plan()
            starts.update({r.partition: max(starts[r.partition], r.start) for r in by_time})
        ends = {r.partition: r.end for r in kept}
        for p in starts:
            if bounds.offset_end is not None:
                ends[p] = min(ends[p], max(bounds.offset_end, starts[p]))
            if bounds.offset_start is not None:
                starts[p] = min(max(starts[p], bounds.offset_start), ends[p])
            starts[p] = min(starts[p], ends[p])
        self.reads.append((dict(starts), dict(ends)))
        if not kept:
            return self._schema.empty_table()
        scan = TopicScan(self.topic, self.options, partitions=list(starts),
                         starting_offsets={self.topic: {str(p): o for p, o in starts.items()}},
                         ending_offsets={self.topic: {str(p): o for p, o in ends.items()}},
                         columns=list(COLUMNS))
        table = read_retrying(scan)
        table = table.set_column(table.schema.get_field_index("timestamp"), pa.field("timestamp", TIMESTAMP),
                                 table.column("timestamp").cast(TIMESTAMP))
        decoders = self._decoders()
        needed = decoders
        if needed:
            table = apply_decoders(table.combine_chunks(), needed)
            for column in needed:
                want = self._schema.field(column).type
                got = table.schema.field(column).type
                if got != want:
                    try:
                        cast = table.column(column).cast(want)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                        raise ValueError(
                            f"the decoded {column} of topic {self.topic!r} has type {got}, not the {want} "
                            f"the query was planned with ({exc})") from None
                    table = table.set_column(table.schema.get_field_index(column), column, cast)
        return table


def _pinned_registry_type(decoder: Any, topic: str, column: str) -> pa.DataType | None:
    """For a registry decoder of Avro records: the subject's latest schema becomes its reader (so
    every scan decodes to one type) and that type is returned; None otherwise."""
    from pylog.sdk.registry import RegistryDecoder

    if not isinstance(decoder, RegistryDecoder):
        return None
    from pylog.schema_registry import avro_arrow, formats

    latest = decoder.schemas.latest(f"{topic}-{column}")
    if latest is None or latest[1].schema_type != formats.AVRO:
        return None
    schema_id, schema = latest
    decoder.reader = formats.parse(schema.schema_type, schema.text,
                                   decoder.schemas.resolved_references(schema.references))
    decoder._reader_id = schema_id
    return avro_arrow.reader_struct_type(decoder.reader.parsed)


# --- the query -------------------------------------------------------------------------------------


def table_names(query: str) -> list[str]:
    """The unqualified table names a query reads (DuckDB's parser)."""
    duckdb = require("duckdb", "pylog.sql")
    try:
        return sorted(duckdb.get_table_names(query))
    except duckdb.Error:
        pass
    tree = json.loads(duckdb.execute("select json_serialize_sql(?)", [query]).fetchone()[0])
    if tree.get("error"):
        raise ValueError(f"pylog.sql: {tree.get('error_message', 'the query does not parse')}")
    return sorted({t["table_name"] for t in base_tables(tree) if not t.get("schema_name")})


def base_tables(node: Any) -> Iterator[dict[str, Any]]:
    """The table references (``BASE_TABLE`` nodes) of a query tree from DuckDB's
    ``json_serialize_sql``, at any depth."""
    if isinstance(node, dict):
        if node.get("type") == "BASE_TABLE":
            yield node
        for v in node.values():
            yield from base_tables(v)
    elif isinstance(node, list):
        for v in node:
            yield from base_tables(v)


def _decode_for(decode: Any, topic: str, names: Sequence[str]) -> DecodeSpec:
    if isinstance(decode, Mapping) and not set(decode) <= {"key", "value"}:
        unknown = sorted(set(decode) - set(names))
        if unknown:
            raise ValueError(f"decode names topic(s) {unknown} the query does not read ({sorted(names)})")
        return decode.get(topic)
    return decode


def sql(
    query: str,
    *,
    data_dir: Any = None,
    bootstrap_servers: Any = None,
    decode: DecodeSpec | Mapping[str, DecodeSpec] = None,
    schema_registry_url: str | None = None,
    on_decode_error: str = "raise",
    connection: duckdb.DuckDBPyConnection | None = None,
    fetch_options: Any = None,
    security: Any = None,
) -> duckdb.DuckDBPyRelation:
    """Run DuckDB SQL over the topics a query names (see the module doc); returns a DuckDB relation
    (``.pl()``, ``.df()``, ``.arrow()``, ``.fetchall()``, ``.show()``). Exactly one of ``data_dir`` /
    ``bootstrap_servers``; ``connection``: a DuckDB connection to run on (its own tables win over
    topics of the same name; a new in-memory one with ``TimeZone=UTC`` by default)."""
    duckdb = require("duckdb", "pylog.sql")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("pylog.sql needs a query")
    options = ReadOptions.from_arguments({**locals(), "progress": False})
    probe = open_source(options.data_dir, options.bootstrap_servers, options.fetch)
    try:
        names = table_names(query)
        topics = []
        for name in names:
            try:
                probe.partitions(name)
            except UnknownTopicError:
                continue
            topics.append(name)
    finally:
        probe.close()
    if not topics:
        raise UnknownTopicError(f"pylog.sql: the query reads none of the topics of {options.where()} "
                                f"(it names {', '.join(map(repr, names)) or 'no table'})")
    con = connection if connection is not None else duckdb.connect()
    if connection is None:
        con.execute("SET TimeZone = 'UTC'")
    own = {r[0] for r in con.execute("select table_name from duckdb_tables()").fetchall()}
    for topic in topics:
        if topic in own:
            continue
        con.register(topic, TopicDataset(topic, options.replace(decode=_decode_for(decode, topic, topics))))
    return con.sql(query)
