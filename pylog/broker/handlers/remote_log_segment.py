"""PylogRemoteLogSegment (controller listener only): a partition leader's remote log segment
state changes and remote log start offsets, committed to the metadata log; a stale leader is
refused (FENCED_LEADER_EPOCH). Never served to clients."""

from __future__ import annotations

from pylog.protocol.api import PylogApiKey
from pylog.protocol.messages import PylogRemoteLogSegmentRequest, PylogRemoteLogSegmentResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.records import RemoteLogSegmentRecord, RemoteLogStartOffsetRecord
from pylog.cluster.remote_log_control import RemoteLogProposal

error_response = top_level_error(PylogRemoteLogSegmentResponse)


def proposal(broker_id: int, c: PylogRemoteLogSegmentRequest.Change) -> RemoteLogProposal:
    if c.segment_id is None:
        start = RemoteLogStartOffsetRecord(c.topic_id, c.partition_index, c.log_start_offset)
        return RemoteLogProposal(c.leader_epoch, start=start)
    epochs = tuple((e.epoch, e.start_offset) for e in c.epochs)
    segment = RemoteLogSegmentRecord(
        c.topic_id, c.partition_index, c.segment_id, c.state, c.base_offset, c.end_offset,
        c.max_timestamp, c.size_bytes, c.segment_leader_epoch, epochs, broker_id,
    )
    return RemoteLogProposal(c.leader_epoch, segment=segment)


@serves(PylogApiKey.REMOTE_LOG_SEGMENT, versions=(0, 0), error_response=error_response)
async def remote_log_segment(
    ctx: RequestContext, req: PylogRemoteLogSegmentRequest, *, quorum: MetadataQuorum
) -> PylogRemoteLogSegmentResponse:
    proposals = [proposal(req.broker_id, c) for c in req.changes]
    error, results = await quorum.execute(
        lambda c: c.remote_log_segments(req.broker_id, req.broker_epoch, proposals)
    )
    return PylogRemoteLogSegmentResponse(
        error_code=error,
        results=[
            PylogRemoteLogSegmentResponse.Result(error_code=r.error_code, error_message=r.error_message)
            for r in results
        ],
    )
