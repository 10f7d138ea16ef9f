"""OffsetCommit (v2-9; older versions are answered UNSUPPORTED_VERSION by the codec floor).

Partitions of topics the cluster does not know get UNKNOWN_TOPIC_OR_PARTITION and never reach
the coordinator, as in Kafka. The answer is sent only after the commit is in
`__consumer_offsets`.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.group_shell import not_available, shell_of
from pylog.broker.registry import handles
from pylog.groups import OffsetCommitPartition, PartitionError


@handles(ApiKey.OFFSET_COMMIT, versions=(0, 9))
def offset_commit(ctx: RequestContext, req: Any) -> dict:
    shell = shell_of(ctx.broker)
    md = ctx.broker.metadata
    errors: dict[tuple[str, int], ErrorCode] = {}
    group_error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    commits: list[OffsetCommitPartition] = []
    for t in req.topics:
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if group_error is not ErrorCode.NONE:
                errors[tp] = group_error
            elif md.image.partition(t.name, p.partition_index) is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                commits.append(
                    OffsetCommitPartition(
                        t.name,
                        p.partition_index,
                        p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                )
    if commits and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.commit_offsets(
            req.group_id,
            getattr(req, "generation_id_or_member_epoch", -1),
            getattr(req, "member_id", ""),
            getattr(req, "group_instance_id", None),
            commits,
            retention_time_ms=getattr(req, "retention_time_ms", -1),
            api_version=ctx.api_version,
            now_ms=shell.clock(),
        )
        results: list[PartitionError] = shell.apply(out, _failed, offset_commit=True)
        for r in results:
            errors[(r.topic, r.partition)] = r.error
    return {
        "throttle_time_ms": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": errors[(t.name, p.partition_index)]}
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


def _failed(results: list[PartitionError], error: ErrorCode) -> list[PartitionError]:
    return [PartitionError(r.topic, r.partition, error) for r in results]
