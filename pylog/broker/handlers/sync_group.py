"""SyncGroup: followers are parked until the leader's SyncGroup brings the assignment."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import SyncGroupRequest, SyncGroupResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, not_available, topics_view
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.groups import JoinGroupResult, SyncGroupResult, SyncRequest

error_response = top_level_error(SyncGroupResponse)


@serves(ApiKey.SYNC_GROUP, versions=(0, 5), error_response=error_response)
def sync_group(
    ctx: RequestContext, req: SyncGroupRequest, *, groups: GroupShell, metadata: MetadataView
) -> Any:
    shell = groups
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
        return _response(SyncGroupResult(error))
    handle, fut = shell.park()
    sync = SyncRequest(
        req.group_id,
        req.generation_id,
        req.member_id,
        getattr(req, "group_instance_id", None),
        getattr(req, "protocol_type", None),
        getattr(req, "protocol_name", None),
        [(a.member_id, a.assignment) for a in req.assignments],
    )
    out = shell.coordinator.sync_group(
        sync,
        now_ms=shell.clock(),
        handle=handle,
        topics=topics_view(metadata.image),
    )
    shell.apply(out)
    if fut.done():
        return _response(_synced(fut.result()))
    return _wait(fut)


async def _wait(fut: Any) -> SyncGroupResponse:
    return _response(_synced(await fut))


def _synced(r: JoinGroupResult | SyncGroupResult) -> SyncGroupResult:
    assert isinstance(r, SyncGroupResult), r  # a parked SyncGroup completes with its own result
    return r


def _response(r: SyncGroupResult) -> SyncGroupResponse:
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=r.error,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )
