"""OffsetCommit (v2-9; older versions are answered UNSUPPORTED_VERSION by the codec floor).

A consumer group (KIP-848) member commits with its member epoch (`generation_id_or_member_epoch`),
which the coordinator checks (STALE_MEMBER_EPOCH on v9+); the offsets go to the store all group
types share. Partitions of topics the cluster does not know get
UNKNOWN_TOPIC_OR_PARTITION and never reach
the coordinator, as in Kafka. The answer is sent only after the commit is in
`__consumer_offsets`.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import OffsetCommitRequest, OffsetCommitResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import (
    CommitErrors,
    GroupShell,
    apply_commits,
    commits_of,
    not_available,
)
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves


def error_response(req: OffsetCommitRequest, code: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


@serves(ApiKey.OFFSET_COMMIT, versions=(0, 9), error_response=error_response)
def offset_commit(
    ctx: RequestContext, req: OffsetCommitRequest, *, groups: GroupShell, metadata: MetadataView
) -> OffsetCommitResponse:
    shell = groups
    group_error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    generation = getattr(req, "generation_id_or_member_epoch", -1)
    member_id = getattr(req, "member_id", "")
    instance_id = getattr(req, "group_instance_id", None)
    errors, commits = commits_of(req, group_error, metadata.image)
    if commits and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.commit_offsets(
            req.group_id,
            generation,
            member_id,
            instance_id,
            commits,
            retention_time_ms=getattr(req, "retention_time_ms", -1),
            api_version=ctx.api_version,
            now_ms=shell.clock(),
        )
        apply_commits(shell, out, errors)
    return _response(req, errors)


def _response(req: OffsetCommitRequest, errors: CommitErrors) -> OffsetCommitResponse:
    """Every requested partition with its error."""
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )
