"""The columns of a topic's Iceberg table, and Arrow data made to fit them.

Two layouts. ``kafka``: the record as Kafka has it, ``key, value, topic, partition, offset,
timestamp, headers`` (key and value as bytes). ``registry``: the fields of the value, decoded from
the Schema Registry wire format, as top-level columns, followed by the record's Kafka columns under
a ``kafka_`` prefix (``kafka_key, kafka_topic, ..., kafka_headers``) so value fields of any name fit.
A dead-letter table (``<table>~dlq``) holds the records of a registry table that did not decode:
the ``kafka`` layout plus ``error``.

Iceberg has no unsigned integers, no dictionary encoding and microsecond timestamps, so `conform`
turns Arrow data into what Iceberg stores (dictionary -> its values, uint -> a wider int, time and
timestamps -> microseconds, timestamps in UTC) and into the column order and types of a table's
current schema (columns the data lacks are null: a field a later schema version dropped).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pylog.sdk.constant import string_column

KAFKA = "kafka"
REGISTRY = "registry"
AUTO = "auto"
LAYOUTS = (AUTO, KAFKA, REGISTRY)
PREFIX = "kafka_"
DLQ_SUFFIX = "~dlq"
TIMESTAMP = pa.timestamp("us", tz="UTC")
HEADERS = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
KAFKA_FIELDS = (
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP),
    pa.field("headers", HEADERS),
)
METADATA = ("key", "topic", "partition", "offset", "timestamp", "headers")
KAFKA_SCHEMA = pa.schema(KAFKA_FIELDS)
DLQ_SCHEMA = pa.schema([*KAFKA_FIELDS, pa.field("error", pa.string())])


class LayoutError(ValueError):
    """The value's fields cannot be columns of the table (a name clash)."""


def column(layout: str, name: str) -> str:
    """The table column holding Kafka's `name` (key, partition, offset, timestamp, ...)."""
    return PREFIX + name if layout == REGISTRY else name


def kafka_rows(records: pa.Table, topic: str) -> pa.Table:
    """Fetched records (offset, timestamp, key, value, headers, partition) in the ``kafka`` layout."""
    n = records.num_rows
    arrays = {
        "key": records.column("key"),
        "value": records.column("value"),
        "topic": string_column(topic, n),
        "partition": records.column("partition"),
        "offset": records.column("offset"),
        "timestamp": records.column("timestamp"),
        "headers": records.column("headers"),
    }
    return conform(pa.table(arrays), KAFKA_SCHEMA)


def dlq_rows(records: pa.Table, topic: str, errors: Sequence[str]) -> pa.Table:
    table = kafka_rows(records, topic)
    return table.append_column("error", pa.array(list(errors), pa.string()))


def registry_rows(records: pa.Table, decoded: pa.Array | pa.ChunkedArray, topic: str) -> pa.Table:
    """Decoded values as columns, then the Kafka columns with the ``kafka_`` prefix."""
    kafka = kafka_rows(records, topic)
    if isinstance(decoded, pa.ChunkedArray):
        decoded = decoded.combine_chunks()
    if pa.types.is_struct(decoded.type):
        names = [decoded.type.field(i).name for i in range(decoded.type.num_fields)]
        clash = sorted(set(names) & {PREFIX + m for m in METADATA})
        if clash:
            raise LayoutError(f"value fields {clash} clash with the Kafka columns of the registry layout; "
                              "set pylog.iceberg.layout=kafka for this topic")
        values = decoded.flatten()
        if decoded.null_count:  # a null record (a tombstone) has null fields
            valid = decoded.is_valid()
            values = [pc.if_else(valid, v, pa.nulls(len(v), v.type)) for v in values]
        table = pa.table(dict(zip(names, values)))
    else:
        table = pa.table({"value": decoded})
    for name in METADATA:
        table = table.append_column(PREFIX + name, kafka.column(name))
    return conform(table)


def iceberg_type(t: pa.DataType) -> pa.DataType:
    """The Arrow type Iceberg can store for `t`."""
    if pa.types.is_dictionary(t):
        return iceberg_type(t.value_type)
    if pa.types.is_uint8(t) or pa.types.is_uint16(t) or pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()
    if pa.types.is_uint32(t) or pa.types.is_uint64(t):
        return pa.int64()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_timestamp(t):
        return TIMESTAMP if t.tz is not None else pa.timestamp("us")
    if pa.types.is_time(t):
        return pa.time64("us")
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, iceberg_type(f.type)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.list_(pa.field(t.value_field.name, iceberg_type(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(iceberg_type(t.key_type), iceberg_type(t.item_type))
    return t


def conform(table: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
    """`table` with Iceberg-storable types, every field nullable; with `schema`, exactly its columns in
    its order and types (missing columns null)."""
    if schema is None:
        fields = [pa.field(f.name, iceberg_type(f.type)) for f in table.schema]
        schema = pa.schema(fields)
    arrays = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            col_type = iceberg_type(col.type) if col.type != f.type else f.type
            if col.type != col_type:
                col = col.cast(col_type)
            if col.type != f.type:
                col = col.cast(f.type)
            arrays.append(col)
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    nullable = pa.schema([pa.field(f.name, f.type, nullable=True) for f in schema])
    return pa.Table.from_arrays(arrays, schema=nullable)
