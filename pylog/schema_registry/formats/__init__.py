"""Schema formats the registry accepts: parse and validate a schema text, and say what stops a reader
schema from reading data written with a writer schema (the basis of every compatibility level).

Each format module exposes ``parse(text, references) -> ParsedSchema`` and
``incompatibilities(reader, writer) -> list[str]`` (empty when the reader reads everything the
writer writes). ``references`` are ``(name, schema text)`` pairs, dependencies before dependants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pylog.schema_registry.formats.parsed import AVRO, JSON, PROTOBUF, SCHEMA_TYPES, ParsedSchema

__all__ = ["AVRO", "JSON", "PROTOBUF", "SCHEMA_TYPES", "ParsedSchema", "incompatibilities", "parse"]


def _module(schema_type: str) -> Any:
    if schema_type == AVRO:
        from pylog.schema_registry.formats import avro as m
    elif schema_type == PROTOBUF:
        from pylog.schema_registry.formats import protobuf as m  # type: ignore[no-redef]
    elif schema_type == JSON:
        from pylog.schema_registry.formats import json_schema as m  # type: ignore[no-redef]
    else:
        raise ValueError(f"unknown schema type {schema_type!r}; known: {', '.join(SCHEMA_TYPES)}")
    return m


def parse(schema_type: str, text: str, references: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    """Raises `SchemaParseError` with the parser's reason."""
    return _module(schema_type).parse(text, references)


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    if reader.schema_type != writer.schema_type:
        return [f"schema type changed from {writer.schema_type} to {reader.schema_type}"]
    return list(_module(reader.schema_type).incompatibilities(reader, writer))
