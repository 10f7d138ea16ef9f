"""OffsetDelete: drops committed offsets of partitions a group no longer consumes."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import OffsetDeleteRequest, OffsetDeleteResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.groups import OffsetDeleteResult

error_response = top_level_error(OffsetDeleteResponse)


@serves(ApiKey.OFFSET_DELETE, versions=(0, 0), error_response=error_response)
def offset_delete(
    ctx: RequestContext, req: OffsetDeleteRequest, *, groups: GroupShell, metadata: MetadataView
) -> OffsetDeleteResponse:
    shell = groups
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
        return OffsetDeleteResponse(error_code=error, throttle_time_ms=0, topics=[])
    md = metadata
    errors: dict[tuple[str, int], ErrorCode] = {}
    known = []
    for t in req.topics:
        for p in t.partitions:
            if md.image.partition(t.name, p.partition_index) is None:
                errors[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append((t.name, p.partition_index))
    out = shell.coordinator.delete_offsets(req.group_id, known, now_ms=shell.clock())
    result: OffsetDeleteResult = shell.apply(out, lambda r, e: OffsetDeleteResult(e))
    if result.error is not ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=result.error, throttle_time_ms=0, topics=[])
    for pe in result.partitions:
        errors[(pe.topic, pe.partition)] = pe.error
    return OffsetDeleteResponse(
        error_code=ErrorCode.NONE,
        throttle_time_ms=0,
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


def refused_topics(req: OffsetDeleteRequest, code: int) -> OffsetDeleteResponse:
    """Every partition of the request's topics with ``code`` (the topics ACLs refused)."""
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )
