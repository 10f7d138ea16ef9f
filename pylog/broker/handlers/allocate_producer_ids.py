"""AllocateProducerIds (controller listener): a block of producer ids for one broker."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import AllocateProducerIdsRequest, AllocateProducerIdsResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum

BLOCK_SIZE = 1000


error_response = top_level_error(AllocateProducerIdsResponse)


@serves(ApiKey.ALLOCATE_PRODUCER_IDS, versions=(0, 0), error_response=error_response)
async def allocate_producer_ids(
    ctx: RequestContext, req: AllocateProducerIdsRequest, *, quorum: MetadataQuorum
) -> AllocateProducerIdsResponse:
    r = await quorum.execute(lambda c: c.allocate_producer_ids(req.broker_id, req.broker_epoch, BLOCK_SIZE))
    return AllocateProducerIdsResponse(
        throttle_time_ms=0,
        error_code=r.error_code,
        producer_id_start=r.first_producer_id,
        producer_id_len=r.count,
    )
