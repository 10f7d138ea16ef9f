"""UnregisterBroker: the controller forgets a broker's registration (ALTER on the cluster), as
``kafka-cluster unregister`` asks once the broker is gone for good."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum

error_response = top_level_error(UnregisterBrokerResponse)


@serves(ApiKey.UNREGISTER_BROKER, versions=(0, 0), error_response=error_response)
async def unregister_broker(
    ctx: RequestContext, req: UnregisterBrokerRequest, *, quorum: MetadataQuorum
) -> UnregisterBrokerResponse:
    result = await quorum.execute(lambda c: c.unregister_broker(req.broker_id))
    return UnregisterBrokerResponse(
        throttle_time_ms=0, error_code=result.error_code, error_message=result.error_message
    )
