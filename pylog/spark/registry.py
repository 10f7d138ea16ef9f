"""``keyFormat`` / ``valueFormat`` = ``registry`` for the ``pylog`` Spark format: typed columns from
the Schema Registry wire format (reading) and Avro written through the registry (writing).

The column's Spark type is planned on the driver from the subject's latest schema (``<topic>-value``
or ``<topic>-key``, Avro or Protobuf); each task decodes its batches with that schema as the reader,
so records written with older compatible versions come back in the same type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from pylog.schema_registry import formats
from pylog.sdk.decoders import RecordDecodeError, _where
from pylog.sdk.registry import RegistryDecoder, registry_schemas
from pylog.sdk.scan import decode_context
from pylog.spark.options import ReadOptions


def _schemas(options: ReadOptions) -> Any:
    return registry_schemas(**decode_context(options.sdk(), options.topics[0]))


def _sparkable(t: pa.DataType) -> pa.DataType:
    """Spark has no dictionary type: enums become plain strings."""
    if pa.types.is_dictionary(t):
        return t.value_type
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _sparkable(f.type), f.nullable) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_sparkable(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _sparkable(t.item_type))
    return t


def _reader(schemas: Any, subject: str) -> formats.ParsedSchema:
    latest = schemas.latest(subject)
    if latest is None:
        raise ValueError(
            f"format('pylog') with a registry format needs the subject {subject!r} in the schema "
            "registry (it sets the column's type)"
        )
    s = latest[1]
    if s.schema_type == formats.JSON:
        raise ValueError(
            f"subject {subject!r} is a JSON Schema; Spark reads Avro and Protobuf subjects typed"
        )
    return formats.parse(s.schema_type, s.text, schemas.resolved_references(s.references))


def registry_arrow_type(options: ReadOptions, column: str) -> pa.DataType:
    if len(options.topics) != 1:
        raise ValueError("a registry keyFormat / valueFormat reads one topic per query")
    reader = _reader(_schemas(options), f"{options.topics[0]}-{column}")
    if reader.schema_type == formats.AVRO:
        from pylog.schema_registry.avro_arrow import reader_struct_type

        return _sparkable(reader_struct_type(reader.parsed))
    from pylog.sdk.registry_proto import _descriptor, arrow_type

    return _sparkable(arrow_type(_descriptor(reader.parsed, [0])))


def decoders_for(
    options: ReadOptions, topic: str
) -> dict[str, Callable[[pa.Array, Any, pa.RecordBatch], pa.Array]]:
    schemas = _schemas(options)
    out: dict[str, Callable[[pa.Array, Any, pa.RecordBatch], pa.Array]] = {}
    for column in options.registry_columns():
        decoder = RegistryDecoder(topic, column, schemas)
        decoder.reader = _reader(schemas, f"{topic}-{column}")

        def decode(
            values: pa.Array,
            r: Any,
            batch: pa.RecordBatch,
            d: RegistryDecoder = decoder,
            column: str = column,
        ) -> pa.Array:
            try:
                return d(values)
            except RecordDecodeError as exc:
                where = _where(batch, exc.row)
                raise ValueError(
                    f"cannot decode the {column} of topic {r.topic} partition {r.partition} "
                    f"{where}: {exc.reason}"
                ) from None

        out[column] = decode
    return out
