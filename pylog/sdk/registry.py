"""``decode="registry"``: Schema Registry wire-format keys / values -> typed Arrow columns.

Schemas come from a registry's REST API (``schema_registry_url``) or, by default, straight from
the ``_schemas`` topic of the cluster or data directory being read (the registry's own log).
Rows are grouped by schema id and each group is decoded in one call (`avro_arrow` for Avro,
Arrow's JSON reader for JSON Schema, protobuf messages for Protobuf). Avro records written with
several schemas come back with one reader schema: the subject's latest version when it reads every
writer schema seen, else the newest writer schema (fields older records lack are null or their
default).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from pylog.schema_registry import formats
from pylog.schema_registry.core import Reference, RegistryState, Schema
from pylog.schema_registry.errors import RegistryError
from pylog.schema_registry.formats import AVRO, JSON, PROTOBUF, ParsedSchema
from pylog.schema_registry.wire import HEADER_SIZE, schema_ids
from pylog.sdk.decoders import JsonDecoder, RecordDecodeError
from pylog.security.registry_client import RegistryCredentials

ON_DECODE_ERROR = ("raise", "null")


class HttpSchemas:
    """Schemas by id from a registry's REST API (cached)."""

    def __init__(self, url: str, timeout_s: float = 30.0, security: Any = None) -> None:
        """``security``: the Kafka client security settings (or ``ClientSecurity``) whose SASL user
        and TLS context reach a secured broker's registry."""
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.credentials = RegistryCredentials.of(security)
        self._by_id: dict[int, Schema] = {}
        self._versions: dict[tuple[str, int], Schema] = {}

    def _get(self, path: str) -> Any:
        try:
            with self.credentials.open(self.url + path, timeout_s=self.timeout_s) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read())
            except ValueError:
                body = {"error_code": exc.code, "message": exc.reason}
            raise RegistryError(exc.code, body.get("error_code", exc.code), body.get("message", "")) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ConnectionError(f"schema registry at {self.url} is not reachable: {exc}") from None

    @staticmethod
    def _schema(body: dict) -> Schema:
        refs = tuple(
            Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or []
        )
        return Schema(body.get("schemaType") or AVRO, body["schema"], refs)

    def schema(self, schema_id: int) -> Schema:
        if schema_id not in self._by_id:
            self._by_id[schema_id] = self._schema(self._get(f"/schemas/ids/{schema_id}"))
        return self._by_id[schema_id]

    def version(self, subject: str, version: int) -> Schema:
        key = (subject, version)
        if key not in self._versions:
            q = urllib.parse.quote(subject, safe="")
            self._versions[key] = self._schema(self._get(f"/subjects/{q}/versions/{version}"))
        return self._versions[key]

    def latest(self, subject: str) -> tuple[int, Schema] | None:
        q = urllib.parse.quote(subject, safe="")
        try:
            body = self._get(f"/subjects/{q}/versions/latest")
        except RegistryError as exc:
            if exc.status == 404:
                return None
            raise
        return int(body["id"]), self._schema(body)

    def resolved_references(
        self, refs: tuple[Reference, ...], seen: frozenset[str] = frozenset()
    ) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for r in refs:
            if r.name in seen:
                continue
            s = self.version(r.subject, r.version)
            out += [d for d in self.resolved_references(s.references, seen | {r.name}) if d not in out]
            if (r.name, s.text) not in out:
                out.append((r.name, s.text))
        return out


class LogSchemas:
    """Schemas read from the ``_schemas`` topic itself (the registry's log), through `read`."""

    def __init__(self, read: Callable[[], pa.Table]) -> None:
        self._read = read
        self._state: RegistryState | None = None

    @property
    def state(self) -> RegistryState:
        """Read on first use (a scan is built before it reads)."""
        if self._state is None:
            from pylog.schema_registry import records

            try:
                table = self._read()
            except Exception as exc:
                raise ValueError(
                    f"no schema registry to decode with: reading the _schemas topic failed "
                    f"({exc}); pass schema_registry_url="
                ) from None
            state = RegistryState()
            for k, v in zip(table.column("key").to_pylist(), table.column("value").to_pylist()):
                decoded = records.decode(k, v)
                if decoded is not None:
                    state.apply(*decoded)
            self._state = state
        return self._state

    def schema(self, schema_id: int) -> Schema:
        s = self.state.by_id.get(schema_id)
        if s is None:
            raise RegistryError(404, 40403, f"Schema {schema_id} not found")
        return s

    def latest(self, subject: str) -> tuple[int, Schema] | None:
        try:
            v = self.state.version(subject, "latest")
        except RegistryError:
            return None
        return v.id, v.schema

    def resolved_references(self, refs: tuple[Reference, ...]) -> list[tuple[str, str]]:
        return self.state.resolved_references(refs)


class RegistryDecoder:
    """The ``decode="registry"`` decoder of one column (``key`` or ``value``) of one topic."""

    def __init__(self, topic: str, column: str, schemas: Any, on_error: str = "raise") -> None:
        if on_error not in ON_DECODE_ERROR:
            raise ValueError(f"on_decode_error must be one of {ON_DECODE_ERROR}, not {on_error!r}")
        self.topic, self.column, self.schemas = topic, column, schemas
        self.null_on_error = on_error == "null"
        self._parsed: dict[int, ParsedSchema] = {}
        self.reader: ParsedSchema | None = None
        self._reader_id = -1
        self._json_decoder: Any = None
        self._proto_type: pa.DataType | None = None

    def parsed(self, schema_id: int) -> ParsedSchema:
        got = self._parsed.get(schema_id)
        if got is None:
            try:
                s = self.schemas.schema(schema_id)
            except RegistryError as exc:
                raise RecordDecodeError(
                    -1, f"schema id {schema_id} is unknown to the registry ({exc})"
                ) from None
            got = formats.parse(s.schema_type, s.text, self.schemas.resolved_references(s.references))
            self._parsed[schema_id] = got
        return got

    def _choose_reader(self, ids: list[int]) -> None:
        writers = {i: self.parsed(i) for i in ids}
        types = {p.schema_type for p in writers.values()}
        if len(types) > 1:
            raise RecordDecodeError(-1, f"the {self.column}s mix schema types {sorted(types)}")
        if self.reader is not None and all(
            not formats.incompatibilities(self.reader, w) for w in writers.values()
        ):
            return
        candidates: list[tuple[int, ParsedSchema]] = []
        latest = self.schemas.latest(f"{self.topic}-{self.column}")
        if latest is not None and latest[1].schema_type == next(iter(types)):
            candidates.append(
                (
                    latest[0],
                    formats.parse(
                        latest[1].schema_type,
                        latest[1].text,
                        self.schemas.resolved_references(latest[1].references),
                    ),
                )
            )
        seen = dict(self._parsed)
        candidates += sorted(seen.items(), reverse=True)
        for cid, cand in candidates:
            if all(not formats.incompatibilities(cand, w) for w in seen.values()):
                self.reader, self._reader_id = cand, cid
                return
        raise RecordDecodeError(
            -1,
            f"no schema of {self.topic}-{self.column} reads every schema its records "
            f"were written with (ids {sorted(seen)})",
        )

    def __call__(self, values: pa.Array) -> pa.Array:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not pa.types.is_binary(values.type):
            values = values.cast(pa.binary())
        n = len(values)
        ids, framed = schema_ids(values)
        valid = np.asarray(values.is_valid()) if values.null_count else np.ones(n, bool)
        bad = valid & ~framed
        errors: list[RecordDecodeError] = []  # the first failing row is the one reported
        if bad.any() and not self.null_on_error:
            errors.append(
                RecordDecodeError(
                    int(np.flatnonzero(bad)[0]),
                    f"the {self.column} is not in the schema registry wire format "
                    "(magic byte 0 and a 4-byte schema id)",
                )
            )
        unique = sorted(int(i) for i in np.unique(ids[framed]))
        for sid in list(unique):
            try:
                self.parsed(sid)
            except RecordDecodeError as exc:
                if not self.null_on_error:
                    errors.append(RecordDecodeError(int(np.flatnonzero(ids == sid)[0]), exc.reason))
                unique.remove(sid)
                framed = framed & (ids != sid)
        if not unique:
            if errors:
                raise min(errors, key=lambda x: x.row)
            if self.reader is None:
                return pa.nulls(n)
            return pa.nulls(n, self._type())
        self._choose_reader(unique)
        pieces, rows = [], []
        for sid in unique:
            idx = np.flatnonzero(ids == sid)
            group = values.take(pa.array(idx)) if len(idx) != n else values
            try:
                pieces.append(self._decode_group(self.parsed(sid), group))
            except RecordDecodeError as exc:
                errors.append(RecordDecodeError(int(idx[max(exc.row, 0)]), exc.reason))
                continue
            rows.append(idx)
        if errors:
            raise min(errors, key=lambda x: x.row)
        missing = np.flatnonzero(~framed)
        if missing.size:
            pieces.append(pa.nulls(missing.size, pieces[0].type))
            rows.append(missing)
        order = np.concatenate(rows)
        if len(pieces) == 1 and (order == np.arange(n)).all():
            return pieces[0]
        combined = pa.concat_arrays(pieces)
        inverse = np.empty(n, np.int64)
        inverse[order] = np.arange(n)
        return combined.take(pa.array(inverse))

    def _type(self) -> pa.DataType:
        assert self.reader is not None
        if self.reader.schema_type == AVRO:
            from pylog.schema_registry import avro_arrow

            return avro_arrow.reader_struct_type(self.reader.parsed)
        return self._proto_type or pa.null()

    def _decode_group(self, writer: ParsedSchema, group: pa.Array) -> pa.Array:
        assert self.reader is not None
        if writer.schema_type == AVRO:
            from pylog.schema_registry import avro_arrow

            try:
                return avro_arrow.decode(
                    writer.parsed, self.reader.parsed, group, null_on_error=self.null_on_error
                )
            except avro_arrow.AvroDecodeError as exc:
                raise RecordDecodeError(exc.row, str(exc)) from None
        if writer.schema_type == JSON:
            return self._decode_json(group)
        if writer.schema_type == PROTOBUF:
            from pylog.sdk import registry_proto

            arr = registry_proto.decode(
                writer.parsed, self.reader.parsed, group, null_on_error=self.null_on_error
            )
            self._proto_type = arr.type
            return arr
        raise RecordDecodeError(0, f"unsupported schema type {writer.schema_type}")

    def _decode_json(self, group: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        if self._json_decoder is None:
            self._json_decoder = JsonDecoder()
        body = pc.binary_slice(group, HEADER_SIZE, (1 << 31) - 1)  # an explicit stop: Arrow 26 misreads None
        try:
            return self._json_decoder(body)
        except ValueError as exc:
            if not self.null_on_error:
                raise RecordDecodeError(0, f"a JSON payload does not parse ({exc})") from None
            return pa.nulls(
                len(group), self._json_decoder.schema and pa.struct(list(self._json_decoder.schema))
            )


def registry_decoder(
    *,
    column: str,
    topic: str,
    on_decode_error: str = "raise",
    **source: Any,
) -> RegistryDecoder:
    """The decoder of `topic`'s `column`; `source`: a read's decode context (`registry_schemas`)."""
    return RegistryDecoder(topic, column, registry_schemas(**source), on_decode_error)


def registry_schemas(
    *,
    schema_registry_url: str | None = None,
    fetch_options: Any = None,
    read_schemas: Callable[[], pa.Table] | None = None,
    **_: Any,
) -> HttpSchemas | LogSchemas:
    """The schemas of a registry at `schema_registry_url`, else of the ``_schemas`` topic of the
    read's own source (`read_schemas` reads it)."""
    if schema_registry_url:
        return HttpSchemas(schema_registry_url, security=getattr(fetch_options, "security", None))
    if read_schemas is None:
        raise ValueError("decode='registry' needs schema_registry_url= or a source with a _schemas topic")
    return LogSchemas(read_schemas)
