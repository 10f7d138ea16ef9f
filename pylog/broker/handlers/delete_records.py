"""DeleteRecords: move a partition's log start offset forward (-1 = up to the high watermark)."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.registry import serves
from pylog.broker.replica_manager import ReplicaManager

HIGH_WATERMARK = -1


@serves(ApiKey.DELETE_RECORDS, versions=(0, 2))
def delete_records(ctx: RequestContext, req: Any, *, replicas: ReplicaManager) -> dict:
    topics = []
    for t in req.topics:
        parts = replicas.topic_partitions(t.name)
        out = []
        for p in t.partitions:
            part = parts.get(p.partition_index)
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": 0}
            if part is None:
                entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not part.is_leader:
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                hw = part.high_watermark
                target = hw if p.offset == HIGH_WATERMARK else p.offset
                if target < 0 or target > hw:
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    entry["low_watermark"] = part.delete_records_before(target)
            out.append(entry)
        topics.append({"name": t.name, "partitions": out})
    return {"throttle_time_ms": 0, "topics": topics}
