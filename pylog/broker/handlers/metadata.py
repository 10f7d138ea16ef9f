"""Metadata: brokers, cluster id, controller and topics; creates unknown topics when allowed.

Auto-creation waits for the quorum to commit the topic (milliseconds with a
quorum of one), so the first answer already carries the new topic's leaders.
Leader epochs are reported as -1: clients then skip OffsetForLeaderEpoch. Authorized
operations (KIP-430) are filled in when the request asks for them.

Topics asked by id (v12+): as in Kafka, a request naming any non-zero topic id is answered by id
alone, whatever the names say (the Java client sends ``name=""`` beside the id); an unknown id
answers UNKNOWN_TOPIC_ID. The controller named is a random live broker, as Kafka's KRaft brokers
name it: that broker forwards admin requests to the active controller, so a client never waits on
a cached controller that died.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode
from pylog.protocol.messages import MetadataRequest, MetadataResponse

from pylog.broker.control.controller_client import ControllerClient
from pylog.broker.control.metadata import INTERNAL_TOPICS, MetadataView, controller_for_clients
from pylog.broker.network.context import RequestContext
from pylog.broker.network.handler_table import serves
from pylog.cluster.controller import NewTopic, validate_topic_name
from pylog.cluster.image import TopicImage
from pylog.config import BrokerConfig
from pylog.security.acl_operations import ResourceType, operations_if_requested

ZERO_UUID = uuid.UUID(int=0)
AUTO_CREATE_WAIT_S = 10.0


@serves(ApiKey.METADATA, versions=(0, 12))
def metadata(
    ctx: RequestContext,
    req: MetadataRequest,
    *,
    metadata: MetadataView,
    controller: ControllerClient,
    config: BrokerConfig,
    node_id: int,
) -> MetadataResponse | Awaitable[MetadataResponse]:
    md = metadata
    requested = req.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        topics = [_topic_entry(md, req, t) for _, t in sorted(md.image.topics.items())]
        return _response(md, req, topics, ctx.listener, node_id)
    if asked_by_id(req):
        ids = [t.topic_id for t in requested if t.topic_id not in (None, ZERO_UUID)]
        entries = [_id_entry(md, req, i) for i in dict.fromkeys(ids)]
        return _response(md, req, entries, ctx.listener, node_id)
    auto = bool(getattr(req, "allow_auto_topic_creation", True)) and config.bool("auto.create.topics.enable")
    missing = [
        t.name
        for t in requested
        if t.name is not None and md.topic(t.name) is None and t.name not in INTERNAL_TOPICS
    ]
    creatable = [n for n in dict.fromkeys(missing) if auto and validate_topic_name(n)[0] == 0]
    if creatable:
        return _auto_create_then_answer(md, controller, req, creatable, ctx.listener, node_id)
    return _answer(md, req, ctx.listener, node_id)


async def _auto_create_then_answer(
    md: MetadataView, controller: ControllerClient, req: MetadataRequest, creatable: list[str], listener: str,
    node_id: int,
) -> MetadataResponse:
    try:
        await asyncio.wait_for(controller.create_topics([NewTopic(n) for n in creatable]), AUTO_CREATE_WAIT_S)
    except asyncio.TimeoutError:
        pass
    return _answer(md, req, listener, node_id, pending=set(creatable))


def _answer(
    md: MetadataView, req: MetadataRequest, listener: str, node_id: int,
    pending: frozenset[str] | set[str] = frozenset(),
) -> MetadataResponse:
    entries = []
    for t in req.topics or ():
        info = md.topic(t.name) if t.name is not None else None
        if info is not None:
            entries.append(_topic_entry(md, req, info))
            continue
        code, _ = validate_topic_name(t.name or "")
        if not code:
            code = (
                ErrorCode.LEADER_NOT_AVAILABLE if t.name in pending else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
        entries.append(_error_entry(t.name, code, ZERO_UUID))
    return _response(md, req, entries, listener, node_id)


def asked_by_id(req: MetadataRequest) -> bool:
    """Whether a Metadata request names topics by id (then its names are not looked at)."""
    return req.topics is not None and any(
        getattr(t, "topic_id", None) not in (None, ZERO_UUID) for t in req.topics
    )


def _id_entry(
    md: MetadataView, req: MetadataRequest, topic_id: uuid.UUID
) -> MetadataResponse.MetadataResponseTopic:
    info = md.topic(topic_id)
    if info is None:
        return _error_entry(None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id)
    return _topic_entry(md, req, info)


def _error_entry(
    name: str | None, code: int, topic_id: uuid.UUID
) -> MetadataResponse.MetadataResponseTopic:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, partitions=[]
    )


def _topic_entry(
    md: MetadataView, req: MetadataRequest, topic: TopicImage
) -> MetadataResponse.MetadataResponseTopic:
    live = {b.broker_id for b in md.image.brokers.values() if not b.fenced}
    return MetadataResponse.MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.name in INTERNAL_TOPICS,
        partitions=[
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0,
                partition_index=p.partition_id,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=[r for r in p.replicas if r not in live],
            )
            for p in md.partitions(topic)
        ],
        topic_authorized_operations=operations_if_requested(
            getattr(req, "include_topic_authorized_operations", False), ResourceType.TOPIC
        ),
    )


def _response(
    md: MetadataView,
    req: MetadataRequest,
    topics: list[MetadataResponse.MetadataResponseTopic],
    listener: str,
    node_id: int,
) -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[
            MetadataResponse.MetadataResponseBroker(node_id=node, host=host, port=port, rack=rack)
            for node, host, port, rack in md.brokers(listener)
        ],
        cluster_id=md.cluster_id,
        controller_id=controller_for_clients(md, node_id, listener),
        topics=topics,
        cluster_authorized_operations=operations_if_requested(
            getattr(req, "include_cluster_authorized_operations", False), ResourceType.CLUSTER
        ),
    )
