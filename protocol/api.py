"""Requests and responses by API key: the entry points the broker and our clients call.

    req = decode_request(frame)                # frame: memoryview from FrameReader
    body = handle(req.header, req.body)        # an object or a dict with snake_case keys
    out = encode_response(req.header.api_key, req.header.api_version, req.header.correlation_id, body)

Versions are those of Apache Kafka's JSON definitions (`supported_versions()`); the broker decides
what to advertise. ApiVersions is special twice over: its request header always parses (so an
unsupported version can be answered with UNSUPPORTED_VERSION in a v0 body) and its response
header is always v0.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Any, NamedTuple

from .codec import compile_message
from .errors import MalformedMessage, ProtocolError, UnsupportedApi
from .framing import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)
from .schema import Message, MessageSpec, load_all


class ApiKey(IntEnum):
    """Kafka's API keys, under the names of Kafka's `ApiKeys` enum."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class PylogApiKey(IntEnum):
    """API keys of messages only pylog nodes exchange, outside Kafka's range (messages/README.md)."""

    RAFT = 32000
    METADATA_FETCH = 32001
    CLIENT_METRICS = 32002
    REMOTE_LOG_SEGMENT = 32003
    SHARE_GROUP_STATE = 32004


class Request(NamedTuple):
    """A decoded request. `trailing_bytes` counts bytes after the body (Kafka ignores them too)."""

    header: RequestHeader
    body: Any
    trailing_bytes: int = 0


MESSAGES: dict[str, MessageSpec] = load_all()
"""Every JSON definition by name (requests, responses, headers, and data such as
ConsumerProtocolSubscription / ConsumerProtocolAssignment)."""

# (requests and responses all have an apiKey: the check is for the type checker)
_REQUESTS: dict[int, MessageSpec] = {
    m.api_key: m for m in MESSAGES.values() if m.kind == "request" and m.api_key is not None}
_RESPONSES: dict[int, MessageSpec] = {
    m.api_key: m for m in MESSAGES.values() if m.kind == "response" and m.api_key is not None}
_FLEX_FROM: dict[int, int | None] = {k: m.first_flexible for k, m in _REQUESTS.items()}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

_DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError, TypeError, RecursionError)


def supported_versions() -> dict[int, tuple[int, int]]:
    """{api_key: (min, max)} the codec decodes and encodes (Kafka 4's JSON ranges)."""
    out = {}
    for key, req in _REQUESTS.items():
        resp = _RESPONSES.get(key)
        if req.valid_versions and resp and resp.valid_versions:
            lo = max(req.valid_versions[0], resp.valid_versions[0])
            hi = min(req.valid_versions[1], resp.valid_versions[1])
            out[key] = (lo, hi)
    return dict(sorted(out.items()))


def request_class(api_key: int) -> type[Message]:
    """The generated class of a request body; nested structs are its attributes."""
    return _REQUESTS[api_key].root.cls


def response_class(api_key: int) -> type[Message]:
    """The generated class of a response body (e.g. `response_class(ApiKey.PRODUCE).TopicProduceResponse`)."""
    return _RESPONSES[api_key].root.cls


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    spec = _RESPONSES.get(api_key)
    return 1 if spec is not None and spec.is_flexible(api_version) else 0


def request_header_version(api_key: int, api_version: int) -> int:
    first = _FLEX_FROM.get(api_key)
    return 2 if first is not None and api_version >= first else 1


def _as_view(frame: Any) -> memoryview:
    mv = frame if type(frame) is memoryview else memoryview(frame)
    if mv.format != "B" or mv.ndim != 1:
        mv = memoryview(mv.tobytes())
    return mv


def _spec_for(
    table: dict[int, MessageSpec], api_key: int, api_version: int, header: Any = None
) -> MessageSpec:
    spec = table.get(api_key)
    if spec is None or spec.valid_versions is None:
        raise UnsupportedApi(api_key=api_key, api_version=api_version, header=header)
    lo, hi = spec.valid_versions
    if not lo <= api_version <= hi:
        raise UnsupportedApi(api_key=api_key, api_version=api_version, header=header)
    return spec


def decode_body(spec: MessageSpec, version: int, buf: memoryview, pos: int = 0) -> tuple[Any, int]:
    """Decode one message body at `pos`; return (object, end position). Raises only ProtocolError."""
    decode = compile_message(spec, version)[0]
    try:
        return decode(buf, pos, len(buf))
    except ProtocolError:
        raise
    except _DECODE_FAILURES as exc:
        raise MalformedMessage(f"{spec.name} v{version}: {exc}") from None


def encode_body(spec: MessageSpec, version: int, body: Any) -> list[Any]:
    """Encode one message body into a list of bytes-like parts."""
    encode = compile_message(spec, version)[1]
    try:
        return encode(body)
    except struct.error as exc:
        raise ValueError(f"{spec.name} v{version}: {exc}") from None


def decode_request(frame: Any) -> Request:
    """Decode a request frame (size prefix already stripped).

    Raises UnsupportedApi (with `.header`) for an unknown key or a version the codec does not
    decode, MalformedMessage for anything that does not parse.
    """
    mv = _as_view(frame)
    if len(mv) < 4:
        raise MalformedMessage(f"request of {len(mv)} bytes is shorter than a header")
    api_key, api_version = _I16.unpack_from(mv, 0)[0], _I16.unpack_from(mv, 2)[0]
    header, pos = decode_request_header(mv, _FLEX_FROM.get(api_key))
    spec = _spec_for(_REQUESTS, api_key, api_version, header)
    body, end = decode_body(spec, api_version, mv, pos)
    return Request(header, body, len(mv) - end)


def _nbytes(p: Any) -> int:
    return p.nbytes if p.__class__ is memoryview else len(p)


_JOINED_RESPONSES = frozenset({ApiKey.PRODUCE})
"""Frequent answers that carry no record data: sent as one part rather than one per field."""


def encode_response_parts(api_key: int, api_version: int, correlation_id: int, body: Any) -> list[Any]:
    """Like encode_response, but the parts (size prefix first) for `transport.writelines`."""
    spec = _spec_for(_RESPONSES, api_key, api_version)
    parts = encode_body(spec, api_version, body)
    head = encode_response_header(correlation_id, response_header_version(api_key, api_version))
    if api_key in _JOINED_RESPONSES:
        joined = b"".join(parts)
        return [_I32.pack(len(head) + len(joined)) + head + joined]
    size = len(head) + sum(map(_nbytes, parts))
    return [struct.pack(">i", size), head, *parts]


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Any) -> bytes:
    """A whole response frame: size prefix, response header (v0 for ApiVersions), body."""
    return b"".join(encode_response_parts(api_key, api_version, correlation_id, body))


def encode_request_parts(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> list[Any]:
    """Like encode_request, but the parts (size prefix first) for `transport.writelines`: large
    record batches go out without being joined into one frame first."""
    spec = _spec_for(_REQUESTS, api_key, api_version)
    parts = encode_body(spec, api_version, body)
    head = encode_request_header(
        api_key, api_version, correlation_id, client_id, request_header_version(api_key, api_version)
    )
    size = len(head) + sum(map(_nbytes, parts))
    return [struct.pack(">i", size), head, *parts]


def encode_request(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Any
) -> bytes:
    """A whole request frame: size prefix, request header v1 / v2, body."""
    return b"".join(encode_request_parts(api_key, api_version, correlation_id, client_id, body))


def decode_response(api_key: int, api_version: int, frame: Any) -> tuple[int, Any]:
    """Decode a response frame (size prefix stripped) of a request we sent; return (correlation_id, body).

    An ApiVersions response to a version the broker does not support comes back as a v0 body
    with UNSUPPORTED_VERSION; it is decoded as v0, as Kafka's clients do.
    """
    mv = _as_view(frame)
    spec = _spec_for(_RESPONSES, api_key, api_version)
    correlation_id, pos = decode_response_header(mv, response_header_version(api_key, api_version))
    if api_key == ApiKey.API_VERSIONS and api_version > 0:
        if len(mv) - pos >= 2 and _I16.unpack_from(mv, pos)[0] == 35:
            return correlation_id, decode_body(spec, 0, mv, pos)[0]
        try:
            return correlation_id, decode_body(spec, api_version, mv, pos)[0]
        except MalformedMessage:
            return correlation_id, decode_body(spec, 0, mv, pos)[0]
    return correlation_id, decode_body(spec, api_version, mv, pos)[0]


__all__ = [
    "MESSAGES",
    "ApiKey",
    "PylogApiKey",
    "Request",
    "RequestHeader",
    "decode_body",
    "decode_request",
    "decode_response",
    "encode_body",
    "encode_request",
    "encode_request_parts",
    "encode_response",
    "encode_response_parts",
    "request_class",
    "request_header_version",
    "response_class",
    "response_header_version",
    "supported_versions",
]
