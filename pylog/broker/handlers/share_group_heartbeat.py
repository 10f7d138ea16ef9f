"""ShareGroupHeartbeat (KIP-932): join, heartbeat and leave a share group.

A member leaving (epoch -1) also closes its share session and releases the records it holds,
so another member gets them at once instead of after their acquisition locks expire.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, client_host, not_available, topics_view
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.groups.consumer import TopicsView
from pylog.groups.share import ShareHeartbeat

error_response = top_level_error(ShareGroupHeartbeatResponse)


@serves(ApiKey.SHARE_GROUP_HEARTBEAT, versions=(1, 1), error_response=error_response)
async def share_group_heartbeat(
    ctx: RequestContext,
    req: ShareGroupHeartbeatRequest,
    *,
    groups: GroupShell,
    share: ShareShell,
    metadata: MetadataView,
) -> dict:
    await share.ensure_topic()  # the state topic exists before the first fetch needs it
    host = client_host(ctx.client_host)
    return heartbeat(groups, share, topics_view(metadata.image), req, ctx.client_id or "", host)


def heartbeat(
    groups: GroupShell | None,
    share: ShareShell | None,
    topics: TopicsView,
    req: Any,
    client_id: str,
    host: str,
) -> dict:
    error = not_available(groups, req.group_id) if req.group_id else ErrorCode.NONE
    if error is not ErrorCode.NONE or groups is None or groups.coordinator is None:
        return {
            "throttle_time_ms": 0,
            "error_code": error or ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "error_message": None,
            "member_id": None,
            "member_epoch": -1,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }
    hb = ShareHeartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.subscribed_topic_names,
        req.rack_id,
        client_id,
        host,
    )
    out = groups.coordinator.share_group_heartbeat(hb, topics, now_ms=groups.clock())
    response = groups.apply(out, lambda r, e: {**r, "error_code": e, "assignment": None})
    if req.member_epoch == -1 and share is not None and share.manager is not None:
        share.manager.release_member(req.group_id, req.member_id)
        share.persist()
        share.notify()
    return response
