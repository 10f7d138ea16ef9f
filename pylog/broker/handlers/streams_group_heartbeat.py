"""StreamsGroupHeartbeat (KIP-1071): join with a topology, heartbeat, reconcile tasks and leave.

As in Kafka's KafkaApis: the caller needs READ on the group (checked by the route), a topology
may not name Kafka's internal topics nor invalid topic names (STREAMS_INVALID_TOPOLOGY), and every
topic it names must be DESCRIBE-able (TOPIC_AUTHORIZATION_FAILED). The internal topics the
coordinator reports missing (repartition and changelog topics) are created by the broker through
the controller, as CreateTopics would, when the caller may CREATE them (on the cluster or on each
topic); otherwise the MISSING_INTERNAL_TOPICS status says which it may not create. Creation runs
in the background: the member sees the topics at a later heartbeat, when the group epoch moves
and the tasks get assigned.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse

from pylog.broker.access.authorization import Authorization
from pylog.broker.control.controller_client import ControllerClient
from pylog.broker.control.metadata import INTERNAL_TOPICS, MetadataView
from pylog.broker.coordinators.group_shell import GroupShell, client_host, not_available, topics_view
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves, top_level_error
from pylog.cluster.topic_control import NewTopic, validate_topic_name
from pylog.groups.streams import HeartbeatResult, StreamsHeartbeat, tasks_from_wire, topology_from_wire
from pylog.groups.streams import error_response as streams_error
from pylog.groups.streams_group import InternalTopic, Status
from pylog.security.acl_operations import AclOperation, ResourceType

log = logging.getLogger(__name__)


class InternalTopicCreator:
    """Creates a streams group's missing internal topics through the controller, in the
    background, at most one request per topic at a time."""

    def __init__(self, controller: ControllerClient) -> None:
        self.controller = controller
        self._inflight: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def create(self, topics: list[InternalTopic]) -> None:
        new = [t for t in topics if t.name not in self._inflight]
        if not new:
            return
        self._inflight.update(t.name for t in new)
        task = asyncio.get_running_loop().create_task(self._create(new))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _create(self, topics: list[InternalTopic]) -> None:
        try:
            results = await self.controller.create_topics(
                [
                    NewTopic(t.name, t.partitions, t.replication_factor, configs=dict(t.configs))
                    for t in topics
                ]
            )
            for r in results:
                if r.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.warning("could not create internal topic %s: %s", r.name, r.error_code)
        except Exception:  # the next heartbeat asks again
            log.warning("could not create internal topics %s", [t.name for t in topics], exc_info=True)
        finally:
            self._inflight.difference_update(t.name for t in topics)


error_response = top_level_error(StreamsGroupHeartbeatResponse)


@serves(ApiKey.STREAMS_GROUP_HEARTBEAT, versions=(0, 0), error_response=error_response)
def streams_group_heartbeat(
    ctx: RequestContext,
    req: StreamsGroupHeartbeatRequest,
    *,
    groups: GroupShell,
    metadata: MetadataView,
    authz: Authorization,
    creator: InternalTopicCreator,
) -> dict:
    if req.topology is not None:
        required = list(
            dict.fromkeys(
                name
                for s in req.topology.subtopologies
                for name in (
                    *s.source_topics,
                    *s.repartition_sink_topics,
                    *(t.name for t in s.repartition_source_topics),
                    *(t.name for t in s.state_changelog_topics),
                )
            )
        )
        prohibited = [t for t in required if t in INTERNAL_TOPICS]
        if prohibited:
            return streams_error(
                ErrorCode.STREAMS_INVALID_TOPOLOGY,
                f"Use of Kafka internal topics {','.join(prohibited)} in a Kafka Streams topology is "
                "prohibited.",
            )
        invalid = [t for t in required if validate_topic_name(t)[0] != 0]
        if invalid:
            return streams_error(
                ErrorCode.STREAMS_INVALID_TOPOLOGY,
                f"Topic names {','.join(invalid)} are not valid topic names.",
            )
        if len(authz.filter(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, required)) < len(required):
            return streams_error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    error = not_available(groups, req.group_id) if req.group_id else ErrorCode.NONE
    if error is not ErrorCode.NONE or groups is None or groups.coordinator is None:
        return streams_error(error or ErrorCode.COORDINATOR_NOT_AVAILABLE)
    out = groups.coordinator.streams_group_heartbeat(
        heartbeat_of(req, ctx.client_id or "", client_host(ctx.client_host)),
        topics_view(metadata.image),
        now_ms=groups.clock(),
    )
    result: HeartbeatResult = groups.apply(out, lambda r, e: HeartbeatResult(streams_error(e)))
    if result.to_create:
        _create(ctx, authz, creator, result)
    return result.response


def _create(
    ctx: RequestContext, authz: Authorization, creator: InternalTopicCreator, result: HeartbeatResult
) -> None:
    names = [t.name for t in result.to_create]
    refused: list[str] = []
    if not authz.cluster(ctx, AclOperation.CREATE):
        allowed = set(authz.filter(ctx, AclOperation.CREATE, ResourceType.TOPIC, names))
        refused = [n for n in names if n not in allowed]
    if refused:
        for s in result.response.get("status") or ():
            if s["status_code"] == Status.MISSING_INTERNAL_TOPICS:
                s["status_detail"] += f"; Unauthorized to CREATE on topics {', '.join(refused)}."
        return
    creator.create(list(result.to_create))


def heartbeat_of(req: Any, client_id: str, host: str) -> StreamsHeartbeat:
    """The request as the coordinator reads it."""
    topology = req.topology
    endpoint = req.user_endpoint
    return StreamsHeartbeat(
        req.group_id,
        req.member_id,
        req.member_epoch,
        req.instance_id,
        req.rack_id,
        req.rebalance_timeout_ms,
        None if topology is None else topology_from_wire(topology),
        tasks_from_wire(req.active_tasks),
        tasks_from_wire(req.standby_tasks),
        tasks_from_wire(req.warmup_tasks),
        req.process_id,
        None if endpoint is None else (endpoint.host, endpoint.port),
        None if req.client_tags is None else tuple((kv.key, kv.value) for kv in req.client_tags),
        bool(req.shutdown_application),
        client_id,
        host,
        req.endpoint_information_epoch,
        task_offsets=req.task_offsets is not None or req.task_end_offsets is not None,
        source_topic_regex=topology is not None and any(s.source_topic_regex for s in topology.subtopologies),
    )
