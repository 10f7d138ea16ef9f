"""ListGroups: the groups this broker coordinates, of every type (classic, consumer, share), filtered
by state (v4+) and type (v5+). Without DESCRIBE on the cluster only the groups the caller may
DESCRIBE are listed."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.acl_operations import AclOperation, ResourceType
from pylog.broker.authorization import Authorization
from pylog.broker.context import RequestContext
from pylog.broker.group_shell import GroupShell
from pylog.broker.handler_table import serves


@serves(ApiKey.LIST_GROUPS, versions=(0, 5))
def list_groups(ctx: RequestContext, req: Any, *, groups: GroupShell, authz: Authorization) -> dict:
    shell = groups
    if shell is None or shell.coordinator is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "groups": []}
    error, groups = shell.coordinator.list_groups(
        getattr(req, "states_filter", None), getattr(req, "types_filter", None)
    )
    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        visible = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups))
        groups = [g for g in groups if g.group_id in visible]
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "groups": [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.group_state,
                "group_type": g.group_type,
            }
            for g in groups
        ],
    }
