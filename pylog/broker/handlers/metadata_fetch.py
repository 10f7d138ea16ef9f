"""PylogMetadataFetch (controller listener): a broker that is not a voter pulls the committed
metadata log from the active controller, long-polling; a broker behind the log start gets the
latest snapshot instead."""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import PylogApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.handler_table import serves
from pylog.cluster.quorum import MetadataQuorum

MAX_WAIT_MS = 5000


@serves(PylogApiKey.METADATA_FETCH, versions=(0, 0))
async def metadata_fetch(ctx: RequestContext, req: Any, *, quorum: MetadataQuorum, cluster_id: str) -> dict:
    body: dict[str, Any] = {
        "error_code": 0,
        "leader_id": quorum.leader_id if quorum.leader_id is not None else -1,
        "leader_epoch": quorum.term,
        "high_watermark": quorum.committed_offset,
        "entries": [],
        "snapshot": None,
    }
    if req.cluster_id != cluster_id:
        body["error_code"] = ErrorCode.INCONSISTENT_CLUSTER_ID
        return body
    if not quorum.is_leader:
        body["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return body
    applied = req.fetch_offset - 1
    quorum.note_observer(req.replica_id, applied)
    if quorum.image.offset <= applied:
        await quorum.wait_for_commit(applied, min(max(req.max_wait_ms, 0), MAX_WAIT_MS) / 1000)
    snap, entries = quorum.committed_after(applied, max(req.max_bytes, 1))
    body["high_watermark"] = quorum.committed_offset
    if snap is not None:
        body["snapshot"] = {"index": snap.index, "term": snap.term, "data": snap.data}
    body["entries"] = [{"term": e.term, "index": e.index, "data": e.data} for e in entries]
    return body
