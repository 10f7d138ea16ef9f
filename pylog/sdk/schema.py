"""The columns a read returns: Spark's Kafka source schema, in Arrow types."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

# Kafka timestamps are instants (milliseconds since the Unix epoch, UTC), as Spark's TimestampType
# is: reads return them time-zone aware, so DuckDB, Polars, pandas and Spark all see the same instant.
# The segments store the same numbers as naive ``timestamp[ms]`` (storage/FORMAT.md); `as_instants`
# relabels them without a copy.
TIMESTAMP_TYPE = pa.timestamp("ms", tz="UTC")
STORED_TIMESTAMP_TYPE = pa.timestamp("ms")

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

OUTPUT_FIELDS: dict[str, pa.DataType] = {
    "key": pa.binary(),
    "value": pa.binary(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "offset": pa.int64(),
    "timestamp": TIMESTAMP_TYPE,
    "timestampType": pa.int32(),
    "headers": HEADER_TYPE,
}
DEFAULT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")

# the columns of the stored / fetched record batches (storage's and the codec's RECORD_SCHEMA)
RECORD_COLUMNS = ("offset", "timestamp", "key", "value", "headers")


def output_columns(columns: Sequence[str] | None, include_headers: bool) -> list[str]:
    """The ordered output column names for a read; raises on names Spark's Kafka source does not have."""
    if columns is None:
        return [*DEFAULT_COLUMNS, "headers"] if include_headers else list(DEFAULT_COLUMNS)
    if isinstance(columns, str):
        columns = [columns]
    out = list(dict.fromkeys(columns))
    unknown = [c for c in out if c not in OUTPUT_FIELDS]
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}; a topic read has {list(OUTPUT_FIELDS)}")
    if include_headers and "headers" not in out:
        out.append("headers")
    return out


def output_schema(columns: Sequence[str]) -> pa.Schema:
    return pa.schema([pa.field(c, OUTPUT_FIELDS[c]) for c in columns])


def source_schema(columns: Sequence[str]) -> pa.Schema:
    """The columns as a source yields them, before `as_instants`: timestamps as stored (naive)."""
    return pa.schema([pa.field(c, STORED_TIMESTAMP_TYPE if c == "timestamp" else OUTPUT_FIELDS[c])
                      for c in columns])


def as_instants(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch | pa.Table:
    """`data` with its stored ``timestamp`` column (naive epoch milliseconds) typed as UTC instants;
    the values are not copied (an Arrow view of the same buffers)."""
    i = data.schema.get_field_index("timestamp")
    if i < 0 or data.schema.field(i).type == TIMESTAMP_TYPE:
        return data
    column = data.column(i)
    if isinstance(column, pa.ChunkedArray):
        column = pa.chunked_array([c.view(TIMESTAMP_TYPE) for c in column.chunks], TIMESTAMP_TYPE)
    else:
        column = column.view(TIMESTAMP_TYPE)
    return data.set_column(i, pa.field("timestamp", TIMESTAMP_TYPE), column)
