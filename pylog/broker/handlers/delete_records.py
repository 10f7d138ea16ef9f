"""DeleteRecords: move a partition's log start offset forward (-1 = up to the high watermark).

The leader moves its own log start at once and tells its followers in their next fetch (waiting
fetches answer now). As in Kafka (DelayedDeleteRecords), a partition answers once its *low
watermark* (the smallest log start offset among the leader and the followers on live brokers)
has reached the offset, with that low watermark; REQUEST_TIMED_OUT after the request's timeout,
NOT_LEADER_OR_FOLLOWER if leadership moves meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DeleteRecordsRequest, DeleteRecordsResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves

HIGH_WATERMARK = -1


def error_response(req: DeleteRecordsRequest, code: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            DeleteRecordsResponse.DeleteRecordsTopicResult(
                name=t.name,
                partitions=[
                    DeleteRecordsResponse.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=-1, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


@serves(ApiKey.DELETE_RECORDS, versions=(0, 2), error_response=error_response)
async def delete_records(
    ctx: RequestContext, req: DeleteRecordsRequest, *, replicas: ReplicaManager, metadata: MetadataView
) -> DeleteRecordsResponse:
    topics = []
    waits: list[_LowWatermarkWait] = []
    for t in req.topics:
        parts = replicas.topic_partitions(t.name)
        out = []
        for p in t.partitions:
            part = parts.get(p.partition_index)
            entry = DeleteRecordsResponse.DeleteRecordsPartitionResult(
                partition_index=p.partition_index, low_watermark=-1, error_code=0
            )
            if part is None:
                entry.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not part.is_leader:
                entry.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                hw = part.high_watermark
                target = hw if p.offset == HIGH_WATERMARK else p.offset
                if target < 0 or target > hw:
                    entry.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    part.delete_records_before(target)
                    part.log_start_moved()
                    entry.low_watermark = target
                    waits.append(_LowWatermarkWait(entry, part, target, metadata))
            out.append(entry)
        topics.append(DeleteRecordsResponse.DeleteRecordsTopicResult(name=t.name, partitions=out))
    if waits:
        await _all_reached(waits, max(req.timeout_ms, 0) / 1000)
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


class _LowWatermarkWait:
    """One partition's wait for its low watermark; ``done`` resolves when it is answered."""

    def __init__(
        self,
        entry: DeleteRecordsResponse.DeleteRecordsPartitionResult,
        part: Partition,
        target: int,
        metadata: MetadataView,
    ) -> None:
        self.entry, self.part, self.target, self.metadata = entry, part, target, metadata
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def check(self) -> None:
        if self.done.done():
            return
        part = self.part
        if not part.is_leader:
            self.entry.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            self.done.set_result(None)
            return
        live = {b.broker_id for b in self.metadata.image.brokers.values() if not b.fenced}
        low = part.low_watermark(live)
        if low >= self.target:
            self.entry.low_watermark = low
            self.done.set_result(None)
        else:
            part.watchers.add_low_watermark(self.check)

    def expire(self) -> None:
        if not self.done.done():
            self.part.watchers.remove_low_watermark(self.check)
            self.entry.error_code = ErrorCode.REQUEST_TIMED_OUT
            self.done.set_result(None)


async def _all_reached(waits: list[_LowWatermarkWait], timeout_s: float) -> None:
    try:
        for w in waits:
            w.check()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(asyncio.shield(w.done) for w in waits)), timeout_s)
    finally:
        for w in waits:
            w.expire()
