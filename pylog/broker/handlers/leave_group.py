"""LeaveGroup: one member (v0-2) or a batch of members, static ones by instance id (v3+).

v0-2 have no per-member results: the single member's error becomes the top-level error.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import LeaveGroupRequest, LeaveGroupResponse

from pylog.broker.coordinators.group_shell import GroupShell, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.groups import LeaveGroupResult, LeaveMemberResult

error_response = top_level_error(LeaveGroupResponse)


@serves(ApiKey.LEAVE_GROUP, versions=(0, 5), error_response=error_response)
def leave_group(ctx: RequestContext, req: LeaveGroupRequest, *, groups: GroupShell) -> LeaveGroupResponse:
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    shell = groups
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
        result = LeaveGroupResult(error, tuple(LeaveMemberResult(m, i, error) for m, i in members))
    else:
        out = shell.coordinator.leave_group(req.group_id, members, now_ms=shell.clock())
        result = shell.apply(out, _failed)
    if ctx.api_version < 3:
        top = result.error
        if top is ErrorCode.NONE and result.members:
            top = result.members[0].error
        return LeaveGroupResponse(throttle_time_ms=0, error_code=top)
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=result.error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in result.members
        ],
    )


def _failed(result: LeaveGroupResult, error: ErrorCode) -> LeaveGroupResult:
    return LeaveGroupResult(
        error, tuple(LeaveMemberResult(m.member_id, m.group_instance_id, error) for m in result.members)
    )
