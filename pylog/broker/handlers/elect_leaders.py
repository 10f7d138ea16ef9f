"""ElectLeaders: preferred or unclean leader election, decided by the controller."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import ElectLeadersRequest, ElectLeadersResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.quorum import MetadataQuorum


def error_response(req: ElectLeadersRequest, code: int) -> ElectLeadersResponse:
    return ElectLeadersResponse(error_code=code, replica_election_results=[])


@serves(ApiKey.ELECT_LEADERS, versions=(0, 2), error_response=error_response)
async def elect_leaders(
    ctx: RequestContext, req: ElectLeadersRequest, *, quorum: MetadataQuorum
) -> ElectLeadersResponse:
    election_type = getattr(req, "election_type", 0)
    wanted = None
    if req.topic_partitions is not None:
        wanted = [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    results = await quorum.execute(lambda c: c.elect_leaders(election_type, wanted))
    by_topic: dict[str, list[ElectLeadersResponse.PartitionResult]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            ElectLeadersResponse.PartitionResult(
                partition_id=r.partition, error_code=r.error_code, error_message=r.error_message
            )
        )
    return ElectLeadersResponse(
        throttle_time_ms=0,
        error_code=0,
        replica_election_results=[
            ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=ps)
            for t, ps in by_topic.items()
        ],
    )
