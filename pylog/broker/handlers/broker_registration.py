"""BrokerRegistration (controller listener): a broker joins, fenced until it has caught up."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import BrokerRegistrationRequest, BrokerRegistrationResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.records import BrokerEndpoint

error_response = top_level_error(BrokerRegistrationResponse)


@serves(ApiKey.BROKER_REGISTRATION, versions=(0, 0), error_response=error_response)
async def broker_registration(
    ctx: RequestContext, req: BrokerRegistrationRequest, *, quorum: MetadataQuorum, cluster_id: str
) -> BrokerRegistrationResponse:
    if req.cluster_id != cluster_id:
        return BrokerRegistrationResponse(
            throttle_time_ms=0, error_code=ErrorCode.INCONSISTENT_CLUSTER_ID, broker_epoch=-1
        )
    endpoints = [BrokerEndpoint(li.name, li.host, li.port, li.security_protocol) for li in req.listeners]
    result = await quorum.execute(
        lambda c: c.register_broker(
            req.broker_id,
            req.incarnation_id,
            endpoints,
            req.rack,
            now_ms=quorum.now_ms(),
            log_end_offset=quorum.log_end_offset,
        )
    )
    return BrokerRegistrationResponse(
        throttle_time_ms=0, error_code=result.error_code, broker_epoch=result.broker_epoch
    )
