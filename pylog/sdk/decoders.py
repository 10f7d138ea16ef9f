"""Value decoders: turn the ``value`` (or ``key``) bytes of a read into typed Arrow columns.

A decoder is any callable ``fn(values: pa.Array) -> pa.Array`` returning one element per input
element (nulls stay null). Built-ins: ``"json"`` (an Arrow struct, parsed by Arrow's C++ JSON reader
over the newline-joined values, no per-record Python) and ``"utf8"`` (a zero-copy cast to string).
``"registry"`` decodes the Schema Registry wire format (Avro, Protobuf, JSON Schema; see
`pylog.sdk.registry`). Register more with `register_decoder`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, Union, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

Decoder = Callable[[pa.Array], pa.Array]
DecodeSpec = Union[str, Decoder, Mapping[str, Union[str, Decoder]], None]  # noqa: UP007



class RecordDecodeError(ValueError):
    """A record that cannot be decoded; `row` is its position in the decoded column."""

    def __init__(self, row: int, reason: str) -> None:
        super().__init__(reason)
        self.row = row
        self.reason = reason


@functools.cache
def _scalars() -> tuple[pa.Scalar, pa.Scalar, pa.Scalar]:
    """``{}``, newline and empty scalars, made on first use: building a pyarrow scalar imports pandas
    when it is installed, which `import pylog` must not pay for."""
    return (pa.scalar(b"{}", pa.binary()), pa.scalar(b"\n", pa.large_binary()),
            pa.scalar(b"", pa.large_binary()))


class JsonDecoder:
    """JSON objects -> struct. The first call infers the schema (unless given) and later calls keep it,
    so a stream of batches has one schema; fields first seen later are dropped, missing ones are null."""

    def __init__(self, schema: pa.Schema | None = None) -> None:
        self.schema = schema

    def __call__(self, values: pa.Array) -> pa.Array:
        values = _as_binary(values)
        n = len(values)
        missing = pc.fill_null(pc.equal(pc.binary_length(values), 0), True)
        if self.schema is not None and n == 0:
            return pa.array([], pa.struct(list(self.schema)))
        try:
            struct = self._arrow(values, missing, n)
        except (pa.ArrowInvalid, ValueError) as exc:
            raise ValueError(f"decode='json' needs one JSON object per record ({exc}); "
                             "decode='json-any' takes any JSON value") from exc
        if self.schema is None:
            self.schema = pa.schema(list(struct.type))
        return struct

    def _arrow(self, values: pa.Array, missing: pa.Array, n: int) -> pa.Array:
        if n == 0:
            return pa.array([], pa.struct([]))
        empty_object, newline, nothing = _scalars()
        filled = pc.if_else(missing, empty_object, values)
        if pc.any(pc.match_substring(filled, "\n")).as_py():
            # a raw newline can only be insignificant whitespace inside JSON text
            filled = pc.replace_substring(filled, "\n", " ")
        # value + "\n" for every row: the data buffer of the result is the newline-delimited document
        lines = pc.binary_join_element_wise(filled.cast(pa.large_binary()), nothing, newline)
        offsets = np.frombuffer(lines.buffers()[1], np.int64, n + 1, lines.offset * 8)
        doc = lines.buffers()[2][int(offsets[0]) : int(offsets[n])]
        read_options = pa_json.ReadOptions(use_threads=False, block_size=max(len(doc) + 1, 1 << 20))
        if self.schema is None:
            parse_options = pa_json.ParseOptions()
        else:
            parse_options = pa_json.ParseOptions(explicit_schema=self.schema,
                                                 unexpected_field_behavior="ignore")
        table = pa_json.read_json(pa.BufferReader(doc), read_options=read_options,
                                  parse_options=parse_options)
        if table.num_rows != n:
            raise ValueError(f"{table.num_rows} JSON objects for {n} records")
        table = table.combine_chunks()
        fields = list(self.schema) if self.schema is not None else list(table.schema)
        arrays = [table.column(f.name).chunk(0) if table.column(f.name).num_chunks else
                  pa.nulls(n, f.type) for f in fields]
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=missing)


def _as_binary(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        values = values.cast(pa.binary())
    return values


def decode_utf8(values: pa.Array) -> pa.Array:
    """Bytes -> string, validating UTF-8 without copying."""
    values = _as_binary(values)
    target = pa.large_string() if pa.types.is_large_binary(values.type) else pa.string()
    try:
        return values.cast(target)
    except pa.ArrowInvalid as exc:
        raise ValueError(f"decode='utf8': value is not valid UTF-8 ({exc})") from exc


def decode_json_python(values: pa.Array) -> pa.Array:
    """Per-record ``json.loads`` for values that are not all JSON objects (arrays, scalars)."""
    parsed = [None if v is None else json.loads(v) for v in _as_binary(values).to_pylist()]
    try:
        return pa.array(parsed)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"decode='json-any': the values are JSON of mixed types ({exc})") from exc


_REGISTRY: dict[str, Callable[[], Decoder]] = {
    "json": JsonDecoder,
    "utf8": lambda: decode_utf8,
    "string": lambda: decode_utf8,
    "json-any": lambda: decode_json_python,
}


def register_decoder(name: str, fn: Decoder | Callable[[], Decoder], *, factory: bool = False) -> None:
    """Make ``decode=name`` available. `fn(values: pa.Array) -> pa.Array`; with ``factory=True`` `fn()` builds
    a fresh (possibly stateful) decoder for each read."""
    if not isinstance(name, str) or not name:
        raise ValueError("decoder name must be a non-empty string")
    if factory:
        _REGISTRY[name] = cast("Callable[[], Decoder]", fn)
    else:
        decoder = cast(Decoder, fn)
        _REGISTRY[name] = lambda: decoder


def decoder_names() -> list[str]:
    return sorted(_REGISTRY)


REGISTRY = "registry"


def resolve_decoders(decode: DecodeSpec, context: Mapping[str, Any] | None = None) -> dict[str, Decoder]:
    """``decode=`` as given by the user -> {column: decoder}. A bare name or callable applies to ``value``.
    `context` (topic, source, ``schema_registry_url``, ``on_decode_error``) configures ``"registry"``."""
    if decode is None:
        return {}
    if isinstance(decode, Mapping):
        out: dict[str, Decoder] = {}
        for column, spec in decode.items():
            if column not in ("key", "value"):
                raise ValueError(f"decode= applies to 'key' and 'value', not {column!r}")
            out[column] = _one(spec, column, context)
        return out
    return {"value": _one(decode, "value", context)}


def _one(spec: str | Decoder, column: str = "value", context: Mapping[str, Any] | None = None) -> Decoder:
    if spec == REGISTRY:
        make = (context or {}).get("registry_decoder")
        if make is None:
            raise ValueError("decode='registry' needs the topic being read (use read_topic / scan_topic)")
        return cast(Decoder, make(column=column))
    if isinstance(spec, str):
        make = _REGISTRY.get(spec)
        if make is None:
            raise ValueError(f"unknown decoder {spec!r}; known: {', '.join([*decoder_names(), REGISTRY])} "
                             "(add one with pylog.sdk.register_decoder)")
        return make()
    if callable(spec):
        return spec
    raise TypeError(f"decode= takes a decoder name, a callable or a dict of them, not {type(spec).__name__}")


def apply_decoders(batch: pa.RecordBatch | pa.Table, decoders: Mapping[str, Decoder]
                   ) -> pa.RecordBatch | pa.Table:
    """Replace each decoded column in place (same name, new type)."""
    for column, fn in decoders.items():
        idx = batch.schema.get_field_index(column)
        if idx < 0:
            continue
        raw = batch.column(idx)
        try:
            decoded = fn(raw.combine_chunks() if isinstance(raw, pa.ChunkedArray) else raw)
        except ValueError as exc:
            row = getattr(exc, "row", None)
            if row is None:
                raise
            raise ValueError(f"cannot decode the {column} of {_where(batch, row)}: "
                             f"{getattr(exc, 'reason', exc)}") from None
        if isinstance(decoded, pa.ChunkedArray):
            decoded = decoded.combine_chunks()
        if len(decoded) != batch.num_rows:
            raise ValueError(f"decoder for {column!r} returned {len(decoded)} values "
                             f"for {batch.num_rows} records")
        batch = batch.set_column(idx, pa.field(column, decoded.type), decoded)
    return batch


def _where(batch: pa.RecordBatch | pa.Table, row: int) -> str:
    """'topic t partition p offset o' of a row, from the columns the batch has."""
    parts = []
    for name in ("topic", "partition", "offset"):
        i = batch.schema.get_field_index(name)
        if i >= 0 and 0 <= row < batch.num_rows:
            parts.append(f"{name} {batch.column(i)[row].as_py()}")
    return " ".join(parts) if parts else f"record {row}"
