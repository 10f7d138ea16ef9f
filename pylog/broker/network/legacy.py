"""Answers for versions we advertise (ranges start at 0) but do not serve.

Old librdkafka insists on seeing version 0 of some APIs in ApiVersions; Kafka 4
advertises them and answers a request actually sent at such a version with
UNSUPPORTED_VERSION. Kafka's JSON definitions still describe the fields of those
old versions, so the request is decoded and the error answer encoded at the
version the client used; APIs without a per-entry error answer get None (the
connection is closed).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol import api
from pylog.protocol.errors import ErrorCode, ProtocolError
from pylog.protocol.framing import decode_request_header, encode_response_header

from pylog.broker.network.handler_table import ErrorResponse

_REQUESTS = {m.api_key: m for m in api.MESSAGES.values() if m.kind == "request"}
_RESPONSES = {m.api_key: m for m in api.MESSAGES.values() if m.kind == "response"}


def unsupported_version_response(
    frame: memoryview, header: Any, error_response: ErrorResponse | None
) -> list[Any] | None:
    """Response parts (size prefix first) answering UNSUPPORTED_VERSION with the API's
    ``error_response``, or None."""
    key, version = header.api_key, header.api_version
    req_spec, resp_spec = _REQUESTS.get(key), _RESPONSES.get(key)
    if req_spec is None or resp_spec is None or version < 0 or error_response is None:
        return None
    try:
        _, pos = decode_request_header(frame, req_spec.first_flexible)
        body, _ = api.decode_body(req_spec, version, frame, pos)
        err = error_response(body, ErrorCode.UNSUPPORTED_VERSION)
        parts = api.encode_body(resp_spec, version, err)
    except (ProtocolError, ValueError, KeyError, AttributeError):
        return None
    head = encode_response_header(header.correlation_id, api.response_header_version(key, version))
    size = len(head) + sum(len(p) if not isinstance(p, memoryview) else p.nbytes for p in parts)
    return [size.to_bytes(4, "big", signed=True), head, *parts]
