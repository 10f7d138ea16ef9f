"""What a Flight client asks for: the read request of a descriptor and the ticket of one partition.

Both are small JSON documents. A descriptor is a path ``[topic]`` or a command
``{"topic": ..., "partitions": [...], "start_offset"/"end_offset"/"start_timestamp"/"end_timestamp",
"columns": [...], "isolation": "read_committed"}``; a ticket names one partition's resolved range
``[start, end)``, the columns and the isolation, so DoGet needs no planning state on the server.

A ticket with ``max_wait_ms`` tails the partition (what ``pylog.follow`` sends): its ``end`` is a
limit, not a promise; DoGet waits up to that long (at most `MAX_WAIT_MS`) for records readable at
``start`` or above, streams what is readable then, never past the high watermark (read_committed:
the last stable offset) nor ``end``, and ends with an empty batch whose metadata says where the
next read starts (``pylog.sdk.flight_source.TailEnd``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pylog.sdk.schema import output_columns

# Flight SQL's commands and tickets: a google.protobuf.Any holding a message of this package
FLIGHT_SQL_TYPE_URL_PREFIX = "type.googleapis.com/arrow.flight.protocol.sql."
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"
TICKET_VERSION = 1
MAX_WAIT_MS = 30_000  # the longest a tailing DoGet waits for records


class BadRequest(ValueError):
    """A descriptor or ticket the server cannot read; its message goes back to the client."""


@dataclass(frozen=True)
class ReadRequest:
    topic: str
    partitions: list[int] | None = None
    start_offset: int | None = None
    end_offset: int | None = None
    start_timestamp: int | None = None
    end_timestamp: int | None = None
    columns: list[str] | None = None
    isolation: str = READ_COMMITTED


def _int_or_none(doc: dict[str, Any], key: str) -> int | None:
    v = doc.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise BadRequest(f"{key} must be a non-negative integer, got {v!r}")
    return v


def _offset(v: Any) -> bool:
    """Whether `v` is a non-negative integer (a partition or an offset)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _json_object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the {what} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise BadRequest(f"the {what} must be a JSON object, got {type(doc).__name__}")
    return doc


def parse_read_request(path: list[bytes] | None, command: bytes | None) -> ReadRequest:
    """The read a descriptor asks for: a path ``[topic]`` or a JSON command."""
    if path:
        if len(path) != 1:
            raise BadRequest(f"a path descriptor names one topic, got {len(path)} parts")
        name = path[0].decode("utf-8", "replace")
        if not name:
            raise BadRequest("the topic name is empty")
        return ReadRequest(name)
    doc = _json_object(command or b"", "descriptor command")
    topic = doc.get("topic")
    if not isinstance(topic, str) or not topic:
        raise BadRequest("the descriptor command needs a non-empty string 'topic'")
    unknown = sorted(set(doc) - {"topic", "partitions", "start_offset", "end_offset", "start_timestamp",
                                 "end_timestamp", "columns", "isolation"})
    if unknown:
        raise BadRequest(f"unknown key(s) {unknown} in the descriptor command")
    parts = doc.get("partitions")
    if parts is not None and (not isinstance(parts, list) or not all(_offset(p) for p in parts)):
        raise BadRequest(f"partitions must be a list of non-negative integers, got {parts!r}")
    columns = doc.get("columns")
    if columns is not None:
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) or not columns:
            raise BadRequest(f"columns must be a non-empty list of column names, got {columns!r}")
        try:
            output_columns(columns, False)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
    isolation = doc.get("isolation", READ_COMMITTED)
    if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
        raise BadRequest(f"isolation must be {READ_COMMITTED!r} or {READ_UNCOMMITTED!r}, got {isolation!r}")
    return ReadRequest(topic, parts, _int_or_none(doc, "start_offset"), _int_or_none(doc, "end_offset"),
                       _int_or_none(doc, "start_timestamp"), _int_or_none(doc, "end_timestamp"),
                       columns, isolation)


@dataclass(frozen=True)
class FlightTicket:
    """One partition's records ``[start, end)`` with these columns, as DoGet streams them. A ticket
    for a partition another broker leads keeps the request's bounds (None: earliest / latest, or
    timestamps), which that broker resolves when DoGet begins."""

    topic: str
    partition: int
    start: int | None
    end: int | None
    columns: list[str]
    isolation: str = READ_COMMITTED
    start_timestamp: int | None = None
    end_timestamp: int | None = None
    max_wait_ms: int | None = None  # a tailing read (see the module doc)

    @property
    def resolved(self) -> bool:
        return self.start is not None and self.end is not None and \
            self.start_timestamp is None and self.end_timestamp is None

    def encode(self) -> bytes:
        doc = {"v": TICKET_VERSION, "topic": self.topic, "partition": self.partition, "start": self.start,
               "end": self.end, "start_timestamp": self.start_timestamp, "end_timestamp": self.end_timestamp,
               "columns": self.columns, "isolation": self.isolation}
        if self.max_wait_ms is not None:
            doc["max_wait_ms"] = self.max_wait_ms
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> FlightTicket:
        doc = _json_object(raw, "ticket")
        if doc.get("v") != TICKET_VERSION:
            raise BadRequest(f"not a pylog Flight ticket (version {doc.get('v')!r}, "
                             f"expected {TICKET_VERSION})")
        try:
            topic, partition, start, end = doc["topic"], doc["partition"], doc["start"], doc["end"]
            columns, isolation = doc["columns"], doc["isolation"]
        except KeyError as exc:
            raise BadRequest(f"the ticket lacks {exc.args[0]!r}") from None
        start_ts, end_ts = doc.get("start_timestamp"), doc.get("end_timestamp")
        if not isinstance(topic, str) or not topic or not _offset(partition) or \
                not all(v is None or _offset(v) for v in (start, end, start_ts, end_ts)) or \
                (start is not None and end is not None and start > end):
            raise BadRequest("the ticket's topic, partition or offset range is malformed")
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise BadRequest("the ticket's columns are malformed")
        try:
            output_columns(columns, False)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        if isolation not in (READ_COMMITTED, READ_UNCOMMITTED):
            raise BadRequest(f"the ticket's isolation {isolation!r} is unknown")
        wait = doc.get("max_wait_ms")
        if wait is not None and (not _offset(wait) or start is None or start_ts is not None or
                                 end_ts is not None):
            raise BadRequest("a tailing ticket needs a non-negative max_wait_ms and a start offset "
                             "(no timestamps)")
        return cls(topic, partition, start, end, columns, isolation, start_ts, end_ts,
                   None if wait is None else min(wait, MAX_WAIT_MS))


def is_flight_sql(raw: bytes) -> bool:
    """Whether `raw` is a serialized ``google.protobuf.Any`` holding a Flight SQL message (its
    type_url, field 1, first: as protobuf encoders write it), not one of pylog's JSON documents.
    Read without protobuf, which only Flight SQL needs."""
    if len(raw) < 2 or raw[0] != 0x0A:  # field 1, length-delimited
        return False
    length, shift, i = 0, 0, 1
    while i < len(raw) and i < 6:
        byte = raw[i]
        length |= (byte & 0x7F) << shift
        i += 1
        if not byte & 0x80:
            break
        shift += 7
    prefix = FLIGHT_SQL_TYPE_URL_PREFIX.encode()
    return length > len(prefix) and raw[i:i + length].startswith(prefix)
