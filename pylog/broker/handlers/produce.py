"""Produce: validate and append one record batch per partition; acks 0 / 1 / all
(``ReplicaManager.append_records``).

Only the partition's leader appends (NOT_LEADER_OR_FOLLOWER with the current leader
otherwise). acks=1 answers after the leader's append. acks=all is refused with
NOT_ENOUGH_REPLICAS when the ISR is smaller than ``min.insync.replicas``; otherwise
the answer waits (a delayed produce, up to the request's timeout) until the high
watermark passes the batch, i.e. every in-sync replica has it; with the leader alone
in the ISR that is at once. acks=0 gets no answer; if any partition failed, the
connection is closed instead so the producer notices (as Kafka does). A batch
refused for some of its records (KIP-467) lists them in ``record_errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import ProduceRequest, ProduceResponse

from pylog.broker.datapath.partition import AppendResult
from pylog.broker.datapath.replica_manager import ProduceResult, ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import CLOSE_CONNECTION, NO_RESPONSE, serves
from pylog.schema_registry.validation import SchemaValidation


def error_response(req: ProduceRequest, code: int) -> ProduceResponse:
    return ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    ProduceResponse.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
                    for p in t.partition_data
                ],
            )
            for t in req.topic_data
        ]
    )


@serves(ApiKey.PRODUCE, versions=(0, 10), error_response=error_response)
def produce(
    ctx: RequestContext, req: ProduceRequest, *, replicas: ReplicaManager, schema_validation: SchemaValidation
) -> Any:
    entries = [(t.name, p.index, p.records) for t in req.topic_data for p in t.partition_data]
    result = replicas.append_records(
        entries, acks=req.acks, timeout_ms=req.timeout_ms, record_check=schema_validation.check
    )
    if req.acks == 0:
        return CLOSE_CONNECTION if result.failed else NO_RESPONSE
    if result.delayed is not None:
        return _respond_when_replicated(req, result)
    return _response(req, result.results)


async def _respond_when_replicated(req: ProduceRequest, result: ProduceResult) -> ProduceResponse:
    assert result.delayed is not None
    await result.delayed
    return _response(req, result.results)


def _response(req: ProduceRequest, results: Sequence[AppendResult]) -> ProduceResponse:
    topics = req.topic_data
    if len(topics) == 1 and len(results) == 1:  # the common request: one partition
        t = topics[0]
        only = ProduceResponse.TopicProduceResponse(
            name=t.name, partition_responses=[_partition(t.partition_data[0].index, results[0])]
        )
        return ProduceResponse(responses=[only], throttle_time_ms=0)
    it = iter(results)
    responses = [
        ProduceResponse.TopicProduceResponse(
            name=t.name, partition_responses=[_partition(p.index, next(it)) for p in t.partition_data]
        )
        for t in req.topic_data
    ]
    return ProduceResponse(responses=responses, throttle_time_ms=0)


def _partition(index: int, r: AppendResult) -> ProduceResponse.PartitionProduceResponse:
    entry = ProduceResponse.PartitionProduceResponse(
        index=index,
        error_code=r.error,
        base_offset=r.base_offset,
        log_append_time_ms=r.log_append_time,
        log_start_offset=r.log_start_offset,
        record_errors=[
            ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
            for i, m in r.record_errors
        ]
        if r.record_errors
        else [],
        error_message=r.message if r.error else None,
    )
    if r.current_leader is not None:
        entry.current_leader = ProduceResponse.LeaderIdAndEpoch(
            leader_id=r.current_leader[0], leader_epoch=r.current_leader[1]
        )
    return entry
