"""Parsing and compatibility of the three schema formats."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2

from pylog.schema_registry import formats
from pylog.schema_registry.errors import SchemaParseError


def p(kind: str, doc: object, refs: tuple = ()) -> formats.ParsedSchema:
    return formats.parse(kind, doc if isinstance(doc, str) else json.dumps(doc), refs)


def test_avro_resolution_rules() -> None:
    base = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    promoted = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
    assert formats.incompatibilities(p("AVRO", promoted), p("AVRO", base)) == []  # int -> long
    assert formats.incompatibilities(p("AVRO", base), p("AVRO", promoted))  # long -> int is not
    aliased = {"type": "record", "name": "R", "fields": [{"name": "b", "type": "int", "aliases": ["a"]}]}
    assert formats.incompatibilities(p("AVRO", aliased), p("AVRO", base)) == []
    e1 = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    e2 = {"type": "enum", "name": "E", "symbols": ["A"]}
    assert formats.incompatibilities(p("AVRO", e2), p("AVRO", e1))
    assert formats.incompatibilities(p("AVRO", {**e2, "default": "A"}), p("AVRO", e1)) == []
    nullable = {"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "long"]}]}
    assert formats.incompatibilities(p("AVRO", nullable), p("AVRO", base)) == []
    assert formats.incompatibilities(p("AVRO", base), p("AVRO", nullable))  # null has no int branch
    recursive = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "next", "type": ["null", "Node"], "default": None}],
    }
    assert formats.incompatibilities(p("AVRO", recursive), p("AVRO", recursive)) == []


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "record", "name": "X"}',
        "not json",
        '{"type": "nope"}',
        '{"type": "record", "name": "X", "fields": [{"name": "a"}]}',
    ],
)
def test_avro_refuses_invalid_schemas(text: str) -> None:
    with pytest.raises(SchemaParseError):
        formats.parse("AVRO", text)


def test_json_schema_rules() -> None:
    old = {"type": "object", "properties": {"a": {"type": "string"}}}
    required = {**old, "required": ["a"]}
    assert formats.incompatibilities(p("JSON", required), p("JSON", old))
    assert formats.incompatibilities(p("JSON", old), p("JSON", required)) == []
    widened = {"type": "object", "properties": {"a": {"type": ["string", "null"]}}}
    assert formats.incompatibilities(p("JSON", widened), p("JSON", old)) == []
    assert formats.incompatibilities(p("JSON", old), p("JSON", widened))
    closed = {**old, "additionalProperties": False}
    more = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    assert formats.incompatibilities(p("JSON", closed), p("JSON", more))
    with pytest.raises(SchemaParseError):
        formats.parse("JSON", '{"type": 12}')
    ref = p(
        "JSON",
        {"type": "object", "properties": {"x": {"$ref": "other.json"}}},
        (("other.json", '{"type": "string"}'),),
    )
    assert ref.parsed.validator().is_valid({"x": "ok"}) and not ref.parsed.validator().is_valid({"x": 1})


def _proto(fields: list[tuple[str, int, int]]) -> str:
    fd = descriptor_pb2.FileDescriptorProto(name="m.proto", package="pk", syntax="proto3")
    m = fd.message_type.add(name="M")
    for name, number, t in fields:
        m.field.add(
            name=name, number=number, type=t, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        )
    return base64.b64encode(fd.SerializeToString()).decode()


def test_protobuf_rules() -> None:
    F = descriptor_pb2.FieldDescriptorProto
    v1 = p("PROTOBUF", _proto([("a", 1, F.TYPE_INT32)]))
    widened = p("PROTOBUF", _proto([("a", 1, F.TYPE_INT64), ("b", 2, F.TYPE_STRING)]))
    retyped = p("PROTOBUF", _proto([("a", 1, F.TYPE_STRING)]))
    assert formats.incompatibilities(widened, v1) == []
    assert formats.incompatibilities(retyped, v1)
    with pytest.raises(SchemaParseError, match="base64"):
        formats.parse("PROTOBUF", 'syntax = "proto3"; message M { int32 a = 1; }')
