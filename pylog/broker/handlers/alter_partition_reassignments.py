"""AlterPartitionReassignments: move partitions to new replicas, or cancel a move, through the
controller (ALTER on the cluster)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.replica_control import ReassignmentRequest


def error_response(req: AlterPartitionReassignmentsRequest, code: int) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        error_code=code,
        responses=[
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(
                name=t.name,
                partitions=[
                    AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


@serves(ApiKey.ALTER_PARTITION_REASSIGNMENTS, versions=(0, 1), error_response=error_response)
async def alter_partition_reassignments(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest, *, quorum: MetadataQuorum
) -> AlterPartitionReassignmentsResponse:
    allow_rf_change = bool(getattr(req, "allow_replication_factor_change", True))
    wanted = [
        ReassignmentRequest(t.name, p.partition_index, None if p.replicas is None else tuple(p.replicas))
        for t in req.topics
        for p in t.partitions
    ]
    results = await quorum.execute(
        lambda c: c.alter_partition_reassignments(wanted, allow_replication_factor_change=allow_rf_change)
    )
    by_topic: dict[str, list[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            AlterPartitionReassignmentsResponse.ReassignablePartitionResponse(
                partition_index=r.partition, error_code=r.error_code, error_message=r.error_message
            )
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0,
        allow_replication_factor_change=allow_rf_change,
        error_code=0,
        error_message=None,
        responses=[
            AlterPartitionReassignmentsResponse.ReassignableTopicResponse(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )
