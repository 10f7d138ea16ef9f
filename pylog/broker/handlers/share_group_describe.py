"""ShareGroupDescribe (KIP-932): a share group's epoch, members and their assignments."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.group_shell import GroupShell, not_available, topic_names
from pylog.broker.metadata import MetadataView
from pylog.broker.registry import serves

AUTHORIZED_OPS_UNKNOWN = -2147483648


@serves(ApiKey.SHARE_GROUP_DESCRIBE, versions=(1, 1))
def share_group_describe(
    ctx: RequestContext, req: Any, *, groups: GroupShell, metadata: MetadataView
) -> dict:
    return describe(groups, topic_names(metadata.image), req.group_ids)


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
