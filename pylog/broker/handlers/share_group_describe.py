"""ShareGroupDescribe (KIP-932): a share group's epoch, members and their assignments."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.acl_operations import AclOperation
from pylog.broker.authorization import Authorization
from pylog.broker.context import RequestContext
from pylog.broker.group_shell import GroupShell, not_available, topic_names
from pylog.broker.handler_table import serves
from pylog.broker.metadata import MetadataView

AUTHORIZED_OPS_UNKNOWN = -2147483648


@serves(ApiKey.SHARE_GROUP_DESCRIBE, versions=(1, 1))
def share_group_describe(
    ctx: RequestContext, req: Any, *, groups: GroupShell, metadata: MetadataView, authz: Authorization
) -> dict:
    allowed = authz.filter(ctx, AclOperation.DESCRIBE, 3, req.group_ids)
    out = describe(groups, topic_names(metadata.image), [g for g in req.group_ids if g in allowed])
    by_id = {g["group_id"]: g for g in out["groups"]}
    out["groups"] = [by_id[g] if g in allowed else _refused(g) for g in dict.fromkeys(req.group_ids)]
    return out


def _refused(gid: str) -> dict:
    return {
        "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED,
        "error_message": None,
        "group_id": gid,
        "group_state": "",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
        "authorized_operations": AUTHORIZED_OPS_UNKNOWN,
    }


def describe(shell: GroupShell | None, names: dict, group_ids: list[str]) -> dict:
    groups = []
    for gid in group_ids:
        error = not_available(shell, gid)
        if error is not ErrorCode.NONE or shell is None or shell.share is None:
            entry = {
                "error_code": error,
                "error_message": error.name,
                "group_id": gid,
                "group_state": "",
                "group_epoch": -1,
                "assignment_epoch": -1,
                "assignor_name": "",
                "members": [],
            }
        else:
            entry = shell.share.describe(gid, names)
        entry["authorized_operations"] = AUTHORIZED_OPS_UNKNOWN
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
