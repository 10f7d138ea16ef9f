"""Avro -> Arrow, many payloads at a time.

Types: records become structs, ``[null, T]`` unions nullable fields, arrays lists, maps
``map<string, V>``; logical types map to Arrow's (timestamp-millis / -micros -> timestamp[ms / us,
UTC], local-timestamp-* -> timestamp without a zone, date -> date32, time-millis -> time32[ms],
time-micros -> time64[us], decimal -> decimal128(precision, scale), uuid -> string) and enums to
dictionary-encoded strings over the reader's symbols.

Decoding: a writer schema whose record fields are all primitives, enums, fixed or ``[null, T]`` of
those (the common event shape) is decoded by the ``_cavro`` accelerator into column buffers, one
call per batch, then resolved to the reader schema column-wise (promotions by cast, missing fields
from their default, enum symbols re-indexed). Any other shape goes record by record through
fastavro's schema-resolving reader (measured in bench/bench_registry.py).
"""

from __future__ import annotations

import io
import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.schema_registry import _pyavro
from pylog.schema_registry.formats.avro import AvroSchema

try:
    if os.environ.get("PYLOG_PURE_PYTHON"):
        raise ImportError("pure Python requested")
    from pylog.schema_registry import _cavro as _impl  # type: ignore[attr-defined]
except ImportError:  # no compiler at install time
    _impl = _pyavro
C_IMPL = _impl if _impl is not _pyavro else None
PYTHON_IMPL = _pyavro

K_NULL, K_BOOLEAN, K_INT, K_LONG, K_FLOAT, K_DOUBLE, K_STRING, K_ENUM, K_FIXED = range(9)
_KINDS = {
    "null": K_NULL,
    "boolean": K_BOOLEAN,
    "int": K_INT,
    "long": K_LONG,
    "float": K_FLOAT,
    "double": K_DOUBLE,
    "string": K_STRING,
    "bytes": K_STRING,
}
_PRIMITIVE_ARROW = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


def _deref(s: Any, named: dict[str, Any]) -> Any:
    while isinstance(s, str) and s not in _PRIMITIVE_ARROW:
        s = named[s]
    if isinstance(s, dict) and isinstance(s.get("type"), (dict, list)):
        inner = _deref(s["type"], named)
        if "logicalType" in s and isinstance(inner, str):
            return {**s, "type": inner}
        return inner
    if isinstance(s, dict) and "logicalType" not in s and s.get("type") in _PRIMITIVE_ARROW:
        return s["type"]
    return s


def _nullable_branch(s: Any, named: dict[str, Any]) -> tuple[Any, int] | None:
    """``[null, T]`` / ``[T, null]`` -> (T, index of null); other unions None."""
    if isinstance(s, list) and len(s) == 2:
        kinds = [_deref(b, named) for b in s]
        if kinds[0] == "null" and kinds[1] != "null":
            return kinds[1], 0
        if kinds[1] == "null" and kinds[0] != "null":
            return kinds[0], 1
    return None


def _logical(s: dict) -> pa.DataType | None:
    lt, base = s.get("logicalType"), s.get("type")
    if lt == "timestamp-millis" and base == "long":
        return pa.timestamp("ms", tz="UTC")
    if lt == "timestamp-micros" and base == "long":
        return pa.timestamp("us", tz="UTC")
    if lt == "local-timestamp-millis" and base == "long":
        return pa.timestamp("ms")
    if lt == "local-timestamp-micros" and base == "long":
        return pa.timestamp("us")
    if lt == "date" and base == "int":
        return pa.date32()
    if lt == "time-millis" and base == "int":
        return pa.time32("ms")
    if lt == "time-micros" and base == "long":
        return pa.time64("us")
    if lt == "uuid" and base == "string":
        return pa.string()
    if lt == "decimal" and base in ("bytes", "fixed") and "precision" in s:
        precision = int(s["precision"])
        if precision <= 38:
            return pa.decimal128(precision, int(s.get("scale", 0)))
    return None


def arrow_type(s: Any, named: dict[str, Any]) -> pa.DataType:
    s = _deref(s, named)
    if isinstance(s, str):
        return _PRIMITIVE_ARROW[s]
    if isinstance(s, list):
        nb = _nullable_branch(s, named)
        if nb is not None:
            return arrow_type(nb[0], named)
        return pa.string()  # other unions: the value as JSON text
    if "logicalType" in s:
        t = _logical(s)
        if t is not None:
            return t
        if s["type"] in _PRIMITIVE_ARROW:
            return _PRIMITIVE_ARROW[s["type"]]
    kind = s["type"]
    if kind in ("record", "error"):
        return pa.struct(
            [
                pa.field(f["name"], arrow_type(f["type"], named), nullable=_is_nullable(f["type"], named))
                for f in s["fields"]
            ]
        )
    if kind == "enum":
        return pa.dictionary(pa.int32(), pa.string())
    if kind == "array":
        return pa.list_(arrow_type(s["items"], named))
    if kind == "map":
        return pa.map_(pa.string(), arrow_type(s["values"], named))
    if kind == "fixed":
        return pa.binary(int(s["size"]))
    raise ValueError(f"unsupported Avro type {kind!r}")


def _is_nullable(s: Any, named: dict[str, Any]) -> bool:
    s = _deref(s, named)
    return s == "null" or isinstance(s, list)


def _flat_kind(s: Any, named: dict[str, Any]) -> tuple[int, int, Any] | None:
    """(kind, size, resolved type) of a field the accelerator can read, else None."""
    s = _deref(s, named)
    if isinstance(s, str):
        return _KINDS[s], 0, s
    if isinstance(s, dict):
        base = s["type"]
        if base in _KINDS:
            return _KINDS[base], 0, s
        if base == "enum":
            return K_ENUM, 0, s
        if base == "fixed":
            return K_FIXED, int(s["size"]), s
    return None


def flat_plan(schema: AvroSchema) -> list[tuple[str, int, int, int, Any]] | None:
    """[(field name, kind, null branch, size, resolved type)] when every field is flat."""
    s = _deref(schema.schema, schema.named)
    if not isinstance(s, dict) or s.get("type") not in ("record", "error"):
        return None
    plan = []
    for f in s["fields"]:
        t, nb = f["type"], -1
        branch = _nullable_branch(t, schema.named)
        if branch is not None:
            t, nb = branch
        elif isinstance(_deref(t, schema.named), list):
            return None
        k = _flat_kind(t, schema.named)
        if k is None:
            return None
        plan.append((f["name"], k[0], nb, k[1], k[2]))
    return plan


def _bitmap(valid: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _column(kind: int, size: int, t: Any, parts: tuple, n: int, nullable: bool) -> pa.Array:
    valid = np.frombuffer(parts[0], np.uint8, n).astype(bool)
    nulls = n - int(valid.sum()) if nullable else 0
    bitmap = _bitmap(valid) if nulls else None
    if kind == K_NULL:
        return pa.nulls(n)
    if kind == K_STRING:
        base = (
            pa.binary()
            if (t == "bytes" or (isinstance(t, dict) and t.get("type") == "bytes"))
            else pa.string()
        )
        arr = pa.Array.from_buffers(
            base, n, [bitmap, pa.py_buffer(parts[1]), pa.py_buffer(parts[2])], null_count=nulls
        )
        if isinstance(t, dict) and t.get("logicalType") == "decimal" and _logical(t) is not None:
            return _decimal_from_bytes(arr, _logical(t))
        return arr
    if kind == K_BOOLEAN:
        values = np.frombuffer(parts[1], np.uint8, n).astype(bool)
        return pa.array(values, pa.bool_(), mask=~valid if nulls else None)
    if kind == K_FIXED:
        arr = pa.Array.from_buffers(pa.binary(size), n, [bitmap, pa.py_buffer(parts[1])], null_count=nulls)
        if isinstance(t, dict) and t.get("logicalType") == "decimal" and _logical(t) is not None:
            return _decimal_from_bytes(arr, _logical(t))
        return arr
    width_type = {
        K_INT: pa.int32(),
        K_ENUM: pa.int32(),
        K_LONG: pa.int64(),
        K_FLOAT: pa.float32(),
        K_DOUBLE: pa.float64(),
    }[kind]
    arr = pa.Array.from_buffers(width_type, n, [bitmap, pa.py_buffer(parts[1])], null_count=nulls)
    if kind == K_ENUM:
        return pa.DictionaryArray.from_arrays(arr, pa.array(t["symbols"], pa.string()))
    if isinstance(t, dict) and "logicalType" in t:
        logical = _logical(t)
        if logical is not None and logical != pa.string():
            return (
                arr.view(logical)
                if pa.types.is_timestamp(logical) or pa.types.is_time(logical) or pa.types.is_date(logical)
                else arr.cast(logical)
            )
    return arr


def _decimal_from_bytes(arr: pa.Array, t: pa.Decimal128Type) -> pa.Array:
    """Big-endian two's complement (Avro's decimal) -> decimal128, without a per-value loop."""
    n = len(arr)
    if pa.types.is_fixed_size_binary(arr.type):
        size = arr.type.byte_width
        starts = np.arange(n, dtype=np.int64) * size
        lengths = np.full(n, size, np.int64)
        data = np.frombuffer(arr.buffers()[1], np.uint8)
    else:
        offs = np.frombuffer(arr.buffers()[1], np.int32, n + 1).astype(np.int64)
        starts, lengths = offs[:-1], offs[1:] - offs[:-1]
        buf = arr.buffers()[2]
        data = np.frombuffer(buf, np.uint8) if buf is not None else np.zeros(0, np.uint8)
    if (lengths > 16).any():
        raise ValueError("a decimal wider than 16 bytes does not fit decimal128")
    out = np.zeros((n, 16), np.uint8)
    has = lengths > 0
    negative = np.zeros(n, bool)
    negative[has] = data[starts[has]] >= 0x80
    out[negative] = 0xFF
    for width in np.unique(lengths[has]).tolist():
        rows = np.flatnonzero(lengths == width)
        gathered = data[starts[rows, None] + np.arange(width)]
        out[rows, :width] = gathered[:, ::-1]
    valid = arr.buffers()[0]
    return pa.Array.from_buffers(t, n, [valid, pa.py_buffer(out.tobytes())], null_count=arr.null_count)


class AvroDecodeError(ValueError):
    def __init__(self, row: int, reason: str) -> None:
        super().__init__(reason)
        self.row = row


def decode_flat(
    schema: AvroSchema,
    plan: list,
    data: pa.Buffer,
    offsets: np.ndarray,
    *,
    null_on_error: bool,
    impl: Any = None,
) -> tuple[dict[str, pa.Array], np.ndarray]:
    """Writer columns by field name and the rows that decoded. Raises AvroDecodeError(row) unless
    `null_on_error`."""
    mod = impl or _impl
    n = len(offsets) - 1
    fields = [(k, nb, size) for _name, k, nb, size, _t in plan]
    cols, row_ok, error_row = mod.decode_flat(fields, data, offsets.astype(np.int64), 5, null_on_error)
    if error_row >= 0:
        raise AvroDecodeError(
            int(error_row), "the payload does not match its Avro schema (truncated or a bad union branch)"
        )
    out = {}
    for (name, kind, nb, size, t), parts in zip(plan, cols):
        out[name] = _column(kind, size, t, parts, n, nullable=nb >= 0 or kind == K_NULL)
    return out, np.frombuffer(row_ok, np.uint8, n).astype(bool)


def _field_default(field: dict, t: pa.DataType, n: int) -> pa.Array:
    if "default" not in field or field["default"] is None:
        return pa.nulls(n, t)
    try:
        return pa.array([field["default"]] * n, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.nulls(n, t)


def _conform(arr: pa.Array, t: pa.DataType) -> pa.Array:
    if arr.type == t:
        return arr
    if pa.types.is_dictionary(t) and pa.types.is_dictionary(arr.type):
        return arr  # re-indexed by the caller
    return arr.cast(t)


def resolve_columns(
    columns: dict[str, pa.Array], row_ok: np.ndarray, reader: AvroSchema, n: int
) -> pa.StructArray:
    """Writer columns -> the reader record's struct (names / aliases, promotions, defaults, enums)."""
    rs = _deref(reader.schema, reader.named)
    struct_type = arrow_type(rs, reader.named)
    arrays = []
    for f, af in zip(rs["fields"], struct_type):
        names = [f["name"], *f.get("aliases", [])]
        src = next((columns[m] for m in names if m in columns), None)
        if src is None:
            arrays.append(_field_default(f, af.type, n))
            continue
        if pa.types.is_dictionary(af.type):
            symbols = _deref(f["type"], reader.named)
            branch = _nullable_branch(symbols, reader.named) if isinstance(symbols, list) else None
            symbols = _deref(branch[0], reader.named) if branch else symbols
            arrays.append(_reindex_enum(src, symbols))
            continue
        arrays.append(_conform(src, af.type))
    mask = pa.array(~row_ok) if not row_ok.all() else None
    return pa.StructArray.from_arrays(arrays, fields=list(struct_type), mask=mask)


def _reindex_enum(arr: pa.Array, reader_enum: dict) -> pa.Array:
    symbols = list(reader_enum["symbols"])
    if not pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_encode()
    writer_symbols = arr.dictionary.to_pylist()
    default = reader_enum.get("default")
    mapping = np.array(
        [
            symbols.index(s) if s in symbols else (symbols.index(default) if default in symbols else -1)
            for s in writer_symbols
        ]
        or [0],
        np.int32,
    )
    idx = arr.indices.to_numpy(zero_copy_only=False)
    valid = np.asarray(arr.is_valid())
    new = np.where(valid, mapping[np.where(valid, idx, 0).astype(np.int64)], 0)
    mask = ~valid | (new < 0)
    return pa.DictionaryArray.from_arrays(
        pa.array(np.maximum(new, 0), pa.int32(), mask=mask if mask.any() else None),
        pa.array(symbols, pa.string()),
    )


def _py(v: Any) -> Any:
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, dict):
        return {k: _py(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_py(x) for x in v]
    return v


def decode_records(
    writer: AvroSchema, reader: AvroSchema, payloads: Sequence[bytes | None], *, null_on_error: bool
) -> pa.Array:
    """Any schema, record by record through fastavro (the general path)."""
    import fastavro

    rtype = arrow_type(reader.schema, reader.named)
    out: list[Any] = []
    for i, p in enumerate(payloads):
        if p is None:
            out.append(None)
            continue
        try:
            rec = fastavro.schemaless_reader(io.BytesIO(p[5:]), writer.schema, reader.schema)
        except Exception as exc:
            if not null_on_error:
                raise AvroDecodeError(i, f"the payload does not match its Avro schema ({exc})") from None
            rec = None
        out.append(_py(rec))
    if isinstance(rtype, pa.DictionaryType):
        return pa.array(out, pa.string()).dictionary_encode()
    return pa.array(out, rtype)


def decode(
    writer: AvroSchema, reader: AvroSchema, values: pa.Array, *, null_on_error: bool, impl: Any = None
) -> pa.Array:
    """Wire-format payloads (all with this writer schema, none null) -> an array of the reader's type."""
    plan = flat_plan(writer)
    rs = _deref(reader.schema, reader.named)
    if plan is None or not isinstance(rs, dict) or rs.get("type") not in ("record", "error"):
        return decode_records(writer, reader, values.to_pylist(), null_on_error=null_on_error)
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset).astype(np.int64)
    data = values.buffers()[2] if values.buffers()[2] is not None else pa.py_buffer(b"")
    columns, ok = decode_flat(writer, plan, data, offsets, null_on_error=null_on_error, impl=impl)
    return resolve_columns(columns, ok, reader, n)


def reader_struct_type(reader: AvroSchema) -> pa.DataType:
    return arrow_type(reader.schema, reader.named)


def empty(reader: AvroSchema) -> pa.Array:
    return pa.array([], reader_struct_type(reader))


def nulls(reader: AvroSchema, n: int) -> pa.Array:
    return pa.nulls(n, reader_struct_type(reader))


__all__ = [
    "C_IMPL",
    "PYTHON_IMPL",
    "AvroDecodeError",
    "arrow_type",
    "decode",
    "empty",
    "flat_plan",
    "nulls",
    "pc",
]
