"""AlterReplicaLogDirs: move replicas hosted here to another of this broker's log directories.

Kafka's answers per partition: LOG_DIR_NOT_FOUND for a directory that is not one of ``log.dirs``
(paths are compared absolute), KAFKA_STORAGE_ERROR for one that is gone, and, for a partition not
hosted here, NOT_LEADER_OR_FOLLOWER (the cluster has it elsewhere) or UNKNOWN_TOPIC_OR_PARTITION,
after remembering the directory so that the replica is created there if it comes (Kafka's
preferred log dir, used by reassignments that name log dirs). Needs ALTER on the cluster
(CLUSTER_AUTHORIZATION_FAILED for every partition otherwise). The move itself runs in the
background (``log_dir_mover``); the answer says it started.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.datapath.log_dirs import dir_usage
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.security.acl_operations import AclOperation


def error_response(req: AlterReplicaLogDirsRequest, code: int) -> AlterReplicaLogDirsResponse:
    return _response(req, lambda d, t, index: code)


@serves(ApiKey.ALTER_REPLICA_LOG_DIRS, versions=(1, 2), error_response=error_response)
def alter_replica_log_dirs(
    ctx: RequestContext, req: AlterReplicaLogDirsRequest, *, replicas: ReplicaManager, authz: Authorization
) -> AlterReplicaLogDirsResponse:
    if not authz.cluster(ctx, AclOperation.ALTER):
        return error_response(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    return _response(req, lambda d, t, index: _alter(replicas, d.path, t.name, index))


def _response(
    req: AlterReplicaLogDirsRequest, outcome: Callable[[Any, Any, int], int]
) -> AlterReplicaLogDirsResponse:
    """Every requested partition with ``outcome(dir, topic, index)``, grouped by topic name."""
    results: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
    for d in req.dirs:
        for t in d.topics:
            for index in t.partitions:
                results.setdefault(t.name, []).append(
                    AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult(
                        partition_index=index, error_code=outcome(d, t, index)
                    )
                )
    return AlterReplicaLogDirsResponse(
        throttle_time_ms=0,
        results=[
            AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=name, partitions=parts)
            for name, parts in results.items()
        ],
    )


def _alter(replicas: ReplicaManager, path: str, topic: str, index: int) -> int:
    dest = replicas.log_dirs.resolve(path)
    if dest is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    if dir_usage(dest).error is not None:
        return ErrorCode.KAFKA_STORAGE_ERROR
    part = replicas.get(topic, index)
    if part is None or part.deleted:
        replicas.log_dirs.preferred[(topic, index)] = dest
        return replicas.absent_error(topic, index)
    return replicas.mover.start(part, dest)
