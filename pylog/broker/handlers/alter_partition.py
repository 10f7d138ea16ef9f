"""AlterPartition (controller listener): a partition leader changes its ISR, from the epochs it
holds; a stale leader is refused."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import AlterPartitionRequest, AlterPartitionResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.replica_control import IsrChange

error_response = top_level_error(AlterPartitionResponse)


@serves(ApiKey.ALTER_PARTITION, versions=(3, 3), error_response=error_response)
async def alter_partition(
    ctx: RequestContext, req: AlterPartitionRequest, *, quorum: MetadataQuorum
) -> AlterPartitionResponse:
    changes = [
        IsrChange(
            t.topic_id,
            p.partition_index,
            p.leader_epoch,
            tuple(b.broker_id for b in p.new_isr_with_epochs),
            p.partition_epoch,
        )
        for t in req.topics
        for p in t.partitions
    ]
    error, results = await quorum.execute(
        lambda c: c.alter_partition(req.broker_id, req.broker_epoch, changes)
    )
    by_topic: dict[Any, list[AlterPartitionResponse.PartitionData]] = {}
    for r in results:
        by_topic.setdefault(r.topic_id, []).append(
            AlterPartitionResponse.PartitionData(
                partition_index=r.partition,
                error_code=r.error_code,
                leader_id=r.leader,
                leader_epoch=r.leader_epoch,
                isr=list(r.isr),
                leader_recovery_state=0,
                partition_epoch=r.partition_epoch,
            )
        )
    return AlterPartitionResponse(
        throttle_time_ms=0,
        error_code=error,
        topics=[
            AlterPartitionResponse.TopicData(topic_id=tid, partitions=parts)
            for tid, parts in by_topic.items()
        ],
    )
