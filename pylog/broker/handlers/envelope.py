"""Envelope (58, controller listener): an admin request a broker forwards for one of its clients.

The envelope carries the client's request (header and body), its principal (Kafka's
``DefaultPrincipalData``, version-prefixed) and its address; the controller runs the request as
that client, so authorization applies to the client and not to the broker. Only a node with
CLUSTER_ACTION on the cluster may send envelopes.
"""

from __future__ import annotations

import asyncio
import ipaddress
import struct
from collections.abc import Callable
from typing import Any

from pylog.protocol import api
from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode, ProtocolError
from pylog.protocol.messages import EnvelopeRequest, EnvelopeResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import HandlerTable, serves
from pylog.security.acl_operations import AclOperation
from pylog.security.principal import KafkaPrincipal

_PRINCIPAL = api.MESSAGES["DefaultPrincipalData"]
_I16 = struct.Struct(">h")


def encode_principal(principal: KafkaPrincipal) -> bytes:
    body = api.encode_body(
        _PRINCIPAL,
        0,
        {"type": principal.principal_type, "name": principal.name, "token_authenticated": False},
    )
    return _I16.pack(0) + b"".join(bytes(p) for p in body)


def decode_principal(data: bytes) -> KafkaPrincipal:
    mv = memoryview(data)
    if len(mv) < 2 or _I16.unpack_from(mv, 0)[0] != 0:
        raise ValueError("unknown DefaultPrincipalData version")
    value, _ = api.decode_body(_PRINCIPAL, 0, mv, 2)
    return KafkaPrincipal(value.type, value.name)


def encode_address(address: str) -> bytes:
    try:
        return ipaddress.ip_address(address).packed
    except ValueError:
        return b""


def envelope_request(ctx: RequestContext, body: Any, client_id: str) -> dict:
    frame = api.encode_request(ctx.api_key, ctx.api_version, 0, ctx.client_id or client_id, body)
    return {
        "request_data": frame[4:],
        "request_principal": encode_principal(ctx.principal),
        "client_host_address": encode_address(ctx.client_address),
    }


def error_response(req: EnvelopeRequest, code: int) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


@serves(ApiKey.ENVELOPE, versions=(0, 0), error_response=error_response)
async def envelope(
    ctx: RequestContext, req: EnvelopeRequest, *, table: Callable[[], HandlerTable], authz: Authorization
) -> EnvelopeResponse:
    if not authz.cluster(ctx, AclOperation.CLUSTER_ACTION):
        return EnvelopeResponse(response_data=None, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        inner = api.decode_request(memoryview(bytes(req.request_data)))
        principal = decode_principal(bytes(req.request_principal or b""))
        address = str(ipaddress.ip_address(bytes(req.client_host_address)))
    except (ProtocolError, ValueError):
        return EnvelopeResponse(response_data=None, error_code=ErrorCode.INVALID_REQUEST)
    h = inner.header
    spec = table().lookup(h.api_key)
    if (
        spec is None
        or h.api_key == ApiKey.ENVELOPE
        or not spec.min_version <= h.api_version <= spec.max_version
    ):
        return EnvelopeResponse(response_data=None, error_code=ErrorCode.INVALID_REQUEST)
    inner_ctx = RequestContext(
        h.api_key,
        h.api_version,
        h.correlation_id,
        h.client_id,
        f"{address}:0",
        ctx.listener,
        principal,
        ctx.security_protocol,
    )
    result = spec.fn(inner_ctx, inner.body)
    if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
        result = await result
    out = api.encode_response(h.api_key, h.api_version, h.correlation_id, result)
    return EnvelopeResponse(response_data=out[4:], error_code=0)
