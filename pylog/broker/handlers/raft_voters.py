"""AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): the controller quorum's
membership changes (KIP-853), served by the active controller on the controller listener.

Brokers forward AddRaftVoter and RemoveRaftVoter to the active controller, as Kafka's do (an
admin client may also send them straight to a controller with ``--bootstrap-controller``);
UpdateRaftVoter comes from a voter whose endpoints changed. The leader checks and appends the
change (``RaftNode.add_voter`` & co., one at a time) and answers once it commits; before adding
a voter it checks that the new controller answers on the endpoint it gives (an ApiVersions
request, as Kafka's AddVoterHandler sends).
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
)

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.channel import ChannelError, node_channel
from pylog.cluster.quorum import MetadataQuorum
from pylog.cluster.raft_transport import uuid_or_none
from pylog.cluster.voters import Endpoint, VoterNode, directory_id_str
from pylog.security.client import PLAINTEXT, ClientSecurity

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 30_000
API_VERSIONS_TIMEOUT_S = 5.0


# AddRaftVoter and RemoveRaftVoter answer alike: an error code and message
VoterAnswer = TypeVar("VoterAnswer", AddRaftVoterResponse, RemoveRaftVoterResponse)


def _answer(cls: type[VoterAnswer], code: int, message: str | None) -> VoterAnswer:
    return cls(throttle_time_ms=0, error_code=code, error_message=message)


def _cluster_mismatch(cls: type[VoterAnswer], req: Any, cluster_id: str) -> VoterAnswer | None:
    if req.cluster_id is not None and req.cluster_id != cluster_id:
        message = f"this is cluster {cluster_id}, not {req.cluster_id}"
        return _answer(cls, ErrorCode.INCONSISTENT_CLUSTER_ID, message)
    return None


def _endpoints(req: Any) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(str(li.name).upper(), li.host, li.port) for li in req.listeners)


async def _answers_api_versions(endpoint: Endpoint, security: ClientSecurity) -> str | None:
    """None when the controller at ``endpoint`` answers ApiVersions, else why not."""
    ch = node_channel(endpoint.host, endpoint.port, client_id="pylog-add-voter", security=security)
    try:
        resp = await ch.request(ApiKey.API_VERSIONS, 3, {}, API_VERSIONS_TIMEOUT_S)
    except ChannelError as exc:
        return str(exc)
    finally:
        ch.close()
    return f"ApiVersions answered error {resp.error_code}" if resp.error_code else None


@serves(ApiKey.ADD_RAFT_VOTER, versions=(0, 1))
async def add_raft_voter(
    ctx: RequestContext,
    req: AddRaftVoterRequest,
    *,
    quorum: MetadataQuorum,
    cluster_id: str,
    listener: str,
    security: ClientSecurity = PLAINTEXT,
) -> AddRaftVoterResponse:
    cls = AddRaftVoterResponse
    wrong = _cluster_mismatch(cls, req, cluster_id)
    if wrong is not None:
        return wrong
    if not quorum.is_leader:
        return _answer(cls, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not the leader (leader: {quorum.leader_id})")
    endpoints = _endpoints(req)
    mine = next((e for e in endpoints if e.name == listener), None)
    if mine is None:
        named = [str(e) for e in endpoints]
        why = f"the listeners {named} have none named {listener} (controller.listener.names)"
        return _answer(cls, ErrorCode.INVALID_REQUEST, why)
    voter = VoterNode(req.voter_id, uuid_or_none(req.voter_directory_id), endpoints, 0, 1)
    if voter.directory_id is None:
        why = "a voter needs a directory id (meta.properties directory.id)"
        return _answer(cls, ErrorCode.INVALID_REQUEST, why)
    unreachable = await _answers_api_versions(mine, security)
    if unreachable is not None:
        why = f"new voter {req.voter_id} is not ready: {unreachable}"
        return _answer(cls, ErrorCode.REQUEST_TIMED_OUT, why)
    timeout_ms = req.timeout_ms if req.timeout_ms > 0 else DEFAULT_TIMEOUT_MS
    if not getattr(req, "ack_when_committed", True):
        timeout_ms = 0
    code, message = await quorum.add_voter(voter, timeout_ms / 1000, wait=timeout_ms > 0)
    dir_text = directory_id_str(voter.directory_id)
    log.info("AddRaftVoter %d:%s at %s: %s", voter.node_id, dir_text, mine, message or "done")
    return _answer(cls, code, message)


@serves(ApiKey.REMOVE_RAFT_VOTER, versions=(0, 0))
async def remove_raft_voter(
    ctx: RequestContext,
    req: RemoveRaftVoterRequest,
    *,
    quorum: MetadataQuorum,
    cluster_id: str,
    timeout_s: float,
) -> RemoveRaftVoterResponse:
    cls = RemoveRaftVoterResponse
    wrong = _cluster_mismatch(cls, req, cluster_id)
    if wrong is not None:
        return wrong
    if not quorum.is_leader:
        return _answer(cls, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"not the leader (leader: {quorum.leader_id})")
    directory_id = uuid_or_none(req.voter_directory_id)
    code, message = await quorum.remove_voter(req.voter_id, directory_id, timeout_s)
    log.info("RemoveRaftVoter %d:%s: %s", req.voter_id, directory_id_str(directory_id), message or "done")
    return _answer(cls, code, message)


@serves(ApiKey.UPDATE_RAFT_VOTER, versions=(0, 0))
async def update_raft_voter(
    ctx: RequestContext,
    req: UpdateRaftVoterRequest,
    *,
    quorum: MetadataQuorum,
    cluster_id: str,
    listener: str,
) -> UpdateRaftVoterResponse:
    def answer(code: int) -> UpdateRaftVoterResponse:
        leader = quorum.leader_id if quorum.leader_id is not None else -1
        host, port = "", -1
        vs = quorum.voter_set
        node = vs.get(leader) if vs is not None and leader >= 0 else None
        e = node.endpoint(listener) if node is not None else None
        if e is not None:
            host, port = e.host, e.port
        current = UpdateRaftVoterResponse.CurrentLeader(
            leader_id=leader, leader_epoch=quorum.term, host=host, port=port
        )
        return UpdateRaftVoterResponse(throttle_time_ms=0, error_code=code, current_leader=current)

    if req.cluster_id is not None and req.cluster_id != cluster_id:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
    if not quorum.is_leader:
        return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if req.current_leader_epoch >= 0 and req.current_leader_epoch != quorum.term:
        stale = req.current_leader_epoch < quorum.term
        return answer(ErrorCode.FENCED_LEADER_EPOCH if stale else ErrorCode.UNKNOWN_LEADER_EPOCH)
    endpoints = _endpoints(req)
    if not any(e.name == listener for e in endpoints):
        return answer(ErrorCode.INVALID_REQUEST)
    feature = req.k_raft_version_feature
    voter = VoterNode(
        req.voter_id,
        uuid_or_none(req.voter_directory_id),
        endpoints,
        feature.min_supported_version,
        feature.max_supported_version,
    )
    if not feature.min_supported_version <= quorum.kraft_version <= feature.max_supported_version:
        return answer(ErrorCode.INVALID_REQUEST)
    code, _message = await quorum.update_voter(voter, 0)
    return answer(code)
