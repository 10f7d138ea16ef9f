"""PylogMetadataFetch (controller listener): a replica that the leader does not push to (a broker,
a controller outside the voter set, a voter that lost touch) pulls the committed metadata log from
the active controller, long-polling; a replica behind the log start gets the latest snapshot.

Version 1 (KIP-853's observers): the request names the replica's directory id; the answer carries
the entry before the ones sent (so a controller appends them to its Raft log as the leader's),
the snapshot's voters, and, from any controller, the leader's id and endpoints, so a replica that
asked a bootstrap server finds the leader (Kafka's Fetch ``NodeEndpoints``).
"""

from __future__ import annotations

from pylog.protocol.api import PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import PylogMetadataFetchRequest, PylogMetadataFetchResponse
from pylog.protocol.schema import ZERO_UUID

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.raft_transport import snapshot_control, uuid_or_none
from pylog.cluster.raft_types import MessageType

MAX_WAIT_MS = 5000


error_response = top_level_error(PylogMetadataFetchResponse)


@serves(PylogApiKey.METADATA_FETCH, versions=(0, 1), error_response=error_response)
async def metadata_fetch(
    ctx: RequestContext,
    req: PylogMetadataFetchRequest,
    *,
    quorum: MetadataQuorum,
    cluster_id: str,
    listener: str,
) -> PylogMetadataFetchResponse:
    body = PylogMetadataFetchResponse(
        error_code=0,
        leader_id=quorum.leader_id if quorum.leader_id is not None else -1,
        leader_epoch=quorum.term,
        leader_directory_id=ZERO_UUID,
        leader_endpoints=[],
        high_watermark=quorum.committed_offset,
        prev_index=-1,
        prev_term=-1,
        entries=[],
        snapshot=None,
    )
    vs = quorum.voter_set
    leader = vs.get(quorum.leader_id) if vs is not None and quorum.leader_id is not None else None
    if leader is not None:
        body.leader_directory_id = leader.directory_id or ZERO_UUID
        body.leader_endpoints = [
            PylogMetadataFetchResponse.Endpoint(name=e.name, host=e.host, port=e.port)
            for e in leader.endpoints
            if e.name == listener
        ]
    if req.cluster_id != cluster_id:
        body.error_code = ErrorCode.INCONSISTENT_CLUSTER_ID
        return body
    if not quorum.is_leader:
        body.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return body
    directory_id = uuid_or_none(getattr(req, "replica_directory_id", None))
    applied = req.fetch_offset - 1
    if quorum.committed_offset <= applied:
        quorum.observer_fetch(req.replica_id, directory_id, req.fetch_offset, 0)  # noted while it waits
        await quorum.wait_for_commit(applied, min(max(req.max_wait_ms, 0), MAX_WAIT_MS) / 1000)
        if not quorum.is_leader:
            body.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            return body
    m = quorum.observer_fetch(req.replica_id, directory_id, req.fetch_offset, max(req.max_bytes, 1))
    body.high_watermark = quorum.committed_offset
    body.leader_epoch = quorum.term
    if m is None:
        return body  # nothing to send (ahead of this leader's commit index)
    if m.type is MessageType.SNAPSHOT and m.snapshot is not None:
        snap = m.snapshot
        body.snapshot = PylogMetadataFetchResponse.MetadataSnapshot(
            index=snap.index, term=snap.term, data=snap.data, control=snapshot_control(snap)
        )
    else:
        body.prev_index, body.prev_term = m.index, m.log_term
        body.entries = [
            PylogMetadataFetchResponse.Entry(term=e.term, index=e.index, data=e.data) for e in m.entries
        ]
    return body
