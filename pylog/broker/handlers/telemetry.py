"""GetTelemetrySubscriptions (71) and PushTelemetry (72): client metrics (KIP-714).

Any client may ask and push (Kafka authorizes neither). Rules in ``pylog.telemetry.manager``;
what was pushed is read back with PylogClientMetrics (``client_metrics``).
"""

from __future__ import annotations

import uuid
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

from pylog.broker.coordinators.telemetry_shell import TelemetryShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.telemetry.manager import ACCEPTED_COMPRESSION
from pylog.telemetry.subscriptions import ClientIdentity


def _identity(ctx: RequestContext) -> Any:
    def build(instance_id: uuid.UUID) -> ClientIdentity:
        return ClientIdentity(
            instance_id,
            ctx.client_id,
            ctx.client_software_name,
            ctx.client_software_version,
            ctx.client_address,
            ctx.client_port,
        )

    return build


subscriptions_error = top_level_error(GetTelemetrySubscriptionsResponse)


@serves(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, versions=(0, 0), error_response=subscriptions_error)
def get_telemetry_subscriptions(
    ctx: RequestContext, req: GetTelemetrySubscriptionsRequest, *, telemetry: TelemetryShell
) -> GetTelemetrySubscriptionsResponse:
    version, subscriptions = telemetry.subscriptions()
    answer = telemetry.manager.get_subscriptions(
        req.client_instance_id, _identity(ctx), str(ctx.principal), subscriptions, version, telemetry.now_ms()
    )
    body = GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0,
        error_code=answer.error_code,
        client_instance_id=answer.client_instance_id,
        subscription_id=0,
        accepted_compression_types=[],
        push_interval_ms=0,
        telemetry_max_bytes=0,
        delta_temporality=False,
        requested_metrics=[],
    )
    a = answer.assignment
    if a is None:
        return body
    body.subscription_id = a.subscription_id
    body.accepted_compression_types = list(ACCEPTED_COMPRESSION)
    body.push_interval_ms = a.interval_ms
    body.telemetry_max_bytes = telemetry.manager.telemetry_max_bytes
    body.delta_temporality = True
    body.requested_metrics = list(a.metrics)
    return body


push_error = top_level_error(PushTelemetryResponse)


@serves(ApiKey.PUSH_TELEMETRY, versions=(0, 0), error_response=push_error)
def push_telemetry(
    ctx: RequestContext, req: PushTelemetryRequest, *, telemetry: TelemetryShell
) -> PushTelemetryResponse:
    version, subscriptions = telemetry.subscriptions()
    code = telemetry.manager.push(
        req.client_instance_id,
        req.subscription_id,
        req.terminating,
        req.compression_type,
        req.metrics if req.metrics is not None else b"",
        _identity(ctx),
        str(ctx.principal),
        subscriptions,
        version,
        telemetry.now_ms(),
        telemetry.wall_ms(),
    )
    return PushTelemetryResponse(throttle_time_ms=0, error_code=code)
