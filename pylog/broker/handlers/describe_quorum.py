"""DescribeQuorum: the metadata quorum's leader, epoch, high watermark and every voter's log end.

Answered by the active controller; a broker forwards it there, as Kafka's do.
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.handler_table import serves
from pylog.cluster.controller import METADATA_TOPIC
from pylog.cluster.node_config import NodeSettings
from pylog.cluster.quorum import MetadataQuorum


@serves(ApiKey.DESCRIBE_QUORUM, versions=(0, 2))
def describe_quorum(ctx: RequestContext, req: Any, *, quorum: MetadataQuorum, settings: NodeSettings) -> dict:
    wanted = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if wanted != [(METADATA_TOPIC, 0)]:
        return {
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": "Only __cluster_metadata-0 has a quorum",
            "topics": [],
            "nodes": [],
        }
    if not quorum.is_leader:
        return {
            "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER,
            "error_message": "Not the active controller",
            "topics": [],
            "nodes": [],
        }
    now = quorum.clock.wall_ms()
    progress = quorum.voter_progress()
    heard = quorum.last_heard_ms()
    voters = []
    for v in settings.voter_ids:
        me = v == quorum.node_id
        voters.append(
            {
                "replica_id": v,
                "log_end_offset": progress.get(v, -1),
                "last_fetch_timestamp": now if me else heard.get(v, -1),
                "last_caught_up_timestamp": now
                if me or progress.get(v, -1) >= quorum.committed_offset
                else heard.get(v, -1),
            }
        )
    observers = [
        {
            "replica_id": node,
            "log_end_offset": offset,
            "last_fetch_timestamp": at,
            "last_caught_up_timestamp": at,
        }
        for node, (offset, at) in sorted(quorum.observers().items())
    ]
    nodes = []
    for v in settings.voters:
        listener = (
            settings.controller_listener_names[0] if settings.controller_listener_names else "CONTROLLER"
        )
        nodes.append(
            {"node_id": v.node_id, "listeners": [{"name": listener, "host": v.host, "port": v.port}]}
        )
    return {
        "error_code": 0,
        "error_message": None,
        "topics": [
            {
                "topic_name": METADATA_TOPIC,
                "partitions": [
                    {
                        "partition_index": 0,
                        "error_code": 0,
                        "error_message": None,
                        "leader_id": quorum.node_id,
                        "leader_epoch": quorum.term,
                        "high_watermark": quorum.committed_offset,
                        "current_voters": voters,
                        "observers": observers,
                    }
                ],
            }
        ],
        "nodes": nodes,
    }
