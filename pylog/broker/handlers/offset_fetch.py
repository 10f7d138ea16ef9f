"""OffsetFetch: one group (v1-7) or several (v8+); `topics` null fetches every committed offset.

Before v8 a group-level error is reported at the top (v2+) and copied onto every requested
partition, which is what v1 clients read. v9+ carries the member id and epoch of a consumer-group
member, checked like OffsetCommit's.
`require_stable` (v7+) asks to wait out pending
transactional commits: such a partition answers UNSTABLE_OFFSET_COMMIT and the client retries.
Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each topic asked for
(TOPIC_AUTHORIZATION_FAILED); a fetch of every offset leaves out the topics the caller may not
describe.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import OffsetFetchRequest, OffsetFetchResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.coordinators.group_shell import GroupShell, not_available
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.groups import FetchedOffset, OffsetFetchResult
from pylog.security.acl_operations import AclOperation, ResourceType


def error_response(req: OffsetFetchRequest, code: int) -> OffsetFetchResponse:
    if getattr(req, "groups", None):
        return OffsetFetchResponse(
            groups=[
                OffsetFetchResponse.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=code)
                for g in req.groups
            ]
        )
    return OffsetFetchResponse(
        error_code=code,
        topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=t.name,
                partitions=[
                    OffsetFetchResponse.OffsetFetchResponsePartition(
                        partition_index=p, committed_offset=-1, metadata="", error_code=code
                    )
                    for p in t.partition_indexes
                ],
            )
            for t in req.topics or []
        ],
    )


@serves(ApiKey.OFFSET_FETCH, versions=(0, 9), error_response=error_response)
def offset_fetch(
    ctx: RequestContext, req: OffsetFetchRequest, *, groups: GroupShell, authz: Authorization
) -> OffsetFetchResponse:
    stable = bool(getattr(req, "require_stable", False))
    if ctx.api_version >= 8:
        results = [
            _authorized(
                ctx,
                authz,
                g.group_id,
                g.topics,
                lambda topics, g=g: _fetch(
                    groups, g.group_id, topics, stable, getattr(g, "member_id", None),
                    getattr(g, "member_epoch", -1),
                ),
            )
            for g in req.groups
        ]
        return OffsetFetchResponse(throttle_time_ms=0, groups=[_group_entry(g) for g in results])
    r = _authorized(
        ctx, authz, req.group_id, req.topics, lambda topics: _fetch(groups, req.group_id, topics, stable)
    )
    topics = _topics(r)
    if r.error is not ErrorCode.NONE:
        requested = [(t.name, list(t.partition_indexes)) for t in req.topics or []]
        topics = [
            OffsetFetchResponse.OffsetFetchResponseTopic(
                name=name, partitions=[_partition(FetchedOffset(name, i, -1, error=r.error)) for i in ps]
            )
            for name, ps in requested
        ]
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=r.error)


def _authorized(
    ctx: RequestContext, authz: Authorization, group_id: str, topics: Any, fetch: Any
) -> OffsetFetchResult:
    """``fetch(topics)`` limited to what the caller may see; refused topics answer
    TOPIC_AUTHORIZATION_FAILED."""
    if not authz.group(ctx, AclOperation.DESCRIBE, group_id):
        return OffsetFetchResult(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not authz.enabled:
        return fetch(topics)
    if topics is None:
        r = fetch(None)
        seen = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {p.topic for p in r.partitions})
        return OffsetFetchResult(r.group_id, r.error, tuple(p for p in r.partitions if p.topic in seen))
    seen = authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in topics))
    r = fetch([t for t in topics if t.name in seen])
    refused = tuple(
        FetchedOffset(t.name, i, -1, error=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        for t in topics
        if t.name not in seen
        for i in t.partition_indexes
    )
    return OffsetFetchResult(r.group_id, r.error, (*r.partitions, *refused)) if refused else r


def _fetch(
    shell: GroupShell,
    group_id: str,
    topics: Any,
    require_stable: bool,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> OffsetFetchResult:
    error = not_available(shell, group_id)
    if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
        return OffsetFetchResult(group_id, error)
    wanted = None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes]
    return shell.coordinator.fetch_offsets(
        group_id, wanted, require_stable=require_stable, member_id=member_id, member_epoch=member_epoch
    )


def _by_topic(r: OffsetFetchResult) -> dict[str, list[FetchedOffset]]:
    by_topic: dict[str, list[FetchedOffset]] = {}
    for p in r.partitions:
        by_topic.setdefault(p.topic, []).append(p)
    return by_topic


def _topics(r: OffsetFetchResult) -> list[OffsetFetchResponse.OffsetFetchResponseTopic]:
    """One group's offsets as v0-7 carry them."""
    return [
        OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[_partition(p) for p in parts])
        for name, parts in _by_topic(r).items()
    ]


def _partition(p: FetchedOffset) -> OffsetFetchResponse.OffsetFetchResponsePartition:
    return OffsetFetchResponse.OffsetFetchResponsePartition(
        partition_index=p.partition,
        committed_offset=p.offset,
        committed_leader_epoch=p.leader_epoch,
        metadata=p.metadata,
        error_code=p.error,
    )


def _group_entry(r: OffsetFetchResult) -> OffsetFetchResponse.OffsetFetchResponseGroup:
    """One group's offsets as v8+ carry them."""
    topics = [
        OffsetFetchResponse.OffsetFetchResponseTopics(
            name=name,
            partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartitions(
                    partition_index=p.partition,
                    committed_offset=p.offset,
                    committed_leader_epoch=p.leader_epoch,
                    metadata=p.metadata,
                    error_code=p.error,
                )
                for p in parts
            ],
        )
        for name, parts in _by_topic(r).items()
    ]
    return OffsetFetchResponse.OffsetFetchResponseGroup(
        group_id=r.group_id, topics=topics, error_code=r.error
    )
