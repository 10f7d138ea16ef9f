"""Protobuf wire-format payloads -> Arrow structs, through the protobuf runtime (per record: the
protobuf library parses one message at a time; measured in bench/bench_registry.py).

The message indexes after the schema id pick the message type (``[0]``: the file's first message).
Scalars map to Arrow's types, enums to their names, repeated fields to lists, messages to structs,
``google.protobuf.Timestamp`` to timestamp[us, UTC].
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pyarrow as pa
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from pylog.schema_registry.wire import HEADER_SIZE

_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: pa.float64(),
    FieldDescriptor.TYPE_FLOAT: pa.float32(),
    FieldDescriptor.TYPE_INT64: pa.int64(),
    FieldDescriptor.TYPE_UINT64: pa.uint64(),
    FieldDescriptor.TYPE_INT32: pa.int32(),
    FieldDescriptor.TYPE_FIXED64: pa.uint64(),
    FieldDescriptor.TYPE_FIXED32: pa.uint32(),
    FieldDescriptor.TYPE_BOOL: pa.bool_(),
    FieldDescriptor.TYPE_STRING: pa.string(),
    FieldDescriptor.TYPE_BYTES: pa.binary(),
    FieldDescriptor.TYPE_UINT32: pa.uint32(),
    FieldDescriptor.TYPE_SFIXED32: pa.int32(),
    FieldDescriptor.TYPE_SFIXED64: pa.int64(),
    FieldDescriptor.TYPE_SINT32: pa.int32(),
    FieldDescriptor.TYPE_SINT64: pa.int64(),
    FieldDescriptor.TYPE_ENUM: pa.string(),
}
_TIMESTAMP = "google.protobuf.Timestamp"


def _is_repeated(f: FieldDescriptor) -> bool:
    rep = getattr(f, "is_repeated", None)
    return bool(rep) if rep is not None else f.label == FieldDescriptor.LABEL_REPEATED


def arrow_type(d: Descriptor, depth: int = 0) -> pa.DataType:
    fields = []
    for f in d.fields:
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            if f.message_type.full_name == _TIMESTAMP:
                t: pa.DataType = pa.timestamp("us", tz="UTC")
            elif f.message_type.GetOptions().map_entry:
                k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
                fields.append(
                    pa.field(f.name, pa.map_(_SCALARS.get(k.type, pa.string()), _field_type(v, depth)))
                )
                continue
            else:
                t = arrow_type(f.message_type, depth + 1) if depth < 16 else pa.string()
        else:
            t = _SCALARS[f.type]
        fields.append(pa.field(f.name, pa.list_(t) if _is_repeated(f) else t))
    return pa.struct(fields)


def _field_type(f: FieldDescriptor, depth: int) -> pa.DataType:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return arrow_type(f.message_type, depth + 1)
    return _SCALARS[f.type]


def _value(f: FieldDescriptor, v: Any) -> Any:
    if f.type == FieldDescriptor.TYPE_ENUM:
        ev = f.enum_type.values_by_number.get(v)
        return ev.name if ev is not None else str(v)
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        if f.message_type.full_name == _TIMESTAMP:
            return datetime.datetime.fromtimestamp(v.seconds + v.nanos / 1e9, datetime.timezone.utc)
        return to_py(v)
    return v


def to_py(msg: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in msg.DESCRIPTOR.fields:
        v = getattr(msg, f.name)
        if f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            out[f.name] = [(k, _value(vf, x)) for k, x in v.items()]
        elif _is_repeated(f):
            out[f.name] = [_value(f, x) for x in v]
        elif f.type == FieldDescriptor.TYPE_MESSAGE and not msg.HasField(f.name):
            out[f.name] = None
        else:
            out[f.name] = _value(f, v)
    return out


def _indexes(buf: bytes, pos: int) -> tuple[list[int], int]:
    def varint(p: int) -> tuple[int, int]:
        v = shift = 0
        while True:
            b = buf[p]
            p += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return (v >> 1) ^ -(v & 1), p
            shift += 7

    count, pos = varint(pos)
    if count == 0:
        return [0], pos
    out = []
    for _ in range(count):
        i, pos = varint(pos)
        out.append(i)
    return out, pos


def _descriptor(schema: Any, indexes: list[int]) -> Descriptor:
    fd = schema.pool().FindFileByName(schema.file.name)
    d = fd.message_types_by_name[schema.file.message_type[indexes[0]].name]
    for i in indexes[1:]:
        d = d.nested_types[i]
    return d


def decode(writer: Any, reader: Any, values: pa.Array, *, null_on_error: bool) -> pa.Array:
    """Payloads of one writer schema -> a struct of the message type (read with the writer's
    descriptor: protobuf is read field by number, so old and new messages share field names)."""
    from pylog.sdk.decoders import RecordDecodeError

    classes: dict[tuple[int, ...], Any] = {}
    rows: list[Any] = []
    arrow: pa.DataType | None = None
    for i, p in enumerate(values.to_pylist()):
        try:
            idx, pos = _indexes(p, HEADER_SIZE)
            key = tuple(idx)
            if key not in classes:
                d = _descriptor(writer, idx)
                classes[key] = message_factory.GetMessageClass(d)
                arrow = arrow or arrow_type(d)
            msg = classes[key]()
            msg.ParseFromString(p[pos:])
            rows.append(to_py(msg))
        except Exception as exc:
            if not null_on_error:
                raise RecordDecodeError(i, f"the payload is not a valid Protobuf message ({exc})") from None
            rows.append(None)
    if arrow is None:
        arrow = arrow_type(_descriptor(writer, [0]))
    return pa.array(rows, arrow)


__all__ = ["arrow_type", "decode", "np"]
