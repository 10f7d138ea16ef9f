"""DescribeLogDirs: this broker's log directories, each with its partitions' sizes and offset lags
and, from v4, its volume's total and usable bytes.

As in Kafka, it needs DESCRIBE on the cluster: without it the answer lists no directory (v3+ also
says CLUSTER_AUTHORIZATION_FAILED). A null topic list asks for every partition. A replica moving
between directories is listed twice: in its current directory and, with ``is_future_key``, in its
destination. The lag is Kafka's: the high watermark's distance past the log end offset (0 once
the replica holds everything committed).

Versions 1-4, those of Kafka 4.0-4.2 (v5 adds cordoned directories, Kafka 4.3's; kafka-python takes a
broker advertising it for 4.3).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.datapath.log_dir_mover import Move
from pylog.broker.datapath.log_dirs import dir_usage
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation


def error_response(req: DescribeLogDirsRequest, code: int) -> DescribeLogDirsResponse:
    """No directory listed, the code at the top (v3+; v1-2 have no top-level error code)."""
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])


@serves(ApiKey.DESCRIBE_LOG_DIRS, versions=(1, 4), error_response=error_response)
def describe_log_dirs(
    ctx: RequestContext, req: DescribeLogDirsRequest, *, replicas: ReplicaManager, authz: Authorization
) -> DescribeLogDirsResponse:
    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        return error_response(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    current: dict[Any, dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]]] = {
        d: {} for d in replicas.log_dirs.dirs
    }
    for part in sorted(replicas.snapshot(), key=lambda p: (p.topic, p.index)):
        if part.deleted or (wanted is not None and (part.topic, part.index) not in wanted):
            continue
        current.setdefault(part.path.parent, {}).setdefault(part.topic, []).append(
            DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=part.index,
                partition_size=_size(part),
                offset_lag=max(part.high_watermark - part.log_end_offset, 0),
                is_future_key=False,
            )
        )
    for move in list(replicas.mover.moves.values()):
        if wanted is None or (move.topic, move.index) in wanted:
            entry = _future(move, replicas.get(move.topic, move.index))
            current.setdefault(move.dest, {}).setdefault(move.topic, []).append(entry)
    results = []
    for root, topics in current.items():
        usage = dir_usage(root)
        results.append(
            DescribeLogDirsResponse.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR if usage.error else ErrorCode.NONE,
                log_dir=str(root),
                topics=[
                    DescribeLogDirsResponse.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in topics.items()
                ],
                total_bytes=usage.total_bytes,
                usable_bytes=usage.usable_bytes,
                is_cordoned=False,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


def _future(move: Move, part: Any) -> DescribeLogDirsResponse.DescribeLogDirsPartition:
    """A future replica: its size on disk after the last copy pass, and, not knowing how far the
    copy reaches in offsets, the whole log end offset as its lag until the swap."""
    return DescribeLogDirsResponse.DescribeLogDirsPartition(
        partition_index=move.index,
        partition_size=move.future_bytes,
        offset_lag=part.log_end_offset if part is not None else 0,
        is_future_key=True,
    )


def _size(part: Any) -> int:
    try:
        return int(part.log.size_bytes)
    except (OSError, AttributeError):
        return 0
