"""ConsumerGroupHeartbeat (KIP-848): join, heartbeat, reconcile and leave in one API.

A `group.protocol=consumer` member joining a classic group of "consumer" protocol members
converts it online (`group.consumer.migration.policy`); any other group of another type answers
GROUP_ID_NOT_FOUND. `heartbeat` takes its collaborators explicitly (the group shell, the topics
of the metadata image, the client's identity).
"""

from __future__ import annotations

from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse

from pylog.broker.control.metadata import MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, client_host, not_available, topics_view
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.groups.consumer import Heartbeat, TopicsView
from pylog.groups.group_records import from_wire

error_response = top_level_error(ConsumerGroupHeartbeatResponse)


@serves(ApiKey.CONSUMER_GROUP_HEARTBEAT, versions=(0, 1), error_response=error_response)
def consumer_group_heartbeat(
    ctx: RequestContext, req: ConsumerGroupHeartbeatRequest, *, groups: GroupShell, metadata: MetadataView
) -> dict:
    host = client_host(ctx.client_host)
    return heartbeat(groups, topics_view(metadata.image), req, ctx.client_id or "", host)


def heartbeat(shell: GroupShell | None, topics: TopicsView, req: Any, client_id: str, host: str) -> dict:
    error = not_available(shell, req.group_id) if req.group_id else ErrorCode.NONE
    if error is not ErrorCode.NONE or shell is None or shell.coordinator is None:
        return _error(error or ErrorCode.COORDINATOR_NOT_AVAILABLE)
    hb = Heartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.instance_id,
        req.rack_id,
        req.rebalance_timeout_ms,
        req.subscribed_topic_names,
        getattr(req, "subscribed_topic_regex", None),
        req.server_assignor,
        None if req.topic_partitions is None else from_wire(req.topic_partitions),
        client_id,
        host,
    )
    out = shell.coordinator.consumer_group_heartbeat(hb, topics, now_ms=shell.clock())
    return shell.apply(out, _failed)


def _failed(response: dict, error: ErrorCode) -> dict:
    return _error(error)


def _error(error: ErrorCode) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "error_message": error.name,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }
