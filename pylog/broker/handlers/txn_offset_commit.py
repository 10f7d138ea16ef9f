"""TxnOffsetCommit: offsets committed as part of a producer's transaction (consume-transform-produce).

The group coordinator keeps them pending and writes them to `__consumer_offsets` in a
transactional batch of the producer; the transaction's COMMIT marker makes them the group's
committed offsets, ABORT drops them (Kafka's design). The producer must have added the group's
offsets partition to its Ongoing transaction (AddOffsetsToTxn) at its current epoch, else
INVALID_TXN_STATE / INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import (
    CommitErrors,
    GroupShell,
    apply_commits,
    commits_of,
    not_available,
)
from pylog.broker.coordinators.txn_shell import TxnShell
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.txn import OFFSETS_TOPIC


def error_response(req: TxnOffsetCommitRequest, code: int) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=code
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


@serves(ApiKey.TXN_OFFSET_COMMIT, versions=(0, 3), error_response=error_response)
def txn_offset_commit(
    ctx: RequestContext,
    req: TxnOffsetCommitRequest,
    *,
    groups: GroupShell,
    txn: TxnShell,
    replicas: ReplicaManager,
    metadata: MetadataView,
) -> TxnOffsetCommitResponse:
    shell = groups
    error = ErrorCode.INVALID_GROUP_ID if not req.group_id else not_available(shell, req.group_id)
    if error is ErrorCode.NONE and shell is not None:
        error = _verify(txn, replicas, req, shell.partition_for(req.group_id))
    errors, commits = commits_of(req, error, metadata.image)
    if commits and shell is not None and shell.coordinator is not None:
        out = shell.coordinator.txn_commit_offsets(
            req.group_id,
            req.producer_id,
            req.producer_epoch,
            getattr(req, "generation_id", -1),
            getattr(req, "member_id", ""),
            getattr(req, "group_instance_id", None),
            commits,
            now_ms=shell.clock(),
        )
        apply_commits(shell, out, errors)
    return _response(req, errors)


def _response(req: TxnOffsetCommitRequest, errors: CommitErrors) -> TxnOffsetCommitResponse:
    """Every requested partition with its error."""
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=errors[(t.name, p.partition_index)]
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


def _verify(
    txn: TxnShell, replicas: ReplicaManager, req: TxnOffsetCommitRequest, offsets_partition: int
) -> ErrorCode:
    part = replicas.get(OFFSETS_TOPIC, offsets_partition)
    if part is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode(txn.verify_produce(part, req.producer_id, req.producer_epoch))

