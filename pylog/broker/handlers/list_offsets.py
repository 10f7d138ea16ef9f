"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), or the first offset at a timestamp."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ListOffsetsRequest, ListOffsetsResponse

from pylog.broker.context import RequestContext
from pylog.broker.handler_table import serves
from pylog.broker.replica_manager import ReplicaManager

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1


def error_response(req: ListOffsetsRequest, code: int) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            ListOffsetsResponse.ListOffsetsTopicResponse(
                name=t.name,
                partitions=[
                    ListOffsetsResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


@serves(ApiKey.LIST_OFFSETS, versions=(0, 7), error_response=error_response)
def list_offsets(
    ctx: RequestContext, req: ListOffsetsRequest, *, replicas: ReplicaManager
) -> ListOffsetsResponse:
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    topics = []
    for t in req.topics:
        out = []
        for p in t.partitions:
            entry = ListOffsetsResponse.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=0,
                timestamp=-1,
                offset=-1,
                leader_epoch=-1,
            )
            current = getattr(p, "current_leader_epoch", -1)
            part, error = replicas.leader_partition(t.name, p.partition_index, current)
            if error or part is None:
                entry.error_code = error
            else:
                entry.leader_epoch = part.leader_epoch
                ts = p.timestamp
                if ts in (EARLIEST, EARLIEST_LOCAL):
                    entry.offset = part.log_start_offset
                elif ts in (LATEST, LATEST_TIERED):
                    entry.offset = part.last_stable_offset if committed else part.high_watermark
                elif ts == MAX_TIMESTAMP:
                    found = part.max_timestamp_and_offset()
                    if found is not None:
                        entry.timestamp, entry.offset = found
                elif ts < 0:
                    entry.error_code = ErrorCode.INVALID_REQUEST
                else:
                    found = part.offset_for_timestamp(ts, committed=committed)
                    if found is not None:
                        entry.offset, entry.timestamp = found
            out.append(entry)
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=out))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
