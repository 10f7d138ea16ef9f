"""DescribeProducers: the producers a partition remembers (idempotence and open transactions)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeProducersRequest, DescribeProducersResponse

from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves


def error_response(req: DescribeProducersRequest, code: int) -> DescribeProducersResponse:
    return DescribeProducersResponse(
        topics=[
            DescribeProducersResponse.TopicResponse(
                name=t.name,
                partitions=[
                    DescribeProducersResponse.PartitionResponse(
                        partition_index=p, error_code=code, error_message=None, active_producers=[]
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in req.topics
        ]
    )


@serves(ApiKey.DESCRIBE_PRODUCERS, versions=(0, 0), error_response=error_response)
def describe_producers(
    ctx: RequestContext, req: DescribeProducersRequest, *, replicas: ReplicaManager
) -> DescribeProducersResponse:
    topics = []
    for t in req.topics:
        parts = replicas.topic_partitions(t.name)
        out: list[DescribeProducersResponse.PartitionResponse] = []
        for index in t.partition_indexes:
            part = parts.get(index)
            if part is None:
                out.append(
                    DescribeProducersResponse.PartitionResponse(
                        partition_index=index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=None,
                        active_producers=[],
                    )
                )
                continue
            producers = [
                DescribeProducersResponse.ProducerState(
                    producer_id=pid,
                    producer_epoch=e.epoch,
                    last_sequence=e.last_seq,
                    last_timestamp=e.last_timestamp,
                    coordinator_epoch=-1,
                    current_txn_start_offset=e.txn_first_offset,
                )
                for pid, e in part.active_producers()
            ]
            out.append(
                DescribeProducersResponse.PartitionResponse(
                    partition_index=index, error_code=0, error_message=None, active_producers=producers
                )
            )
        topics.append(DescribeProducersResponse.TopicResponse(name=t.name, partitions=out))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
