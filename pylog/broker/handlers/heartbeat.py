"""Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import HeartbeatRequest, HeartbeatResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, not_available, topics_view
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error

error_response = top_level_error(HeartbeatResponse)


@serves(ApiKey.HEARTBEAT, versions=(0, 4), error_response=error_response)
def heartbeat(
    ctx: RequestContext, req: HeartbeatRequest, *, groups: GroupShell, metadata: MetadataView
) -> HeartbeatResponse:
    shell = groups
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    if error is ErrorCode.NONE and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.heartbeat(
            req.group_id,
            req.generation_id,
            req.member_id,
            getattr(req, "group_instance_id", None),
            now_ms=shell.clock(),
            topics=topics_view(metadata.image),
        )
        error = shell.apply(out, lambda _r, e: e)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)
