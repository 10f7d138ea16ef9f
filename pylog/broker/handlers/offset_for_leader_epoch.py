"""OffsetForLeaderEpoch: where a leader epoch ends in the leader's log (KIP-101 / KIP-320).

Followers ask it when they start following a leader, to find where their log and the leader's
part; consumers ask it after a leader change to check their position was not truncated away.
Only the leader answers, for the leader epoch the asker holds (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH otherwise). The answer is the largest epoch not above the one asked for,
with the offset where it ends: the start of the next epoch, or the log end for the current one.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves

UNDEFINED = -1


def error_response(req: OffsetForLeaderEpochRequest, code: int) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        topics=[
            OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(
                topic=t.topic,
                partitions=[
                    OffsetForLeaderEpochResponse.EpochEndOffset(
                        error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


@serves(ApiKey.OFFSET_FOR_LEADER_EPOCH, versions=(0, 4), error_response=error_response)
def offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest, *, replicas: ReplicaManager
) -> OffsetForLeaderEpochResponse:
    topics = []
    for t in req.topics:
        out = []
        for p in t.partitions:
            entry = OffsetForLeaderEpochResponse.EpochEndOffset(
                error_code=0,
                partition=p.partition,
                leader_epoch=UNDEFINED,
                end_offset=UNDEFINED,
            )
            current = getattr(p, "current_leader_epoch", -1)
            part, error = replicas.leader_partition(t.topic, p.partition, current)
            if error or part is None:
                entry.error_code = error
            else:
                entry.leader_epoch, entry.end_offset = part.end_offset_for_epoch(p.leader_epoch)
            out.append(entry)
        topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=t.topic, partitions=out))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
