"""ListGroups: the groups this broker coordinates, of every type (classic, consumer, share), filtered
by state (v4+) and type (v5+). Without DESCRIBE on the cluster only the groups the caller may
DESCRIBE are listed."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ListGroupsRequest, ListGroupsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.group_shell import GroupShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation, ResourceType


@serves(ApiKey.LIST_GROUPS, versions=(0, 5))
def list_groups(
    ctx: RequestContext, req: ListGroupsRequest, *, groups: GroupShell, authz: Authorization
) -> ListGroupsResponse:
    shell = groups
    if shell is None or shell.coordinator is None:
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error, listed = shell.coordinator.list_groups(
        getattr(req, "states_filter", None), getattr(req, "types_filter", None)
    )
    if not authz.cluster(ctx, AclOperation.DESCRIBE, audit=False):
        listed_ids = (g.group_id for g in listed)
        visible = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, listed_ids, audit=False)
        listed = [g for g in listed if g.group_id in visible]
    return ListGroupsResponse(
        throttle_time_ms=0,
        error_code=error,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.group_state,
                group_type=g.group_type,
            )
            for g in listed
        ],
    )


def _error(code: int) -> ListGroupsResponse:
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[])
