"""ListPartitionReassignments: the partition moves in flight, as the active controller sees them
(DESCRIBE on the cluster)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum

error_response = top_level_error(ListPartitionReassignmentsResponse)


@serves(ApiKey.LIST_PARTITION_REASSIGNMENTS, versions=(0, 0), error_response=error_response)
async def list_partition_reassignments(
    ctx: RequestContext, req: ListPartitionReassignmentsRequest, *, quorum: MetadataQuorum
) -> ListPartitionReassignmentsResponse:
    wanted = None
    if req.topics is not None:
        wanted = [(t.name, p) for t in req.topics for p in t.partition_indexes]
    error, ongoing = await quorum.execute(lambda c: c.list_partition_reassignments(wanted))
    by_topic: dict[str, list[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]] = {}
    for r in ongoing:
        by_topic.setdefault(r.topic, []).append(
            ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                partition_index=r.partition,
                replicas=list(r.replicas),
                adding_replicas=list(r.adding_replicas),
                removing_replicas=list(r.removing_replicas),
            )
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0,
        error_code=error,
        error_message=None,
        topics=[
            ListPartitionReassignmentsResponse.OngoingTopicReassignment(name=t, partitions=ps)
            for t, ps in by_topic.items()
        ],
    )
