"""StreamsGroupDescribe (KIP-1071): epochs, topology, and each member's process, endpoint and current
and target tasks (`pylog.groups.describe` says what; DESCRIBE on each group, as Kafka).

Each group asked about is answered once, in request order; a group the caller may not DESCRIBE
answers GROUP_AUTHORIZATION_FAILED, one this broker does not coordinate NOT_COORDINATOR.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import StreamsGroupDescribeRequest

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import AUTHORIZED_OPS_UNKNOWN, GroupShell, topic_names
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.groups import describe
from pylog.security.acl_operations import AclOperation, ResourceType


@serves(ApiKey.STREAMS_GROUP_DESCRIBE, versions=(0, 0))
def streams_group_describe(
    ctx: RequestContext,
    req: StreamsGroupDescribeRequest,
    *,
    groups: GroupShell,
    metadata: MetadataView,
    authz: Authorization,
) -> dict:
    wanted = list(dict.fromkeys(req.group_ids))
    allowed = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, wanted)
    found: dict[str, dict] = {}
    visible = [g for g in wanted if g in allowed]
    if groups is None or groups.coordinator is None:
        found = {g: describe.failed_streams(g, ErrorCode.COORDINATOR_NOT_AVAILABLE) for g in visible}
    else:
        errors = {g: groups.coordinator_error(g) for g in visible}  # also loads led partitions lazily
        found = {g: describe.failed_streams(g, e) for g, e in errors.items() if e is not ErrorCode.NONE}
        served = [g for g in visible if g not in found]
        for entry in groups.coordinator.streams_group_describe(served, topic_names(metadata.image)):
            found[entry["group_id"]] = entry
    answered = []
    for g in wanted:
        entry = found.get(g) or describe.failed_streams(g, ErrorCode.GROUP_AUTHORIZATION_FAILED, None)
        if g not in found:
            entry["error_message"] = None
        entry["authorized_operations"] = AUTHORIZED_OPS_UNKNOWN
        answered.append(entry)
    return {"throttle_time_ms": 0, "groups": answered}
