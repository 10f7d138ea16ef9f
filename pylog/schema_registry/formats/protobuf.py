"""Protobuf schemas as confluent-kafka sends them: a base64-encoded ``FileDescriptorProto``.

The descriptor (with its references, by import path) is loaded into a protobuf ``DescriptorPool``,
which validates it. Well-known imports (``google/protobuf/...``, ``google/type/...``,
``confluent/...``) resolve from the protobuf package. Compatibility follows the wire: a field keeps
its number and a type of the same wire-compatible group (Confluent's FIELD_KIND / FIELD_SCALAR
rules); the message a record is written with must still exist.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

from pylog.schema_registry.errors import SchemaParseError
from pylog.schema_registry.formats.parsed import PROTOBUF, ParsedSchema

_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_ENUM},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
    {F.TYPE_MESSAGE},
    {F.TYPE_GROUP},
    {F.TYPE_FLOAT},
    {F.TYPE_DOUBLE},
]


class ProtoSchema:
    def __init__(
        self, file: descriptor_pb2.FileDescriptorProto, deps: list[descriptor_pb2.FileDescriptorProto]
    ) -> None:
        self.file = file
        self.deps = deps

    def pool(self) -> descriptor_pool.DescriptorPool:
        """A fresh pool holding this file, its references and the well-known types."""
        pool = descriptor_pool.DescriptorPool()
        _add_well_known(pool)
        for d in [*self.deps, self.file]:
            try:
                pool.FindFileByName(d.name)
            except KeyError:
                pool.Add(d)
        return pool


def _well_known() -> list[descriptor_pb2.FileDescriptorProto]:
    from google.protobuf import (
        any_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
    )

    out = []
    for m in (
        any_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        struct_pb2,
        timestamp_pb2,
        wrappers_pb2,
        descriptor_pb2,
    ):
        fd = descriptor_pb2.FileDescriptorProto()
        m.DESCRIPTOR.CopyToProto(fd)
        out.append(fd)
    return out


_WELL_KNOWN: list[descriptor_pb2.FileDescriptorProto] | None = None


def _add_well_known(pool: descriptor_pool.DescriptorPool) -> None:
    global _WELL_KNOWN
    if _WELL_KNOWN is None:
        _WELL_KNOWN = _well_known()
    for fd in _WELL_KNOWN:
        pool.Add(fd)


def _decode(text: str, name: str) -> descriptor_pb2.FileDescriptorProto:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SchemaParseError(
            "Invalid Protobuf schema: pylog's registry takes a base64-encoded FileDescriptorProto "
            "(what confluent-kafka's ProtobufSerializer sends), not .proto text"
        ) from None
    fd = descriptor_pb2.FileDescriptorProto()
    try:
        fd.ParseFromString(raw)
    except Exception as exc:
        raise SchemaParseError(f"Invalid Protobuf schema: not a FileDescriptorProto ({exc})") from None
    if not fd.name:
        fd.name = name
    return fd


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    deps = [_decode(ref_text, name) for name, ref_text in references]
    for d, (name, _) in zip(deps, references):
        d.name = name
    fd = _decode(text.strip(), "schema.proto")
    if not fd.message_type:
        raise SchemaParseError("Invalid Protobuf schema: the file declares no message")
    parsed = ProtoSchema(fd, deps)
    try:
        parsed.pool().FindFileByName(fd.name)
    except Exception as exc:
        raise SchemaParseError(f"Invalid Protobuf schema: {exc}") from None
    return ParsedSchema(PROTOBUF, text.strip(), parsed)


def _messages(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, descriptor_pb2.DescriptorProto]:
    out: dict[str, descriptor_pb2.DescriptorProto] = {}

    def walk(prefix: str, msgs: Sequence[descriptor_pb2.DescriptorProto]) -> None:
        for m in msgs:
            name = f"{prefix}.{m.name}" if prefix else m.name
            out[name] = m
            walk(name, m.nested_type)

    walk(fd.package, fd.message_type)
    return out


def _group(t: int) -> int:
    return next(i for i, g in enumerate(_GROUPS) if t in g)


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    r, w = _messages(reader.parsed.file), _messages(writer.parsed.file)
    out = []
    first = writer.parsed.file.message_type[0].name
    first = f"{writer.parsed.file.package}.{first}" if writer.parsed.file.package else first
    if first not in r:
        out.append(f"message {first} was removed")
    for name, wm in w.items():
        rm = r.get(name)
        if rm is None:
            continue
        r_fields = {f.number: f for f in rm.field}
        for wf in wm.field:
            rf = r_fields.get(wf.number)
            if rf is None:
                continue
            if _group(rf.type) != _group(wf.type):
                out.append(
                    f"{name}: field number {wf.number} changed type "
                    f"({F.Type.Name(wf.type)} to {F.Type.Name(rf.type)})"
                )
            elif rf.type == F.TYPE_MESSAGE and rf.type_name.lstrip(".") != wf.type_name.lstrip("."):
                out.append(
                    f"{name}: field number {wf.number} changed message type "
                    f"({wf.type_name} to {rf.type_name})"
                )
            elif (rf.label == F.LABEL_REPEATED) != (wf.label == F.LABEL_REPEATED):
                out.append(f"{name}: field number {wf.number} changed between repeated and single")
            if rf.HasField("oneof_index") != wf.HasField("oneof_index") and wf.HasField("oneof_index"):
                out.append(f"{name}: field number {wf.number} moved out of a oneof")
    return out
