"""DescribeShareGroupOffsets (KIP-932 admin): each share partition's start offset, and (v1,
KIP-1226) its lag: records from the start offset to the high watermark not yet acknowledged or
archived (-1 when this broker does not host the partition).

Partitions of a share group that never fetched them answer start offset -1. pylog's own
PylogShareGroupState (32004) answers the live counts the lag widget shows: records in flight
(between the start and end offsets) and records acquired right now. Each group needs DESCRIBE,
each topic DESCRIBE (named ones answer TOPIC_AUTHORIZATION_FAILED, others are left out of an
"all" answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pylog.protocol.api import ApiKey, PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    PylogShareGroupStateRequest,
    PylogShareGroupStateResponse,
)

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, not_available
from pylog.broker.coordinators.share_shell import ShareShell
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation, ResourceType

Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition


@serves(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, versions=(0, 1))
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
                        p.start_offset = p.lag = -1
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
        topics = [
            Topic(
                topic_name=name,
                topic_id=topic_id,
                partitions=[
                    Partition(
                        partition_index=p,
                        start_offset=counts.start_offset,
                        leader_epoch=0,
                        lag=_lag(share, name, p, counts),
                        error_code=share.key_error(key),
                        error_message=None,
                    )
                    for p, key, counts in parts
                ],
            )
            for name, topic_id, parts in _counted(g.group_id, _wanted(g, share, image), share, image)
        ]
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


def _counted(
    group_id: str, wanted: dict[str, list[int]], share: ShareShell, image: Any
) -> Iterator[tuple[str, Any, list[tuple[int, Any, ShareCounts]]]]:
    """Per wanted topic that exists: its name, id and each partition's share key and counts."""
    for name, parts in wanted.items():
        topic = image.topic(name)
        if topic is not None:
            keys = [(p, (group_id, topic.topic_id, p)) for p in parts]
            yield name, topic.topic_id, [(p, key, share_counts(share, key)) for p, key in keys]


@dataclass(frozen=True)
class ShareCounts:
    """A share partition as this broker knows it: start offset, records in flight, acquired now,
    and those in flight already finished (acknowledged or archived); -1 when it has no state."""

    start_offset: int
    in_flight: int
    acquired: int
    finished: int


def share_counts(share: ShareShell, key: Any) -> ShareCounts:
    assert share.manager is not None and share.coordinator is not None
    sp = share.manager.partitions.get(key)
    stored = share.coordinator.get(key)
    if sp is not None:
        return ShareCounts(sp.start_offset, sp.in_flight_count(), sp.acquired_count(), sp.finished_count())
    if stored is not None:
        start = stored.start_offset
        end = max((b.last_offset + 1 for b in stored.batches), default=start)
        done = [b for b in stored.batches if b.delivery_state in (2, 4)]  # ACKNOWLEDGED, ARCHIVED
        finished = sum(b.last_offset - b.first_offset + 1 for b in done)
        return ShareCounts(start, end - start, 0, finished)
    return ShareCounts(-1, -1, -1, -1)


def _lag(share: ShareShell, topic: str, p: int, counts: ShareCounts) -> int:
    part = share.replicas.get(topic, p)
    if part is None or counts.start_offset < 0:
        return -1
    return max(part.high_watermark - counts.start_offset - counts.finished, 0)


@serves(PylogApiKey.SHARE_GROUP_STATE, versions=(0, 0))
def share_group_state(
    ctx: RequestContext,
    req: PylogShareGroupStateRequest,
    *,
    groups: GroupShell,
    share: ShareShell,
    metadata: MetadataView,
    authz: Authorization,
) -> PylogShareGroupStateResponse:
    """pylog's own: every share partition of a group with its live counts (for the lag widget)."""
    R = PylogShareGroupStateResponse
    if authz.enabled and not authz.group(ctx, AclOperation.DESCRIBE, req.group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
    error = share_group_error(groups, share, req.group_id)
    if error is not ErrorCode.NONE or share.manager is None or share.coordinator is None:
        return R(throttle_time_ms=0, error_code=error or ErrorCode.COORDINATOR_NOT_AVAILABLE, topics=[])
    image = metadata.image
    wanted = _wanted(DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
        group_id=req.group_id, topics=None), share, image)
    if authz.enabled:
        visible = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, wanted)
        wanted = {n: ps for n, ps in wanted.items() if n in visible}
    topics = [
        R.ShareTopic(
            topic_name=name,
            topic_id=topic_id,
            partitions=[
                R.SharePartitionState(
                    partition_index=p,
                    error_code=share.key_error(key),
                    start_offset=c.start_offset,
                    in_flight_records=c.in_flight,
                    acquired_records=c.acquired,
                )
                for p, key, c in parts
            ],
        )
        for name, topic_id, parts in _counted(req.group_id, wanted, share, image)
    ]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, topics=topics)
