"""DescribeShareGroupOffsets (KIP-932 admin): each share partition's start offset.

Partitions of a share group that never fetched them answer start offset -1. Two tagged fields
that Kafka clients skip carry pylog's live counts for the lag widget: records in flight (between
the start and end offsets) and records acquired right now. Each group needs DESCRIBE, each topic
DESCRIBE (named ones answer TOPIC_AUTHORIZATION_FAILED, others are left out of an "all" answer).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse

from pylog.broker.acl_operations import AclOperation, ResourceType
from pylog.broker.authorization import Authorization
from pylog.broker.context import RequestContext
from pylog.broker.group_shell import GroupShell, not_available
from pylog.broker.handler_table import serves
from pylog.broker.metadata import MetadataView
from pylog.broker.share_shell import ShareShell

Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition


@serves(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, versions=(0, 0))
def describe_share_group_offsets(
    ctx: RequestContext,
    req: DescribeShareGroupOffsetsRequest,
    *,
    groups: GroupShell,
    share: ShareShell,
    metadata: MetadataView,
    authz: Authorization,
) -> DescribeShareGroupOffsetsResponse:
    out = describe(groups, share, metadata.image, req)
    if not authz.enabled:
        return out
    for entry, g in zip(out.groups, req.groups):
        if not authz.group(ctx, AclOperation.DESCRIBE, g.group_id):
            entry.topics, entry.error_message = [], None
            entry.error_code = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        names = (t.topic_name for t in entry.topics)
        visible = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if g.topics is None:
            entry.topics = [t for t in entry.topics if t.topic_name in visible]
        else:
            for t in entry.topics:
                if t.topic_name not in visible:
                    for p in t.partitions:
                        p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        p.start_offset = p.in_flight_records = p.acquired_records = -1
    return out


def describe(
    groups: GroupShell | None, share: ShareShell | None, image: Any, req: DescribeShareGroupOffsetsRequest
) -> DescribeShareGroupOffsetsResponse:
    out = []
    for g in req.groups:
        error = share_group_error(groups, share, g.group_id)
        if error is not ErrorCode.NONE or share is None or share.manager is None or share.coordinator is None:
            out.append(
                Group(
                    group_id=g.group_id,
                    topics=[],
                    error_code=error or ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    error_message=None,
                )
            )
            continue
        wanted = _wanted(g, share, image)
        topics = []
        for name, parts in wanted.items():
            topic = image.topic(name)
            if topic is None:
                continue
            entries = []
            for p in parts:
                key = (g.group_id, topic.topic_id, p)
                entries.append(_partition(share, key, p))
            topics.append(Topic(topic_name=name, topic_id=topic.topic_id, partitions=entries))
        out.append(Group(group_id=g.group_id, topics=topics, error_code=ErrorCode.NONE, error_message=None))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=out)


def share_group_error(
    groups: GroupShell | None, share: ShareShell | None, group_id: str, *, empty: bool = False
) -> ErrorCode:
    """Why `group_id` cannot be described / altered here: not coordinated here, not a share group,
    or (`empty`) still has members."""
    error = not_available(groups, group_id)
    if error is not ErrorCode.NONE or groups is None or groups.coordinator is None or share is None:
        return error if error is not ErrorCode.NONE else ErrorCode.COORDINATOR_NOT_AVAILABLE
    group = groups.coordinator.share_group(group_id)
    if group is None:
        return ErrorCode.GROUP_ID_NOT_FOUND
    if empty and group.members:
        return ErrorCode.NON_EMPTY_GROUP
    return ErrorCode.NONE


def _wanted(g: Any, share: ShareShell, image: Any) -> dict[str, list[int]]:
    if g.topics is not None:
        return {t.topic_name: list(t.partitions) for t in g.topics}
    names = {t.topic_id: name for name, t in image.topics.items()}
    assert share.coordinator is not None and share.manager is not None
    keys = set(share.coordinator.keys()) | set(share.manager.partitions)
    out: dict[str, list[int]] = {}
    for group, tid, p in sorted(keys, key=str):
        if group == g.group_id and tid in names:
            out.setdefault(names[tid], []).append(p)
    return {n: sorted(ps) for n, ps in out.items()}


def _partition(share: ShareShell, key: Any, p: int) -> Partition:
    assert share.manager is not None and share.coordinator is not None
    error = share.key_error(key)
    sp = share.manager.partitions.get(key)
    stored = share.coordinator.get(key)
    if sp is not None:
        start, in_flight, acquired = sp.start_offset, sp.in_flight_count(), sp.acquired_count()
    elif stored is not None:
        start = stored.start_offset
        in_flight = max((b.last_offset + 1 for b in stored.batches), default=start) - start
        acquired = 0
    else:
        start, in_flight, acquired = -1, -1, -1
    return Partition(
        partition_index=p,
        start_offset=start,
        leader_epoch=0,
        error_code=error,
        error_message=None,
        in_flight_records=in_flight,
        acquired_records=acquired,
    )
