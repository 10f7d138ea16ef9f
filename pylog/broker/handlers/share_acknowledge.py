"""ShareAcknowledge (KIP-932): ACCEPT / RELEASE / REJECT acquired records outside a fetch, and
(v2, KIP-1222, with IsRenewAck) RENEW them: their acquisition lock starts again.

The session must exist and the request carry its expected epoch (-1 also closes it, releasing
what the member still holds). Changed share partitions are persisted before the answer.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.handlers.share_fetch import acknowledge
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves


def error_response(req: ShareAcknowledgeRequest, code: int) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(
        error_code=0,
        responses=[
            ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(
                topic_id=t.topic_id,
                partitions=[
                    ShareAcknowledgeResponse.PartitionData(
                        partition_index=p.partition_index,
                        error_code=code,
                        error_message=None,
                        current_leader=ShareAcknowledgeResponse.LeaderIdAndEpoch(
                            leader_id=-1, leader_epoch=-1
                        ),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


@serves(ApiKey.SHARE_ACKNOWLEDGE, versions=(1, 2), error_response=error_response)
def share_acknowledge_handler(
    ctx: RequestContext,
    req: ShareAcknowledgeRequest,
    *,
    share: ShareShell,
    metadata: MetadataView,
    node_id: int,
) -> ShareAcknowledgeResponse:
    return share_acknowledge(share, metadata.image, req, node_id)


def share_acknowledge(
    shell: ShareShell | None, image: Any, req: ShareAcknowledgeRequest, node_id: int
) -> ShareAcknowledgeResponse:
    R = ShareAcknowledgeResponse
    if shell is None or shell.manager is None:
        return _top(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not req.group_id or not req.member_id:
        return _top(ErrorCode.INVALID_REQUEST)
    error = shell.manager.check_session(req.group_id, req.member_id, req.share_session_epoch)
    if error is not ErrorCode.NONE:
        return _top(error)
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            e = acknowledge(
                shell,
                image,
                req.group_id,
                req.member_id,
                t.topic_id,
                p.partition_index,
                p.acknowledgement_batches,
                renew=req.is_renew_ack,
            )
            parts.append(
                R.PartitionData(
                    partition_index=p.partition_index,
                    error_code=e,
                    error_message=None,
                    current_leader=R.LeaderIdAndEpoch(leader_id=node_id, leader_epoch=0),
                )
            )
        topics.append(R.ShareAcknowledgeTopicResponse(topic_id=t.topic_id, partitions=parts))
    if req.share_session_epoch == -1:
        shell.manager.close_session(req.group_id, req.member_id)
    if shell.persist() is not ErrorCode.NONE:
        for topic in topics:
            for part in topic.partitions:
                part.error_code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    shell.reschedule()  # renewed lock deadlines
    shell.notify()
    return R(
        throttle_time_ms=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        acquisition_lock_timeout_ms=shell.share_config_of(req.group_id).lock_duration_ms,
        responses=topics,
        node_endpoints=[],
    )


def _top(error: ErrorCode) -> ShareAcknowledgeResponse:
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=error, error_message=error.name, responses=[], node_endpoints=[]
    )
