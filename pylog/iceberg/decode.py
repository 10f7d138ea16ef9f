"""Values in the Schema Registry wire format, decoded for a topic's table, with each failure's reason.

The whole column is decoded in one call that turns undecodable records into nulls (the SDK's
registry decoder); a record that was not null and came back null is then decoded alone with errors
raised, for its reason (or found to be a genuine null). Only failing records take that per-record
path. Values are read with the subject's latest version when it reads every version seen (so a
field a BACKWARD-compatible version adds becomes a column even while older records still arrive).
Schemas come from the ``_schemas`` topic, re-read when a record names a schema id not seen yet (a
version registered after the materialiser started), at most every `REFRESH_S`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.schema_registry.core import Schema
from pylog.schema_registry.errors import RegistryError
from pylog.sdk.decoders import RecordDecodeError
from pylog.sdk.registry import LogSchemas, RegistryDecoder

REFRESH_S = 1.0


class RefreshingSchemas(LogSchemas):
    """`LogSchemas` that re-reads ``_schemas`` when asked for an id it does not have: at once for an id
    not asked for since the last read, else at most every `REFRESH_S` (a poison record naming a
    bogus id costs one read, not one per record)."""

    def __init__(self, read: Callable[[], pa.Table], clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(read)
        self._clock = clock
        self._read_at = -REFRESH_S
        self._missed: set[int | str] = set()  # asked for and not found since the last read

    def _refresh(self, what: int | str) -> bool:
        if what in self._missed and self._clock.monotonic_s() - self._read_at < REFRESH_S:
            return False
        self._state = None
        self._read_at = self._clock.monotonic_s()
        self._missed = {what}
        return True

    def schema(self, schema_id: int) -> Schema:
        try:
            return super().schema(schema_id)
        except RegistryError:
            if not self._refresh(schema_id):
                raise
            return super().schema(schema_id)

    def latest(self, subject: str) -> tuple[int, Schema] | None:
        found = super().latest(subject)
        if found is None and self._refresh(subject):
            found = super().latest(subject)
        return found


class ValueDecoder:
    """Decodes the values of `topic` through `schemas`; see the module doc."""

    def __init__(self, topic: str, schemas: LogSchemas) -> None:
        self.topic = topic
        self.schemas = schemas
        self._lenient = RegistryDecoder(topic, "value", schemas, "null")

    def has_schema(self) -> bool:
        try:
            return self.schemas.latest(f"{self.topic}-value") is not None
        except ValueError:  # no _schemas topic at all
            return False

    def latest_type(self) -> pa.DataType | None:
        """The Arrow type of the subject's latest Avro schema, if it has one."""
        from pylog.schema_registry import avro_arrow, formats

        latest = self.schemas.latest(f"{self.topic}-value")
        if latest is None or latest[1].schema_type != formats.AVRO:
            return None
        parsed = formats.parse(latest[1].schema_type, latest[1].text,
                               self.schemas.resolved_references(latest[1].references))
        return avro_arrow.reader_struct_type(parsed.parsed)

    def decode(self, values: pa.Array) -> tuple[pa.Array, np.ndarray, dict[int, str]]:
        """(decoded values, mask of records that failed, {row: reason})."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        self._lenient.reader = None  # choose again: the subject's latest version when it reads every writer
        decoded = self._lenient(values)
        if isinstance(decoded, pa.ChunkedArray):
            decoded = decoded.combine_chunks()
        suspects = np.flatnonzero(np.asarray(pc.and_(pc.is_valid(values), pc.is_null(decoded))))
        failed = np.zeros(len(values), bool)
        reasons: dict[int, str] = {}
        for row in suspects.tolist():
            strict = RegistryDecoder(self.topic, "value", self.schemas, "raise")
            try:
                strict(values.slice(row, 1))
            except (RecordDecodeError, ValueError) as exc:
                failed[row] = True
                reasons[row] = getattr(exc, "reason", str(exc))
        return decoded, failed, reasons
