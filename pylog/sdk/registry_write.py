"""``write_topic(..., value_schema="registry")``: an Avro schema derived from the frame's Arrow
schema, registered (or found) under ``<topic>-value`` / ``<topic>-key``, and the rows written in the
Schema Registry wire format.

Arrow -> Avro: integers to int / long, floating to float / double, bool, string, binary to bytes,
timestamp[ms] to timestamp-millis (other units to timestamp-micros), date32 to date, decimal128 to
bytes decimal, structs to records, lists to arrays, maps to maps, dictionaries to their values;
nullable columns become ``["null", T]`` with a null default, so later frames with more columns stay
BACKWARD compatible. Encoding runs record by record through fastavro (bench/bench_registry.py's
encode table compares it with confluent-kafka's AvroSerializer).
"""

from __future__ import annotations

import io
import json
import re
import urllib.error
import urllib.parse
from typing import Any

import pyarrow as pa

from pylog.security.registry_client import RegistryCredentials

_NAME = re.compile(r"[^A-Za-z0-9_]")


def _name(text: str) -> str:
    out = _NAME.sub("_", text) or "record"
    return out if not out[0].isdigit() else f"_{out}"


def avro_type(t: pa.DataType, name: str) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "int" if (t.bit_width <= 32 and pa.types.is_signed_integer(t)) or t.bit_width < 32 else "long"
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    ):
        return "bytes"
    if pa.types.is_timestamp(t):
        logical = "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"
        if t.tz is None:
            logical = "local-" + logical
        return {"type": "long", "logicalType": logical}
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_dictionary(t):
        return avro_type(t.value_type, name)
    if pa.types.is_struct(t):
        return record_schema(t, name)
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(t.item_field, f"{name}_value")}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return {"type": "array", "items": _nullable(t.value_field, f"{name}_item")}
    raise ValueError(f"no Avro type for the Arrow type {t} (column {name})")


def _nullable(f: pa.Field, name: str) -> Any:
    t = avro_type(f.type, name)
    return ["null", t] if f.nullable else t


def record_schema(t: pa.StructType, name: str) -> dict[str, Any]:
    fields = []
    for f in t:
        field: dict[str, Any] = {"name": _name(f.name), "type": _nullable(f, f"{name}_{_name(f.name)}")}
        if f.nullable:
            field["default"] = None
        fields.append(field)
    return {"type": "record", "name": _name(name), "namespace": "pylog", "fields": fields}


def register(
    url: str, subject: str, schema: dict[str, Any], timeout_s: float = 30.0, security: Any = None
) -> int:
    """POST the schema under `subject` (the registry returns the existing id for a known schema).
    ``security``: Kafka client security settings, whose SASL user and TLS reach a secured registry."""
    q = urllib.parse.quote(subject, safe="")
    body = json.dumps({"schema": json.dumps(schema)}).encode()
    try:
        with RegistryCredentials.of(security).open(
            f"{url.rstrip('/')}/subjects/{q}/versions",
            data=body,
            method="POST",
            headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            timeout_s=timeout_s,
        ) as resp:
            return int(json.loads(resp.read())["id"])
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("message", exc.reason)
        except ValueError:
            message = exc.reason
        raise ValueError(
            f"the schema registry refused the schema for {subject} ({exc.code}): {message}"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        raise ConnectionError(f"schema registry at {url} is not reachable: {exc}") from None


def _physical(values: pa.Array, schema: Any) -> tuple[pa.Array, Any]:
    """Timestamp and date columns as the integers Avro stores, with their logical types dropped from
    the schema fastavro writes with (same bytes, no datetime objects on the way)."""

    def plain(arr: pa.Array, t: Any) -> tuple[pa.Array, Any]:
        if isinstance(t, list):
            branch = next((b for b in t if b != "null"), None)
            arr2, b2 = plain(arr, branch)
            return arr2, [b2 if b == branch else b for b in t]
        if isinstance(t, dict) and t.get("logicalType", "").endswith(
            ("timestamp-millis", "timestamp-micros")
        ):
            unit = "ms" if t["logicalType"].endswith("millis") else "us"
            return arr.cast(pa.timestamp(unit, arr.type.tz)).cast(pa.int64()), "long"
        if isinstance(t, dict) and t.get("logicalType") == "date":
            return arr.cast(pa.date32()).cast(pa.int32()), "int"
        return arr, t

    if pa.types.is_struct(values.type) and isinstance(schema, dict) and schema.get("type") == "record":
        arrays, fields = [], []
        for i, f in enumerate(schema["fields"]):
            arr, t = plain(values.field(i), f["type"])
            arrays.append(arr)
            fields.append({**f, "type": t})
        mask = values.is_null() if values.null_count else None
        return pa.StructArray.from_arrays(arrays, [f["name"] for f in fields], mask=mask), {
            **schema,
            "fields": fields,
        }
    return values, schema


def encode(values: pa.Array, schema: dict[str, Any], schema_id: int) -> pa.Array:
    """Rows of `values` -> wire-format Avro (nulls stay null: tombstones)."""
    import fastavro

    values, schema = _physical(values, schema)
    parsed = fastavro.parse_schema(schema)
    header = b"\x00" + schema_id.to_bytes(4, "big")
    write = fastavro.schemaless_writer
    out: list[bytes | None] = []
    buf = io.BytesIO()
    for row in values.to_pylist():
        if row is None:
            out.append(None)
            continue
        buf.seek(0)
        buf.truncate()
        buf.write(header)
        write(buf, parsed, row)
        out.append(buf.getvalue())
    return pa.array(out, pa.binary())


def framed(values: pa.Array, *, url: str, subject: str, name: str, security: Any = None) -> pa.Array:
    """Register the schema of `values` (with ``security``'s credentials, see `register`) and encode them."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    schema = record_schema(t, name) if pa.types.is_struct(t) else avro_type(t, name)
    if isinstance(schema, str):
        schema = {"type": schema}
    return encode(values, schema, register(url, subject, schema, security=security))
