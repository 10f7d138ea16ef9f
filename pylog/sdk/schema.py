"""The columns a read returns: Spark's Kafka source schema, in Arrow types."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

OUTPUT_FIELDS: dict[str, pa.DataType] = {
    "key": pa.binary(),
    "value": pa.binary(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "offset": pa.int64(),
    "timestamp": pa.timestamp("ms"),
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
