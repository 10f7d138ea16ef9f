"""Metadata: brokers, cluster id, controller and topics; creates unknown topics when allowed.

Auto-creation waits for the quorum to commit the topic (milliseconds with a
quorum of one), so the first answer already carries the new topic's leaders.
Leader epochs are reported as -1: clients then skip OffsetForLeaderEpoch.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import INTERNAL_TOPICS, NewTopic, TopicInfo, validate_topic_name
from pylog.broker.registry import handles

AUTHORIZED_OPS_UNKNOWN = -2147483648
ZERO_UUID = uuid.UUID(int=0)
AUTO_CREATE_WAIT_S = 10.0


@handles(ApiKey.METADATA, versions=(0, 12))
def metadata(ctx: RequestContext, req: Any) -> Any:
    md = ctx.broker.metadata
    requested = req.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        return _response(ctx, [_topic_entry(t) for t in sorted(md.topics().values(), key=lambda t: t.name)])
    allow_auto = bool(getattr(req, "allow_auto_topic_creation", True))
    auto = allow_auto and ctx.broker.config.bool("auto.create.topics.enable")
    names: list[str | None] = []
    for t in requested:
        name = t.name
        if name is None and getattr(t, "topic_id", None) not in (None, ZERO_UUID):
            info = md.topic_by_id(t.topic_id)
            name = info.name if info is not None else None
            if info is None:
                names.append(None)
                continue
        names.append(name)
    missing = [n for n in dict.fromkeys(names) if n is not None and md.topic(n) is None]
    creatable = [n for n in missing if auto and n not in INTERNAL_TOPICS and validate_topic_name(n).ok]
    if creatable:
        return _auto_create_then_answer(ctx, req, names, creatable)
    return _answer(ctx, req, names)


async def _auto_create_then_answer(ctx: RequestContext, req: Any, names: list, creatable: list[str]) -> Any:
    cfg = ctx.broker.config
    topics = [
        NewTopic(n, cfg.int("num.partitions"), cfg.int("default.replication.factor")) for n in creatable
    ]
    try:
        await asyncio.wait_for(
            ctx.broker.metadata.create_topics(topics, validate_only=False), AUTO_CREATE_WAIT_S
        )
    except asyncio.TimeoutError:
        pass
    return _answer(ctx, req, names, pending=set(creatable))


def _answer(ctx: RequestContext, req: Any, names: list[str | None], pending: set[str] = frozenset()) -> Any:  # type: ignore[assignment]
    md = ctx.broker.metadata
    entries = []
    for i, name in enumerate(names):
        if name is None:
            entries.append(
                {
                    "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "name": None,
                    "topic_id": req.topics[i].topic_id,
                    "partitions": [],
                }
            )
            continue
        info = md.topic(name)
        if info is not None:
            entries.append(_topic_entry(info))
            continue
        bad = validate_topic_name(name)
        if not bad.ok:
            code = bad.error
        elif name in pending:
            code = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        entries.append({"error_code": code, "name": name, "topic_id": ZERO_UUID, "partitions": []})
    return _response(ctx, entries)


def _topic_entry(info: TopicInfo) -> dict:
    return {
        "error_code": 0,
        "name": info.name,
        "topic_id": info.topic_id,
        "is_internal": info.internal,
        "partitions": [
            {
                "error_code": 0,
                "partition_index": p.index,
                "leader_id": p.leader,
                "leader_epoch": -1,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": [],
            }
            for p in sorted(info.partitions.values(), key=lambda p: p.index)
        ],
        "topic_authorized_operations": AUTHORIZED_OPS_UNKNOWN,
    }


def _response(ctx: RequestContext, topics: list[dict]) -> dict:
    md = ctx.broker.metadata
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in md.brokers()
        ],
        "cluster_id": md.cluster_id,
        "controller_id": md.controller_id,
        "topics": topics,
        "cluster_authorized_operations": AUTHORIZED_OPS_UNKNOWN,
    }
