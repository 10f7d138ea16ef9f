"""BrokerHeartbeat (controller listener): keeps a broker's session, fences, unfences, shuts down."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import BrokerHeartbeatRequest, BrokerHeartbeatResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum

error_response = top_level_error(BrokerHeartbeatResponse)


@serves(ApiKey.BROKER_HEARTBEAT, versions=(0, 0), error_response=error_response)
async def broker_heartbeat(
    ctx: RequestContext, req: BrokerHeartbeatRequest, *, quorum: MetadataQuorum
) -> BrokerHeartbeatResponse:
    result = await quorum.execute(
        lambda c: c.broker_heartbeat(
            req.broker_id,
            req.broker_epoch,
            req.current_metadata_offset,
            want_fence=req.want_fence,
            want_shutdown=req.want_shut_down,
            now_ms=quorum.now_ms(),
        )
    )
    return BrokerHeartbeatResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        is_caught_up=result.is_caught_up,
        is_fenced=result.is_fenced,
        should_shut_down=result.should_shut_down,
    )
