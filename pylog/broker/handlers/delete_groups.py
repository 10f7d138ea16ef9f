"""DeleteGroups: removes Empty groups of any type and their committed offsets (tombstones in the log).
Each group needs DELETE (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DeleteGroupsRequest, DeleteGroupsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.group_shell import GroupShell, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation


@serves(ApiKey.DELETE_GROUPS, versions=(0, 2))
def delete_groups(
    ctx: RequestContext, req: DeleteGroupsRequest, *, groups: GroupShell, authz: Authorization
) -> DeleteGroupsResponse:
    shell = groups
    names = list(req.groups_names)
    errors: dict[str, ErrorCode] = {}
    deletable = []
    for gid in names:
        if not authz.group(ctx, AclOperation.DELETE, gid):
            errors[gid] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        error = not_available(shell, gid)
        if error is ErrorCode.NONE:
            deletable.append(gid)
        else:
            errors[gid] = error
    if deletable and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.delete_groups(deletable, now_ms=shell.clock())
        results = shell.apply(out, lambda r, e: [(gid, e) for gid, _ in r])
        errors.update(dict(results))
    return DeleteGroupsResponse(
        throttle_time_ms=0,
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=gid, error_code=errors[gid])
            for gid in dict.fromkeys(names)
        ],
    )
