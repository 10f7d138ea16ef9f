"""DescribeGroups of any group type: state, protocol and members (with metadata and assignment
when Stable; a consumer group's classic members with theirs) and,
when asked, the caller's authorized operations on each group found. Each group needs DESCRIBE
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeGroupsRequest, DescribeGroupsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.group_shell import GroupShell, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.groups import DescribedGroup
from pylog.security.acl_operations import (
    NOT_REQUESTED,
    AclOperation,
    ResourceType,
    operations_if_requested,
)


@serves(ApiKey.DESCRIBE_GROUPS, versions=(0, 5))
def describe_groups(
    ctx: RequestContext, req: DescribeGroupsRequest, *, groups: GroupShell, authz: Authorization
) -> DescribeGroupsResponse:
    shell = groups
    described = []
    for gid in req.groups:
        if not authz.group(ctx, AclOperation.DESCRIBE, gid):
            described.append(DescribedGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, gid, "", "", ""))
            continue
        error = not_available(shell, gid)
        if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
            described.append(DescribedGroup(error, gid, "", "", ""))
        else:
            described.extend(shell.coordinator.describe_groups([gid]))
    asked = getattr(req, "include_authorized_operations", False)
    entries = [
        _entry(
            g,
            operations_if_requested(
                asked, ResourceType.GROUP, authz.allowed(ctx, ResourceType.GROUP, g.group_id)
            )
            if g.error == ErrorCode.NONE
            else NOT_REQUESTED,
        )
        for g in described
    ]
    return DescribeGroupsResponse(throttle_time_ms=0, groups=entries)


def _entry(g: DescribedGroup, authorized_operations: int) -> DescribeGroupsResponse.DescribedGroup:
    return DescribeGroupsResponse.DescribedGroup(
        error_code=g.error,
        group_id=g.group_id,
        group_state=g.group_state,
        protocol_type=g.protocol_type,
        protocol_data=g.protocol_data,
        members=[
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.member_metadata,
                member_assignment=m.member_assignment,
            )
            for m in g.members
        ],
        authorized_operations=authorized_operations,
    )
