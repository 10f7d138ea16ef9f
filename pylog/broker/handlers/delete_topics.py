"""DeleteTopics: by name (v0-5) or by name or id (v6); the logs go when the removal applies."""

from __future__ import annotations

import uuid
from typing import Any

from pylog.protocol.api import ApiKey
from pylog.protocol.errors import ErrorCode

from pylog.broker.context import RequestContext
from pylog.broker.metadata import INTERNAL_TOPICS, Outcome
from pylog.broker.registry import handles

ZERO_UUID = uuid.UUID(int=0)


@handles(ApiKey.DELETE_TOPICS, versions=(0, 6))
async def delete_topics(ctx: RequestContext, req: Any) -> dict:
    md = ctx.broker.metadata
    wanted: list[tuple[str | None, Any]] = []
    if getattr(req, "topics", None):
        for t in req.topics:
            wanted.append((t.name, getattr(t, "topic_id", ZERO_UUID)))
    else:
        wanted = [(n, ZERO_UUID) for n in req.topic_names or []]
    enabled = ctx.broker.config.bool("delete.topic.enable")
    outcomes: list[Outcome | None] = []
    to_delete: list[tuple[int, str]] = []
    for i, (name, topic_id) in enumerate(wanted):
        info = md.topic(name) if name else (md.topic_by_id(topic_id) if topic_id != ZERO_UUID else None)
        if not enabled:
            outcomes.append(Outcome(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."))
        elif info is None:
            code = (
                ErrorCode.UNKNOWN_TOPIC_ID
                if not name and topic_id != ZERO_UUID
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            outcomes.append(Outcome(code, "This server does not host this topic-partition."))
        elif info.name in INTERNAL_TOPICS:
            outcomes.append(Outcome(ErrorCode.INVALID_REQUEST, f"Topic {info.name} is an internal topic."))
        else:
            outcomes.append(None)
            to_delete.append((i, info.name))
            wanted[i] = (info.name, info.topic_id)
    if to_delete:
        results = await md.delete_topics([n for _, n in dict.fromkeys(to_delete)])
        by_name = dict(zip([n for _, n in dict.fromkeys(to_delete)], results))
        for i, name in to_delete:
            outcomes[i] = by_name[name]
    responses = []
    for (name, topic_id), outcome in zip(wanted, outcomes):
        assert outcome is not None
        responses.append(
            {
                "name": name,
                "topic_id": topic_id,
                "error_code": outcome.error,
                "error_message": outcome.message,
            }
        )
    return {"throttle_time_ms": 0, "responses": responses}
