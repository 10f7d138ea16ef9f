"""PylogRaft (controller listener): Raft messages from another voter, stepped into the quorum."""

from __future__ import annotations

import logging

from pylog.protocol.api import PylogApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import PylogRaftRequest, PylogRaftResponse

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.raft_transport import message_from_wire

log = logging.getLogger(__name__)


error_response = top_level_error(PylogRaftResponse)


@serves(PylogApiKey.RAFT, versions=(0, 1), error_response=error_response)
def raft(
    ctx: RequestContext, req: PylogRaftRequest, *, quorum: MetadataQuorum, cluster_id: str
) -> PylogRaftResponse:
    if req.cluster_id != cluster_id:
        log.warning(
            "raft messages from %s belong to cluster %s, not %s", ctx.client_host, req.cluster_id, cluster_id
        )
        return PylogRaftResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    for w in req.messages:
        try:
            message = message_from_wire(w)
        except ValueError as exc:
            log.warning("bad raft message from %s: %s", ctx.client_host, exc)
            return PylogRaftResponse(error_code=ErrorCode.INVALID_REQUEST)
        if message.dst != quorum.node_id:
            return PylogRaftResponse(error_code=ErrorCode.INVALID_REQUEST)
        quorum.receive(message)
    return PylogRaftResponse(error_code=0)
