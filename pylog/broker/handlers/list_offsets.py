"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4), latest tiered
(-5), or the first offset at a timestamp. With a remote tier, earliest is the log start over both
tiers and lookups by time that reach remote segments are answered off the event loop (the
response then waits for them)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from pylog.storage import StorageError

from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.broker.tiered.remote_reads import RemoteReads

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


@serves(ApiKey.LIST_OFFSETS, versions=(0, 9), error_response=error_response)
def list_offsets(
    ctx: RequestContext, req: ListOffsetsRequest, *, replicas: ReplicaManager
) -> ListOffsetsResponse | Awaitable[ListOffsetsResponse]:
    committed = getattr(req, "isolation_level", 0) == READ_COMMITTED
    remote = replicas.remote_reads
    pending: list[Awaitable[None]] = []
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
                if ts == EARLIEST:
                    entry.offset = part.log_start_offset  # over both tiers (DeleteRecords moves it at once)
                elif ts == EARLIEST_LOCAL:
                    entry.offset = part.local_log_start_offset
                elif ts == LATEST:
                    entry.offset = part.last_stable_offset if committed else part.high_watermark
                elif ts == LATEST_TIERED:
                    entry.offset = -1 if remote is None else remote.latest_tiered_offset(part)
                elif ts == MAX_TIMESTAMP:
                    found = part.max_timestamp_and_offset()
                    if remote is not None and remote.remote_log(part) is not None:
                        pending.append(_remote_max_timestamp(remote, part, entry, found))
                    elif found is not None:
                        entry.timestamp, entry.offset = found
                elif ts < 0:
                    entry.error_code = ErrorCode.INVALID_REQUEST
                elif remote is not None and remote.may_hold_timestamp(part, ts):
                    pending.append(_remote_timestamp(remote, part, entry, ts, committed))
                else:
                    found = part.offset_for_timestamp(ts, committed=committed)
                    if found is not None:
                        entry.offset, entry.timestamp = found
            out.append(entry)
        topics.append(ListOffsetsResponse.ListOffsetsTopicResponse(name=t.name, partitions=out))
    response = ListOffsetsResponse(throttle_time_ms=0, topics=topics)
    return _after(pending, response) if pending else response


async def _after(pending: list[Awaitable[None]], response: ListOffsetsResponse) -> ListOffsetsResponse:
    await asyncio.gather(*pending)
    return response


async def _remote_timestamp(remote: RemoteReads, part: Any, entry: Any, ts: int, committed: bool) -> None:
    """The first offset at or after ``ts``: in the store when a segment only it holds has one,
    else in the local log."""
    limit = part.last_stable_offset if committed else part.high_watermark
    try:
        found = await remote.offset_for_timestamp(part, ts, limit)
    except StorageError:
        entry.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return
    if found is None:
        found = part.offset_for_timestamp(ts, committed=committed)
    if found is not None:
        entry.offset, entry.timestamp = found


async def _remote_max_timestamp(remote: RemoteReads, part: Any, entry: Any,
                                local: tuple[int, int] | None) -> None:
    """MAX_TIMESTAMP over both tiers: the remote record wins a tie (its offset is smaller)."""
    try:
        found = await remote.max_timestamp_and_offset(part, -1 if local is None else local[0])
    except StorageError:
        entry.error_code = ErrorCode.KAFKA_STORAGE_ERROR
        return
    if found is None or (local is not None and local[0] > found[0]):
        found = local
    if found is not None:
        entry.timestamp, entry.offset = found
