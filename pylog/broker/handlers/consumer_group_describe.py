"""ConsumerGroupDescribe (KIP-848): epochs, assignor, and each member's current and target
assignment with topic names (`pylog.groups.describe` says what; DESCRIBE on each group)."""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.messages import ConsumerGroupDescribeRequest

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, describe_modern
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation, ResourceType


@serves(ApiKey.CONSUMER_GROUP_DESCRIBE, versions=(0, 1))
def consumer_group_describe(
    ctx: RequestContext,
    req: ConsumerGroupDescribeRequest,
    *,
    groups: GroupShell,
    metadata: MetadataView,
    authz: Authorization,
) -> dict:
    allowed = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, req.group_ids)
    return describe_modern(groups, list(req.group_ids), set(allowed), metadata.image, share=False)
