"""JoinGroup: parked in the coordinator until the rebalance's join phase completes.

A classic member of a consumer group (KIP-848 migration) is answered at once instead, with its
member epoch as generation. A share group's id answers INCONSISTENT_GROUP_PROTOCOL.

The answer is the coordinator's `JoinGroupResult` for this request's handle, possibly resolved
by a later call (another member joining, a timer). A client that disconnects while parked gets
nothing; its member stays until the coordinator's timers remove it, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import JoinGroupRequest, JoinGroupResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, client_host, not_available, topics_view
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.groups import JoinGroupResult, JoinRequest, SyncGroupResult

error_response = top_level_error(JoinGroupResponse)


@serves(ApiKey.JOIN_GROUP, versions=(0, 7), error_response=error_response)
def join_group(
    ctx: RequestContext, req: JoinGroupRequest, *, groups: GroupShell, metadata: MetadataView
) -> Any:
    shell = groups
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
        return response(ctx, JoinGroupResult(error, member_id=req.member_id))
    handle, fut = shell.park()
    join = JoinRequest(
        req.group_id,
        req.member_id,
        getattr(req, "group_instance_id", None),
        ctx.client_id or "",
        client_host(ctx.client_host),
        req.session_timeout_ms,
        getattr(req, "rebalance_timeout_ms", -1),
        req.protocol_type,
        tuple((p.name, p.metadata) for p in req.protocols),
        ctx.api_version,
        reason=getattr(req, "reason", None),
    )
    out = shell.coordinator.join_group(
        join,
        now_ms=shell.clock(),
        handle=handle,
        topics=topics_view(metadata.image),
    )
    shell.apply(out)
    if fut.done():
        return response(ctx, _joined(fut.result()))
    return _wait(ctx, fut)


async def _wait(ctx: RequestContext, fut: Any) -> JoinGroupResponse:
    return response(ctx, _joined(await fut))


def _joined(r: JoinGroupResult | SyncGroupResult) -> JoinGroupResult:
    assert isinstance(r, JoinGroupResult), r  # a parked JoinGroup completes with its own result
    return r


def response(ctx: RequestContext, r: JoinGroupResult) -> JoinGroupResponse:
    v = ctx.api_version
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        # Non-nullable before v7.
        protocol_name=r.protocol_name if r.protocol_name is not None or v >= 7 else "",
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in r.members
        ],
    )
