"""DescribeQuorum: the metadata quorum's leader, epoch, high watermark, every voter's log end and
the observers that fetch from it; from version 2 (KIP-853) each replica's directory id and the
voters' endpoints (``nodes``).

Answered by the active controller; a broker forwards it there, as Kafka's do.
"""

from __future__ import annotations

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse
from pylog.protocol.schema import ZERO_UUID

from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.controller import METADATA_TOPIC
from pylog.cluster.quorum import MetadataQuorum


def _error(code: int, message: str) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=code, error_message=message, topics=[], nodes=[])


error_response = top_level_error(DescribeQuorumResponse)


@serves(ApiKey.DESCRIBE_QUORUM, versions=(0, 2), error_response=error_response)
def describe_quorum(
    ctx: RequestContext, req: DescribeQuorumRequest, *, quorum: MetadataQuorum, listener: str
) -> DescribeQuorumResponse:
    wanted = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if wanted != [(METADATA_TOPIC, 0)]:
        return _error(ErrorCode.INVALID_REQUEST, "Only __cluster_metadata-0 has a quorum")
    if not quorum.is_leader:
        return _error(ErrorCode.NOT_LEADER_OR_FOLLOWER, "Not the active controller")
    now = quorum.clock.wall_ms()
    progress = quorum.voter_progress()
    heard = quorum.last_heard_ms()
    vs = quorum.voter_set
    voters = []
    for v in quorum.voters:
        me = v == quorum.node_id
        node = vs.get(v) if vs is not None else None
        directory_id = node.directory_id if node is not None else None
        voters.append(
            DescribeQuorumResponse.ReplicaState(
                replica_id=v,
                replica_directory_id=directory_id or ZERO_UUID,
                log_end_offset=progress.get(v, -1),
                last_fetch_timestamp=now if me else heard.get(v, -1),
                last_caught_up_timestamp=now
                if me or progress.get(v, -1) >= quorum.committed_offset
                else heard.get(v, -1),
            )
        )
    observers = [
        DescribeQuorumResponse.ReplicaState(
            replica_id=node_id,
            replica_directory_id=directory_id or ZERO_UUID,
            log_end_offset=offset,
            last_fetch_timestamp=at,
            last_caught_up_timestamp=at,
        )
        for node_id, (directory_id, offset, at) in sorted(quorum.observers().items())
    ]
    nodes = []
    for voter in vs.voters if vs is not None else ():
        endpoints = [e for e in voter.endpoints if e.name == listener] or list(voter.endpoints)
        nodes.append(
            DescribeQuorumResponse.Node(
                node_id=voter.node_id,
                listeners=[
                    DescribeQuorumResponse.Listener(name=e.name, host=e.host, port=e.port) for e in endpoints
                ],
            )
        )
    return DescribeQuorumResponse(
        error_code=0,
        error_message=None,
        topics=[
            DescribeQuorumResponse.TopicData(
                topic_name=METADATA_TOPIC,
                partitions=[
                    DescribeQuorumResponse.PartitionData(
                        partition_index=0,
                        error_code=0,
                        error_message=None,
                        leader_id=quorum.node_id,
                        leader_epoch=quorum.term,
                        high_watermark=quorum.committed_offset,
                        current_voters=voters,
                        observers=observers,
                    )
                ],
            )
        ],
        nodes=nodes,
    )
