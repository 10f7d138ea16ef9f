"""WriteTxnMarkers: a transaction coordinator on another broker asks this partition leader to
write COMMIT / ABORT markers; each partition answers once its in-sync replicas hold the marker."""

from __future__ import annotations

import asyncio

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.coordinators.txn_markers import written_markers
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.txn import OFFSETS_TOPIC


def error_response(req: WriteTxnMarkersRequest, code: int) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(
        markers=[
            WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=m.producer_id,
                topics=[
                    WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(
                        name=t.name,
                        partitions=[
                            WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                                partition_index=p, error_code=code
                            )
                            for p in t.partition_indexes
                        ],
                    )
                    for t in m.topics
                ],
            )
            for m in req.markers
        ]
    )


@serves(ApiKey.WRITE_TXN_MARKERS, versions=(0, 2), error_response=error_response)
async def write_txn_markers(
    ctx: RequestContext,
    req: WriteTxnMarkersRequest,
    *,
    replicas: ReplicaManager,
    groups: GroupShell,
    timeout_s: float,
) -> WriteTxnMarkersResponse:
    loop = asyncio.get_running_loop()
    results: list[tuple[int, dict[tuple[str, int], asyncio.Future[ErrorCode]]]] = []
    for producer_id, epoch, commit, coordinator_epoch, partitions in written_markers(req):
        futures: dict[tuple[str, int], asyncio.Future[ErrorCode]] = {}
        for topic, p in partitions:
            fut: asyncio.Future[ErrorCode] = loop.create_future()
            futures[(topic, p)] = fut
            part = replicas.get(topic, p)
            if part is None:
                fut.set_result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue

            def done(code: ErrorCode, fut: asyncio.Future[ErrorCode] = fut) -> None:
                if not fut.done():
                    fut.set_result(code)

            replicas.append_txn_marker(topic, p, producer_id, epoch, commit, coordinator_epoch, done)
            if topic == OFFSETS_TOPIC and part.is_leader and groups.coordinator is not None:
                groups.coordinator.complete_txn(producer_id, p, commit, now_ms=groups.clock())
        results.append((producer_id, futures))
    pending = [f for _, futures in results for f in futures.values() if not f.done()]
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)
    markers = []
    for producer_id, futures in results:
        by_topic: dict[str, list[WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult]] = {}
        for (topic, p), fut in futures.items():
            code = fut.result() if fut.done() else ErrorCode.REQUEST_TIMED_OUT
            by_topic.setdefault(topic, []).append(
                WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(partition_index=p, error_code=code)
            )
        markers.append(
            WriteTxnMarkersResponse.WritableTxnMarkerResult(
                producer_id=producer_id,
                topics=[
                    WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=t, partitions=ps)
                    for t, ps in by_topic.items()
                ],
            )
        )
    return WriteTxnMarkersResponse(markers=markers)
